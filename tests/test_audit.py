"""The worker's audit hook, rule by rule (sandbox/worker/audit.py), judged on frames of code compiled under the file
names whose owners the rules tell apart: the submission's, a library's, the grader's, code from a string. A hook
installed here could never be removed, so these tests ask the rules, as the hook does, and install nothing; one
test installs them in a throwaway process. tests/test_unread_code.py grades submissions that try each way round."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import timeit
import typing
from pathlib import Path

import numpy
import pytest
import torch

from autograder.forbidden import importable, python_files, scan_submission
from autograder.sandbox.host.process import WORKER_FILES
from autograder.sandbox.worker import audit
from autograder.sandbox.worker.audit import Refused, Rules
from autograder.submission import open_submission, shadowed
from autograder.submission.names import API_FILES

WORKER = Path(audit.__file__).parent
NUMPY_FORMAT = os.path.join(os.path.dirname(numpy.__file__), "lib", "_format_impl.py")  # where np.load unpickles
TORCH = os.path.dirname(torch.__file__)


def frame_in(*files: str):
    """A frame of code compiled as files[-1], called by code compiled as files[-2], and so on up to files[0]."""
    call = lambda: sys._getframe(1)  # noqa: E731  (the frame of its caller)
    for name in reversed(files):
        space = {"call": call}
        exec(compile("def run():\n    return call()\n", name, "exec"), space)
        call = space["run"]
    return call()


@pytest.fixture
def submission(tmp_path) -> Path:
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "ngram.py").write_text("X = 1\n")
    (folder / "helpers.py").write_text("Y = 2\n")
    return folder


@pytest.fixture
def rules(submission) -> Rules:
    return Rules(str(submission))


def student(submission: Path, name: str = "ngram.py") -> str:
    return str(submission / name)


def refused(result, record: list[str], says: str) -> None:
    assert isinstance(result, Refused) and f"the worker's audit hook refused {says}" in str(result), result
    assert record[-1].startswith(f"the worker's audit hook refused {says}"), record


def test_what_no_grading_needs_is_refused_whoever_asks(rules, submission):
    """A heap walk, another thread's frames, a tracer, a profiler, another hook, a debugger, another program: refused
    from the grader's own code and a library too, since whatever raises one there does it for the student (on a thread,
    in a callable the grader calls); the record names the student's line that led there, where there is one."""
    assert audit.PROGRAMS <= audit.NEVER
    for event in audit.NEVER:
        for frame in (frame_in(student(submission)), frame_in(typing.__file__), frame_in(str(WORKER / "worker.py")), None):
            refused(rules.judge(event, (), frame), rules.record, audit.SAYS.get(event, event))
    assert "the worker's audit hook refused gc.get_objects (ngram.py, line 2)" in rules.record
    assert "the worker's audit hook refused gc.get_objects" in rules.record  # on a thread of its own: no line of the student's


def test_the_frame_that_raised_an_event_says_whose_it_is(rules, submission):
    """Frames, code objects, marshal, compile and exec: refused to the submission's code, to code compiled from a string
    and to the standard library's modules that run code (timeit, code, pdb...); left to a library, which raises them
    on its own behalf (typing reads its caller's frame, importlib compiles and unmarshals modules, torch.compile builds
    code), and to the grader's worker."""
    own = (student(submission),), ("<string>",), (student(submission), "<string>"), (timeit.__file__,), ("/tmp/written-later.py",)
    theirs = (typing.__file__,), (numpy.__file__,), (os.path.join(TORCH, "_dynamo", "bytecode_transformation.py"),), \
        ("<frozen importlib._bootstrap_external>",), (str(WORKER / "worker.py"),), (str(WORKER / "guard.py"),)
    for event in audit.FROM_STUDENT:
        says = audit.SAYS.get(event, event)
        for files in own:
            refused(rules.judge(event, (), frame_in(*files)), rules.record, says if event != "object.__getattr__" else "reading .?")
        for files in theirs:
            assert rules.judge(event, (), frame_in(*files)) is None, (event, files)
    frame = frame_in(student(submission))
    refused(rules.judge("object.__getattr__", (frame, "tb_frame"), frame), rules.record, "reading .tb_frame")
    refused(rules.judge("object.__setattr__", (run_twice, "__code__", None), frame), rules.record, "setting a function's __code__")
    assert rules.judge("object.__setattr__", (run_twice, "__qualname__", "x"), frame) is None


def run_twice():
    pass


