"""Each command imports what it uses (issue 43): the command line parses before it imports a command, and a check of a
component whose cases build no tensors (ngram, backprop, word2vec) imports no torch in the grader nor in its workers.
These hold the import sets, not the seconds (BENCHMARKS.md times them)."""
import importlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.cases import USES
from autograder.rubric import load_rubric
from autograder.runner import _modules
from autograder.sandbox.host.process import WORKER_SIDE, forkable, template_modules
from autograder.tensors import imported

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("numpy", "torch", "yaml", "pydantic", "nbformat")
# What the command line itself imports, before it knows the command: the exit statuses and the tiers' names.
COMMAND_LINE = {"autograder", "autograder.cli", "autograder.terminal", "autograder.sandbox", "autograder.sandbox.host",
                "autograder.sandbox.host.reaper", "autograder.sandbox.host.tiers"}


def imported_by(*argv: str, cwd: Path = ROOT) -> set[str]:
    """The grader's modules and the heavy libraries a fresh interpreter holds after running the command line on `argv`."""
    code = ("import json, sys\nfrom autograder.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(json.dumps([m for m in sys.modules if m.split('.')[0] in ('autograder', *{LIBRARIES!r})]))")
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["check", "--help"]])
def test_version_and_help_import_the_command_line_alone(argv):
    assert imported_by(*argv) == COMMAND_LINE


@pytest.mark.slow
def test_a_check_of_ngram_imports_no_torch_in_the_grader(tmp_path):
    (tmp_path / "ngram.py").write_text((ROOT / "solutions" / "ngram.py").read_text())
    modules = imported_by("check", "ngram", "--dir", str(tmp_path), "-q")
    assert "torch" not in modules and "autograder.cases.ngram" in modules
    # Nor a TA's or staff's libraries: the batch, the releases' (nbformat), other components' oracles.
    assert not {m for m in modules if m.startswith(("autograder.batch", "autograder.release.", "nbformat", "autograder.oracles.a"))}


def test_the_workers_of_ngram_backprop_and_word2vec_import_numpy_alone():
    rubric = load_rubric(ROOT / "grading.yaml")
    part_one = [k for cid in ("ngram", "backprop", "word2vec") for k in rubric.component(cid).cases]
    assert {USES[cid] for cid in ("ngram", "backprop", "word2vec")} == {("numpy",)}
    assert template_modules(_modules(part_one)) == ("numpy",)
    assert forkable(rubric.component("backprop").forbidden.modules, template_modules(_modules(part_one)))
    # A component whose cases build tensors: its workers import torch first, and what a first backward imports.
    assert "torch" in template_modules(_modules(rubric.component("attention").cases))


@pytest.mark.slow
def test_the_worker_and_the_template_import_no_library_of_their_own():
    """What a worker preloads is all it imports before student code: its own modules import neither numpy nor torch."""
    code = (f"import sys\nsys.path.insert(0, {str(WORKER_SIDE)!r})\nimport template, worker\n"
            f"print(sorted(m for m in {LIBRARIES!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_the_parsers_similarity_default_is_the_reports():
    from autograder.batch.report import DEFAULT_THRESHOLD
    from autograder.cli import SIMILARITY_HELP

    assert SIMILARITY_HELP == f"(default: {DEFAULT_THRESHOLD})"


def test_a_type_test_waits_for_an_import_another_thread_has_begun(tmp_path, monkeypatch):
    """A lane may import torch while another judges ngram's answers: sys.modules then holds a half-made torch, whose
    Tensor a type test must not look up (seen: "partially initialized module 'torch' has no attribute 'Tensor'")."""
    (tmp_path / "slow_library.py").write_text("import threading, time\nSTARTED = threading.Event()\nSTARTED.set()\n"
                                              "time.sleep(0.5)\nclass Tensor:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importing = threading.Thread(target=importlib.import_module, args=("slow_library",))
    importing.start()
    while "slow_library" not in sys.modules or not hasattr(sys.modules["slow_library"], "STARTED"):
        time.sleep(0.01)
    try:
        assert hasattr(imported("slow_library"), "Tensor")
    finally:
        importing.join()
        sys.modules.pop("slow_library", None)
