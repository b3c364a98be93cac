# `make demo` grades the bundled example submission; `make test` runs the whole test suite.
# Both create .venv on first use. torch is installed first, pinned, so that nothing pulls CUDA builds.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test release bench

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt torch==2.13.0
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/autograder grade examples/submission --results $(VENV)/demo-results.json

test: $(STAMP)
	$(VENV)/bin/autograder release --check
	$(PY) -m pytest -q

release: $(STAMP)
	$(VENV)/bin/autograder release

bench: $(STAMP)
	$(PY) benchmarks/run.py
