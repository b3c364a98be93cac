"""No unread code runs (issue 39): attacks that run code the tamper scan never read, each graded by the real grader.

Every attack is solutions/ with code appended to one component's file, one attack per component so that two grades
hold them all. Each route runs code the scan never read, doing what the scan refuses in what it reads (a heap walk, a
frame, the guard taken off sys.meta_path: UNREAD), and each won on 2885c7d: the unread code ran, printed its marker,
and the component kept every point (or, in word2vec, which forbids torch, computed with torch). Each test asserts the
defence that holds now, by what the grader reports for it, and what the student sees:

- the submission's folder is never on sys.path, and a file named like a module that `import` finds first is not
  copied (submission.py, its account says to rename it), so numpy's lazy `from secrets import randbits` gets the
  standard library's;
- every file is scanned, and a worker's folder holds only the files the scan passed (forbidden.importable), so a
  refused file that a library imports by name is not there;
- the worker's audit hooks (sandbox/worker/audit.py) refuse, with the student's line: unpickling a global, a file
  written while grading, code compiled from a string by a module that runs strings, an import after sys.path changed.

The second grade has the scans switched off, as tests/test_security_data.py does, to show that the audit hooks hold on
their own against what the scan refuses by name (marshal, frames, a tracer, ctypes, a profiler, the heap) and against a
fresh interpreter started to run code no scan read; that the scan names each of those lines is checked without
grading. A clean component keeps every point in each grade.
"""
from __future__ import annotations

import marshal
import pickle
import shutil
from pathlib import Path

import pytest
from conftest import SOLUTIONS, grade_folder, scores_by_component

from autograder.forbidden import WHY, scan_submission
from autograder.runner import GradeRun
from autograder.submission import open_submission

pytestmark = pytest.mark.slow  # every test here reads a grade

MARK = "UNREAD CODE RAN"
# What unread code would do: what the tamper scan refuses in code it reads (gc, sys._getframe, the guard's record
# emptied and the guard taken off sys.meta_path, so that a component may import what it forbids).
UNREAD = f"""\
import gc
import sys

print({MARK!r})
sys._getframe(0)
for _held in gc.get_objects():
    if type(_held).__name__ == "Guard" and hasattr(_held, "violations"):  # the worker's, not torch._guards.Guard
        _held.violations.clear()
        _held.tampered = lambda: None
sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__name__ != "Guard"]
"""
AUDIT = "Refused at run time: the worker's audit hook refused "  # proxy.RefusedAtRunTime, with audit.py's record
AUDIT_END = ". That reaches into the grader's process, which submissions may not do (caught or not, the case fails)."
GUARD = "Uses what this component forbids: "


class _Exec:
    def __reduce__(self):
        return exec, (UNREAD,)


# ---- the routes, each in a component of its own -------------------------------------------------------------

# The first route: a file named like a module of the standard library, imported by numpy by that name when its
# random module loads, first on sys.path; it takes the guard off, and word2vec (NumPy only) computes with torch.
SHADOW = {"secrets": UNREAD + "import random\n\n\ndef randbits(k):\n    return random.getrandbits(k)\n"}
SHADOW_USER = """\
def noise_distribution(counts, power=0.75):
    np.random.default_rng(0)  # numpy.random, loaded now if not before, imports `secrets` by name
    import torch
    weights = torch.as_tensor(np.asarray(counts, dtype=np.float64)) ** power
    return (weights / weights.sum()).numpy()
"""
# The second route: a pickle as a bytes literal, which numpy unpickles: builtins.exec of the unread code.
PICKLED = f"""\
import io

PAYLOAD = {pickle.dumps(_Exec())!r}
_state = np.load(io.BytesIO(PAYLOAD), allow_pickle=True)
"""
# A file written while grading, then imported.
WRITTEN = f"""\
with open("later.py", "w") as _later:
    _later.write({UNREAD!r})
import later  # noqa: E402
"""
# A file of the submission that the scan refuses and no component imports, imported by a library by name.
BY_NAME = {"stash": UNREAD}
BY_NAME_USER = """\
import unittest

_found = unittest.defaultTestLoader.loadTestsFromName("stash")
print("the loader:", *unittest.defaultTestLoader.errors)
"""
# A string run as code by a module that runs strings, reached as another module's attribute, under no name the scan flags.
STRING = f"""\
from sympy.utilities.timeutils import timeit as _clock

_clock.Timer({f"print({MARK!r})"!r}).timeit(1)
"""
# A zip of code written while grading, put on sys.path (which the scan does not flag), then imported.
ZIPPED = f"""\
import sys
import zipfile

with zipfile.ZipFile("extra.zip", "w") as _zip:
    _zip.writestr("extra_helpers.py", {UNREAD!r})
sys.path.append("extra.zip")
import extra_helpers  # noqa: E402
"""
UNREAD_ROUTES = {"word2vec.py": SHADOW_USER, "ngram.py": PICKLED, "rnn.py": WRITTEN, "lstm.py": BY_NAME_USER, "attention.py": STRING,
                 "seq2seq.py": ZIPPED}

