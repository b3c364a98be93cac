# `make demo` grades the bundled example submission; `make test` runs the whole test suite; `make test-fast` only the
# tests that start no process and need no network (seconds, for the edit-test loop); `make docs` builds the site.
# Both create .venv on first use. torch is installed first, pinned, so that nothing pulls CUDA builds.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

PYTEST := $(PY) -m pytest -q
PYTEST_ARGS ?=
# Parallel pytest processes for the tests that may share the machine. 2 on this 2-core machine (README).
JOBS ?= 2

.PHONY: demo test test-fast release bench browser docs

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt torch==2.13.0
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test,batch,ray,docs]'
	touch $(STAMP)

# The example holds two planted mistakes (examples/README.md); tests/test_hostile_grader_failures.py checks this score.
DEMO_SCORE := 55 / 279
# The tier the grader should reach here (sandbox/host/tiers.py): root as root (with bubblewrap's mounts where bwrap is
# installed), else bubblewrap where it is installed, else same-user.
BWRAP := $(shell command -v bwrap)
DEMO_TIER := $(if $(filter 0,$(shell id -u)),root$(if $(BWRAP), with bubblewrap),$(if $(BWRAP),bubblewrap,same-user))
demo: $(STAMP)
	$(VENV)/bin/autograder grade examples/submission --results $(VENV)/demo-results.json
	@echo "Expected: Total: $(DEMO_SCORE). examples/submission holds two planted mistakes (examples/README.md): ngram's perplexity forgets the EOS tokens, backprop's embedding gradient drops repeated ids."
	@echo "Expected isolation: $(DEMO_TIER) (a weaker one is a warning on the first lines, with its cause and how to mend it)."

# The whole suite in two passes: everything but the serial tests in parallel (xdist; tests/conftest.py hands tests
# out one by one, and a module with expensive module-scoped fixtures whole to one process), then the serial ones
# (timing measurements) alone on the machine. The parallel pass lists its 15 slowest tests: the suite must stay under 12 minutes.
# Both passes always run; a failure in either fails the target. pytest's status 5 (no test collected, as when
# PYTEST_ARGS selects tests of one pass only) fails neither. matplotlib starts with an empty cache, as on a fresh
# machine (its first import builds its font cache, running fc-list), so that no test passes only on a machine that ran before.
test: $(STAMP) browser
	$(VENV)/bin/autograder release --check
	$(DOCS)
	export MPLCONFIGDIR="$$(mktemp -d)"; trap 'rm -rf "$$MPLCONFIGDIR"' EXIT; status=0; \
	$(PYTEST) -n $(JOBS) -m "not serial" --durations=15 $(PYTEST_ARGS) || [ $$? -eq 5 ] || status=1; \
	$(PYTEST) -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ] || status=1; \
	exit $$status

# The browser tests (tests/browser.py: Playwright driving the system's chromium, never a browser of Playwright's own)
# need Debian's chromium: installed here when this machine lets us (root, apt-get), as .ci/run installs bubblewrap,
# quietly, `apt-get update` only when the first try fails. Elsewhere one line says they will be skipped.
CHROMIUMS := chromium chromium-browser google-chrome
browser:
	@for name in $(CHROMIUMS); do command -v $$name >/dev/null && exit 0; done; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  { apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; } >/dev/null 2>&1 \
	    || echo "chromium could not be installed (apt-get install chromium): the browser tests will be skipped"; \
	else \
	  echo "chromium is not installed (apt-get install chromium, as root): the browser tests will be skipped"; \
	fi

# The documentation site (mkdocs.yml, docs/) into site/, in about a second. --strict (and mkdocs.yml's validation): a
# broken link or anchor, a page left out of the nav or a missing include (SECURITY.md, BENCHMARKS.md) fails it.
# Not --quiet: it hides the warnings from the strict count, and the build passes (mkdocs issue 4126). So its output is
# held back and shown whole only when the build fails; success prints mkdocs' last line. NO_MKDOCS_2_WARNING: Material's
# notice about its successor, printed on every build, says nothing about this site.
DOCS = @out=$$(NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict 2>&1) && echo "$$out" | tail -n 1 \
	|| { echo "$$out"; echo "the documentation site failed its strict build (make docs)"; exit 1; }
docs: $(STAMP)
	$(DOCS)

# No worker, no subprocess, no network: tests/conftest.py fails a test that starts a process without the slow mark.
test-fast: $(STAMP)
	$(PYTEST) -m "not slow and not network" $(PYTEST_ARGS) || [ $$? -eq 5 ]

release: $(STAMP)
	$(VENV)/bin/autograder release

# Section 7 opens the class report in chromium (it says so where chromium is missing).
bench: $(STAMP) browser
	$(PY) benchmarks/run.py