def test_unpickling_is_left_to_torch_compilers_cache_alone(rules, submission):
    """np.load(allow_pickle=True) unpickles in numpy, torch.load in torch.serialization: refused; torch's compiler
    reading back its cache (a second torch.compile of the same graph: torch's classes, collections', inspect's,
    builtins.getattr, as seen on an H200 with torch 2.11) is not, but for what runs code or reaches out of the process."""
    numpy_load = frame_in(student(submission), NUMPY_FORMAT)
    refused(rules.judge("pickle.find_class", ("builtins", "exec"), numpy_load), rules.record, "unpickling builtins.exec")
    assert rules.record[-1].endswith("(ngram.py, line 2)")
    cache = frame_in(os.path.join(TORCH, "_inductor", "codecache.py"))
    for module, name in (("torch.fx.graph_module", "reduce_graph_module"), ("collections", "OrderedDict"), ("inspect", "Signature"),
                         ("builtins", "getattr")):
        assert rules.judge("pickle.find_class", (module, name), cache) is None, (module, name)
    for module, name in (("builtins", "exec"), ("os", "system"), ("importlib", "import_module"), ("gc", "get_objects")):
        refused(rules.judge("pickle.find_class", (module, name), cache), rules.record, f"unpickling {module}.{name}")
    torch_load = frame_in(os.path.join(TORCH, "serialization.py"))
    refused(rules.judge("pickle.find_class", ("torch._utils", "_rebuild_tensor_v2"), torch_load), rules.record,
            "unpickling torch._utils._rebuild_tensor_v2")


def test_ctypes_is_torchs_alone(rules, submission):
    """numpy.ctypeslib, ctypes called by the submission or by a library for it: refused; torch loading a library of the
    system's or its own: not; torch loading one from anywhere else (torch.ops.load_library of a file written at run
    time): refused."""
    ctypes_module = os.path.join(os.path.dirname(os.__file__), "ctypes", "__init__.py")
    numpy_ctypeslib = os.path.join(os.path.dirname(numpy.__file__), "ctypeslib", "_ctypeslib.py")
    for files in ((student(submission),), (student(submission), ctypes_module), (student(submission), numpy_ctypeslib)):
        refused(rules.judge("ctypes.cdata", (0,), frame_in(*files)), rules.record, "ctypes.cdata")
    by_torch = frame_in(os.path.join(TORCH, "_ops.py"), ctypes_module)
    assert rules.judge("ctypes.dlopen", ("libcuda.so.1",), by_torch) is None
    assert rules.judge("ctypes.dlopen", (os.path.join(TORCH, "lib", "libtorch_cuda.so"),), by_torch) is None
    refused(rules.judge("ctypes.dlopen", ("/tmp/x/evil.so",), by_torch), rules.record, "ctypes.dlopen of /tmp/x/evil.so")


def test_the_submission_imports_the_standard_library_numpy_torch_and_its_own_files(rules, submission):
    """The modules the tamper scan refuses are refused (and recorded) when the submission's code imports them, however
    they are named; another module is not there for it; a library imports what it needs."""
    frame = frame_in(student(submission))
    for module in ("gc", "numpy.ctypeslib", "_ctypes", "code", "importlib.util", "torch.serialization.pickle"):
        refused(rules.judge("import", (module,), frame), rules.record, f"importing {module}")
    for module in ("colorsys", "numpy.linalg", "torch.nn", "helpers", "__future__"):
        assert rules.judge("import", (module,), frame) is None, module
    missing = rules.judge("import", ("scipy.special",), frame)
    assert isinstance(missing, ModuleNotFoundError) and missing.name == "scipy" and "scipy" not in " ".join(rules.record)
    from_import = frame_in(student(submission), "<frozen importlib._bootstrap>")  # `from scipy import x` imports scipy there
    assert rules.judge("import", ("scipy",), from_import) is not None
    assert rules.judge("import", ("gc",), frame_in(typing.__file__)) is None