# What the scan refuses by name, run with the scans off: the audit hooks alone.
MARSHALLED = f"""\
import marshal

_code = marshal.loads({marshal.dumps(compile(UNREAD, "<payload>", "exec"))!r})
"""
TRACEBACK = """\
try:
    raise RuntimeError
except RuntimeError as _caught:
    _frame = _caught.__traceback__.tb_frame
"""
TRACER = """\
import sys

sys.settrace(lambda *args: None)
sys.settrace(None)
"""
CTYPES = """\
import numpy as np

_buffer = np.ctypeslib.as_ctypes(np.zeros(3))
"""
PROFILER = """\
import threading

threading.setprofile(print)
_thread = threading.Thread(target=int)
_thread.start()
_thread.join()
threading.setprofile(None)
"""
HEAP = """\
import gc

_guards = [held for held in gc.get_objects() if type(held).__name__ == "Guard"]
"""
# A fresh interpreter, which would run code no scan read with none of the worker's walls: word2vec (NumPy only)
# computed with torch in a child. Nothing in a submission's scan flags it: the hook refuses, seccomp's exec refusal
# stands behind it (tests/test_seccomp.py).
CHILD = """\
import subprocess
import sys

def noise_distribution(counts, power=0.75):
    script = "import sys, torch; w = torch.tensor(eval(sys.argv[1]), dtype=torch.float64) ** float(sys.argv[2]); print((w / w.sum()).tolist())"
    done = subprocess.run([sys.executable, "-c", script, repr(list(counts)), repr(power)], capture_output=True, text=True)
    return np.array(eval(done.stdout))
"""
SCANNED_ROUTES = {"ngram.py": MARSHALLED, "rnn.py": TRACEBACK, "lstm.py": TRACER, "attention.py": CTYPES, "transformer.py": PROFILER,
                  "seq2seq.py": HEAP, "word2vec.py": CHILD}
COMPONENTS = {"ngram.py": "ngram", "rnn.py": "rnn", "lstm.py": "lstm", "attention.py": "attention", "transformer.py": "transformer",
              "seq2seq.py": "seq2seq", "word2vec.py": "word2vec", "backprop.py": "backprop"}


