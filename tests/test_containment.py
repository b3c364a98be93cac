"""A submission that hangs, exits, crashes or floods output fails only the cases it was running."""
import os
import sys
import time

import pytest
from conftest import grade_folder, solutions_with

from autograder import runner

pytestmark = pytest.mark.slow  # every test here grades or starts a process

SAMPLE = "        words = []\n        while len(words) < max_len:"

# Misbehaviour placed in NGramLM.sample: the two sampling cases fail, every other case still passes.
MISBEHAVIOUR = [
    ("hangs", "        while True:\n            pass\n", "Timed out"),
    ("sleeps", "        import time\n        time.sleep(600)\n", "Timed out"),
    ("calls sys.exit", "        import sys\n        sys.exit(0)\n", "SystemExit"),
    ("calls os._exit", "        import os\n        os._exit(0)\n", "exited with status 0"),
    ("kills itself", "        import os, signal\n        os.kill(os.getpid(), signal.SIGSEGV)\n", "killed by SIGSEGV"),
    ("floods stdout", "        while True:\n            print('x' * 65536)\n", "Timed out"),
    ("allocates without end", "        hog = []\n        while True:\n            hog.append(np.empty(1 << 27))\n", "MemoryError"),
]


@pytest.mark.parametrize("behaviour, code, feedback", MISBEHAVIOUR, ids=[m[0] for m in MISBEHAVIOUR])
def test_misbehaviour_is_contained(quick_rubric, tmp_path, behaviour, code, feedback):
    folder = solutions_with(tmp_path, "ngram.py", SAMPLE, code + SAMPLE)
    started = time.monotonic()
    run = grade_folder(quick_rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    elapsed = time.monotonic() - started
    failed = [r for r in run.results if not r.passed]
    assert {r.case.check for r in failed} == {"ngram.sampling"}
    assert all(feedback in r.output for r in failed), [r.output for r in failed]
    # A failing case costs its own timeout plus a worker restart, nothing more (with room for a busy machine: these
    # cases mostly wait, so they run beside other tests).
    assert elapsed < sum(r.case.timeout + 5 for r in failed) + 30


def test_a_broken_file_fails_its_component_only(rubric, tmp_path):
    folder = solutions_with(tmp_path, "ngram.py", "def pad_sentence(", "def pad_sentence(:")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    ngram = [r for r in run.results if r.case.component == "ngram"]
    assert not any(r.passed for r in ngram)
    assert all("SyntaxError" in r.output and "line" in r.output for r in ngram)
    assert all(r.passed for r in run.results if r.case.component != "ngram")


def test_missing_file_is_reported_as_not_submitted(rubric, tmp_path):
    folder = solutions_with(tmp_path, "ngram.py", "BOS = ", "BOS = ")
    (folder / "ngram.py").unlink()
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    ngram = [r for r in run.results if r.case.component == "ngram"]
    assert ngram and all(r.output.startswith("Not submitted: ngram.py") for r in ngram)
    assert all(r.passed for r in run.results if r.case.component != "ngram")


def test_only_the_worker_imports_the_submission(rubric, tmp_path):
    # The worker may not be able to write anywhere the test can read (another uid, private mounts),
    # so the submission refuses to be imported by this process instead of reporting who imported it.
    line = f"import os as _os\nassert _os.getpid() != {os.getpid()}, 'imported by the grader'\n"
    folder = solutions_with(tmp_path, "ngram.py", "import math\n", "import math\n" + line)
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram"])
    assert run.results and all(r.passed for r in run.results)
    assert not any(getattr(m, "__file__", None) and str(folder) in m.__file__ for m in list(sys.modules.values()))


@pytest.mark.serial
def test_code_that_hangs_in_every_case_costs_one_timeout_and_a_shared_budget(quick_rubric, tmp_path, monkeypatch):
    # pad_sentence hangs, and nearly every ngram case calls it: each case would otherwise wait out its own limit.
    monkeypatch.setattr(runner, "HUNG_BUDGET", 6.0)
    folder = solutions_with(tmp_path, "ngram.py", '    """Pad one sentence for an n-gram model.',
                            '    while True:\n        pass\n    """Pad one sentence for an n-gram model.')
    started = time.monotonic()
    run = grade_folder(quick_rubric, folder, tmp_path, component_ids=["ngram"])
    elapsed = time.monotonic() - started
    first, *later = [r for r in run.results if not r.passed]
    assert first.outcome.kind == "timeout" and "did not finish within" in first.output
    assert later and all(r.outcome.kind == "timeout" for r in later)
    assert any(r.output.startswith("Not run: case 1.1 of this component timed out") for r in later)
    assert elapsed < first.case.timeout + runner.HUNG_BUDGET + 10, elapsed
    assert sum(r.case.timeout for r in [first, *later]) > 3 * elapsed  # what it would have cost without the budget