def test_imports_find_the_import_system_as_installed(rules, submission, monkeypatch):
    """Whoever imports: a folder outside the Python installation put on sys.path (the submission's own, a zip written
    while grading) is refused, one of a library's is not (setuptools adds its vendored packages when torch.compile
    imports it); so is a sys.meta_path without the guard or the submission's finder, and not one a library added a
    finder to for a while (setuptools' distutils shim)."""
    rules.keep_imports(sys.meta_path[-1])  # standing for the submission's finder
    library = frame_in(typing.__file__)
    assert rules.judge("import", ("colorsys",), library) is None
    monkeypatch.chdir(submission)  # the worker's working directory
    for added, allowed in (("extra.zip", False), (str(submission / "extra.zip"), False), ("/tmp/elsewhere", False),
                           (os.path.join(os.path.dirname(numpy.__file__), "_core"), True)):
        monkeypatch.setattr(sys, "path", [*sys.path, added])
        result = rules.judge("import", ("colorsys",), library)
        assert result is None if allowed else "an import after sys.path was changed" in str(result), (added, result)
        monkeypatch.setattr(sys, "path", sys.path[:-1])
    monkeypatch.setattr(sys, "path", [str(submission), *sys.path, "."])  # students add their folder to find their files
    assert rules.judge("import", ("colorsys",), library) is None and str(submission) not in sys.path and "." not in sys.path
    first, *rest = sys.meta_path
    monkeypatch.setattr(sys, "meta_path", [object(), first, *rest])
    assert rules.judge("import", ("colorsys",), library) is None
    monkeypatch.setattr(sys, "meta_path", list(rest))
    refused(rules.judge("import", ("colorsys",), library), rules.record, "an import after sys.meta_path was changed")


def test_only_the_worker_runs_the_submissions_files(rules, submission):
    """Code of a file of the submission runs only through the worker's own import, which checked it."""
    code = compile("X = 1\n", student(submission), "exec")
    assert rules.judge("exec", (code,), frame_in(audit.__file__)) is None
    refused(rules.judge("exec", (code,), frame_in(os.path.join(os.path.dirname(os.__file__), "runpy.py"))), rules.record,
            "running ngram.py other than by the grader's import")


def test_the_submission_is_imported_as_scanned(rules, submission):
    """The finder imports a file as the folder held it when the worker started, from the bytes it checked: one written
    or changed later is refused (and recorded); a name the submission has no file for is left to the next finder."""
    frame = frame_in(student(submission))
    spec = rules.spec("helpers", None, frame)
    assert spec.origin == student(submission, "helpers.py") and spec.loader.source == b"Y = 2\n"
    assert rules.spec("helpers", ["somewhere"], frame) is None and rules.spec("nothing_here", None, frame) is None
    (submission / "later.py").write_text("import gc\n")
    with pytest.raises(Refused, match="importing later.py, which was not in the submission when the grader scanned it"):
        rules.spec("later", None, frame)
    (submission / "helpers.py").write_text("import gc\n")
    with pytest.raises(Refused, match="importing helpers.py, which changed after the grader scanned it"):
        rules.spec("helpers", None, frame)
    assert rules.record[-2:] == [
        "the worker's audit hook refused importing later.py, which was not in the submission when the grader scanned it (ngram.py, line 2)",
        "the worker's audit hook refused importing helpers.py, which changed after the grader scanned it (ngram.py, line 2)"]


def test_nothing_of_the_students_runs_in_the_hook(rules, submission):
    """Arguments and file names of the student's making (sys.audit raises any event with any arguments; a code object
    can carry any file name) are never hashed, compared or called: code of theirs that ran in the hook would run with
    the hook off."""
    class Trap(str):
        def __eq__(self, other):
            raise AssertionError("the hook ran the student's code")

        __hash__ = __ne__ = startswith = partition = split = __eq__

    frame = frame_in(student(submission))
    assert rules.judge("import", (Trap("gc"),), frame_in(typing.__file__)) is None
    assert rules.judge("object.__setattr__", (run_twice, Trap("__code__"), None), frame) is None
    assert isinstance(rules.judge("pickle.find_class", (Trap("torch"), Trap("x")), frame), Refused)
    disguised = compile("frame = sys._getframe()", "x", "exec").replace(co_filename=Trap(typing.__file__))
    space = {"sys": sys}
    exec(disguised, space)
    assert isinstance(rules.judge("sys._getframe", (), space["frame"]), Refused)  # a file name that is no plain str: the student's
    assert isinstance(rules.judge("exec", (disguised,), frame_in(typing.__file__)), Refused)


def test_each_reply_carries_the_refusals_of_its_request_once(rules, submission):
    """A request's refusals fail its case, once each; the next request starts with none (a module whose import was
    refused is imported again by the next request, and refused again there)."""
    frame = frame_in(student(submission))
    for _ in range(3):
        rules.judge("gc.get_objects", (), frame)
    assert rules.take() == ["the worker's audit hook refused gc.get_objects (ngram.py, line 2)"]
    assert rules.take() == []
    rules.judge("gc.get_objects", (), frame)
    assert rules.take() == ["the worker's audit hook refused gc.get_objects (ngram.py, line 2)"]