def submission(folder: Path, routes: dict[str, str], helpers: dict[str, str] = {}) -> Path:  # noqa: B006
    """solutions/ with each route appended to its file, and `helpers` as files of their own (name -> source)."""
    folder.mkdir(parents=True)
    for path in SOLUTIONS.glob("*.py"):
        shutil.copy(path, folder / path.name)
    for file, code in routes.items():
        with open(folder / file, "a") as f:
            f.write("\n\n" + code)
    for name, source in helpers.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def line_of(folder: Path, file: str, text: str) -> int:
    lines = [n for n, line in enumerate((folder / file).read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, (file, text, lines)
    return lines[0]


@pytest.fixture(scope="module")
def unread(rubric, tmp_path_factory) -> tuple[Path, GradeRun, str]:
    """The graded submission, its grade, and its account of its files as the student reads it (`grade` prints it)."""
    tmp = tmp_path_factory.mktemp("unread")
    folder = submission(tmp / "submission", UNREAD_ROUTES, {**SHADOW, **BY_NAME})
    components = [COMPONENTS[file] for file in UNREAD_ROUTES] + ["backprop"]
    account = "\n".join(str(entry) for entry in open_submission(folder, tmp / "account").account)
    return folder, grade_folder(rubric, folder, tmp, component_ids=components, timing=False), account


@pytest.fixture(scope="module")
def scans_off(rubric, tmp_path_factory) -> tuple[Path, GradeRun]:
    tmp = tmp_path_factory.mktemp("scans-off")
    folder = submission(tmp / "submission", SCANNED_ROUTES)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("autograder.runner.scan_submission", lambda *args, **kwargs: [])
        run = grade_folder(rubric, folder, tmp, component_ids=[COMPONENTS[file] for file in SCANNED_ROUTES] + ["backprop"],
                           timing=False)
    return folder, run


def says(run: GradeRun, component: str, message: str, every: bool = True) -> None:
    """Every case of `component` failed saying `message` first (or, not `every`, the one whose request met it: the first
    case, which imports the file), and the unread code printed nothing anywhere."""
    results = [r for r in run.results if r.case.component == component]
    wrong = [(r.case.name, r.output) for r in results if r.passed or not r.output.startswith(message)]
    assert results and (not wrong if every else len(wrong) < len(results)), \
        f"expected {'every' if every else 'a'} {component} case to say {message!r}; these did not: {wrong[:3]}"
    assert not [r for r in run.results if MARK in r.printed]


def refused(folder: Path, file: str, what: str, text: str | None) -> str:
    """What a student sees where the audit hook refused `what`, led there by the line of `file` holding `text`."""
    return AUDIT + what + (f" ({file}, line {line_of(folder, file, text)})" if text else "") + AUDIT_END


def keeps_every_point(run: GradeRun, component: str) -> None:
    got, most = scores_by_component(run)[component]
    assert got == most > 0, [(r.case.name, r.output) for r in run.results if r.case.component == component and not r.passed]


def test_a_file_named_like_the_standard_librarys_module_numpy_imports_never_runs(unread):
    """The issue's first route. Defence: the file is not copied, as no code could import it under that name (the
    account tells the student to rename it), and the worker's folder is not on sys.path; so the guard stays in place
    and refuses torch in word2vec."""
    folder, run, account = unread
    line = line_of(folder, "word2vec.py", "    import torch")
    says(run, "word2vec", f"{GUARD}import of torch (word2vec.py, line {line})")
    assert "secrets.py: ignored: named like `secrets`, a module of Python's standard library" in account


def test_a_pickle_that_numpy_unpickles_is_refused(unread):
    """The issue's second route. Defence: the audit hook refuses unpickling a global (here builtins.exec) wherever
    numpy or torch would unpickle for the student; the student's line is the np.load."""
    folder, run, _ = unread
    says(run, "ngram", refused(folder, "ngram.py", "unpickling builtins.exec", "_state = np.load("))


def test_a_file_written_while_grading_is_never_imported(unread):
    folder, run, _ = unread
    says(run, "rnn", refused(folder, "rnn.py", "importing later.py, which was not in the submission when the grader scanned it",
                             "import later"))


def test_a_refused_file_that_a_library_imports_by_name_is_not_there(unread):
    """Defence: every file is scanned, and the worker's folder holds only those that passed: unittest's loader finds
    no `stash`, so lstm keeps its points, and the student's account says why."""
    folder, run, account = unread
    keeps_every_point(run, "lstm")
    assert any("No module named 'stash'" in r.printed for r in run.results if r.case.component == "lstm")
    assert not [r for r in run.results if MARK in r.printed]
    refused_here = f"refused by the grader's scan, so no code can import it: line 1: import of gc ({WHY})"
    assert f"stash.py: copied: not a component file; {refused_here}" in account


def test_a_string_run_by_a_module_that_runs_strings_is_refused(unread):
    folder, run, _ = unread
    says(run, "attention", refused(folder, "attention.py", "compiling code at run time", "_clock.Timer("))


def test_code_put_on_sys_path_while_grading_is_never_imported(unread):
    folder, run, _ = unread
    says(run, "seq2seq", refused(folder, "seq2seq.py", "an import after sys.path was changed", "import extra_helpers"))


def test_the_other_component_keeps_every_point(unread):
    keeps_every_point(unread[1], "backprop")


@pytest.mark.parametrize("file, what, text, scanned", [
    ("ngram.py", "marshal.loads", "_code = marshal.loads(", "import marshal"),
    ("rnn.py", "reading .tb_frame", "_frame = _caught", "_frame = _caught"),
    ("lstm.py", "sys.settrace", "sys.settrace(lambda", "sys.settrace(lambda"),
    ("attention.py", "ctypes.cdata", "_buffer = np.ctypeslib", "_buffer = np.ctypeslib"),
    ("transformer.py", "sys.setprofile", None, "threading.setprofile(print)"),  # in its thread, which no line of theirs calls
    ("seq2seq.py", "gc.get_objects", "_guards = [held", "import gc"),
    ("word2vec.py", "starting another program (subprocess.Popen)", "done = subprocess.run(", "return np.array(eval("),
])
def test_what_the_scan_refuses_by_name_the_audit_hook_refuses_when_it_runs(scans_off, file, what, text, scanned):
    """With the scans off, each route runs, and the audit hook refuses it where it runs, with the student's line (the
    scan, on, refuses the route's line before anything runs); the clean component keeps its points. Each route but the
    profiler and the child fails the import of its file, so every case; the profiler's thread is refused, the import
    goes on, and the case whose request imported the file fails; the child is refused in each case that calls for it."""
    folder, run = scans_off
    says(run, COMPONENTS[file], refused(folder, file, what, text), every=file not in ("transformer.py", "word2vec.py"))
    line = line_of(folder, file, scanned)
    assert any(finding.startswith(f"line {line}: ") for finding in scan_submission(folder, file)), scan_submission(folder, file)
    keeps_every_point(run, "backprop")