@pytest.mark.slow
def test_installed_the_submission_never_stands_in_for_a_library(tmp_path):
    """install() in a throwaway process: the submission's folder is off sys.path and its finder comes just before
    sys.path's, yet a file named like a module of the standard library (a shadow a library would import by name) is
    never imported, while the submission's own modules are; and a thread the submission starts is refused a profiler,
    on the record."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "secrets.py").write_text("raise SystemExit('the shadow ran')\n")
    (folder / "helpers.py").write_text("Y = 2\n")
    (folder / "ngram.py").write_text(textwrap.dedent("""\
        import threading
        import helpers
        import secrets
        token = secrets.token_hex(4)
        threading.setprofile(len)
        thread = threading.Thread(target=len, args=((),))
        thread.start()
        thread.join()
        """))
    script = textwrap.dedent(f"""\
        import os, sys
        sys.path.insert(0, {str(WORKER)!r})
        import audit
        del sys.path[0]
        sys.path.insert(0, os.getcwd())  # as a student's PYTHONPATH might, in the portable tier
        record = audit.install(os.getcwd())
        import ngram
        finders = [getattr(finder, "__name__", type(finder).__name__) for finder in sys.meta_path]  # classes, or instances
        print(ngram.helpers.Y, len(ngram.token), finders[finders.index("Finder") + 1], os.getcwd() in sys.path)
        print(*record(), sep="\\n")
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["2 8 PathFinder False", "the worker's audit hook refused sys.setprofile"], done


# ---- the parent's side: every file scanned, none importable that the scan refused or that a library stands for ----


def test_component_files_are_never_named_like_a_module_import_finds_first():
    assert not [f for f in API_FILES if shadowed(f.removesuffix(".py"))]


def test_files_named_like_a_module_import_finds_first_are_not_copied(tmp_path):
    """secrets.py (the standard library), numpy.py (an installed package), guard.py (the grader's worker module): each
    would be found before the submission's file, so each is left out, and the account says to rename it."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "ngram.py").write_text("X = 1\n")
    for name in ("secrets", "numpy", "guard"):
        (folder / f"{name}.py").write_text("Y = 2\n")
    sub = open_submission(folder, tmp_path / "out")
    assert python_files(sub.dir) == ["ngram.py"]
    said = {e.path: str(e) for e in sub.account}
    assert said["secrets.py"] == ("secrets.py: ignored: named like `secrets`, a module of Python's standard library, which `import "
                                  "secrets` imports instead: no code can import this file under its name; rename it (to "
                                  "secrets_helpers.py, say) and import it by its new name")
    assert "named like `numpy`, an installed package" in said["numpy.py"]
    assert "named like `guard`, a module of the grader's worker" in said["guard.py"]
    assert {Path(name).stem for name in WORKER_FILES} >= {"guard", "audit", "worker"}


def test_every_file_is_scanned_and_a_refused_one_cannot_be_imported(tmp_path):
    """A file that no component imports statically is scanned too: the account says what the scan refused; a component
    that does not import it keeps its worker, whose folder does not hold it; one that does is refused with its line."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "ngram.py").write_text("import helpers\n")
    (folder / "lstm.py").write_text("import stash\n")
    (folder / "helpers.py").write_text("Y = 2\n")
    (folder / "stash.py").write_text("X = 1\nimport gc\n")
    sub = open_submission(folder, tmp_path / "out")
    said = {e.path: str(e) for e in sub.account}
    assert said["stash.py"] == ("stash.py: copied: not a component file; refused by the grader's scan, so no code can import it: "
                                "line 2: import of gc (not allowed in submissions: it can reach into the grader's process)")
    assert scan_submission(sub.dir, "ngram.py") == []
    assert scan_submission(sub.dir, "lstm.py") == ["stash.py line 2: import of gc (not allowed in submissions: it can reach into "
                                                   "the grader's process)"]
    passed = [f for f in python_files(sub.dir) if not scan_submission(sub.dir, f)]
    assert passed == ["helpers.py", "ngram.py"]
    runs = importable(sub.dir, passed)
    assert sorted(p.name for p in runs.iterdir()) == ["helpers.py", "ngram.py"] and runs.parent == sub.dir
    assert importable(sub.dir, passed) == runs  # made once, as the lanes of one grade plan at once
    assert importable(sub.dir, python_files(sub.dir)) == sub.dir  # nothing refused: the folder itself
