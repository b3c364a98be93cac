"""Inside the worker: audit hooks (PEP 578) that refuse what the tamper scan refuses, however it is reached, and the one
way the submission's own files are imported.

The tamper scan in the parent (forbidden.py) reads every file of the submission and refuses, with the line, the
constructs that reach into the worker's interpreter, where the guard and its record live: it explains. What it never
reads it cannot refuse: a file written at run time, a string compiled at run time, a pickle that numpy unpickles, a
module a library imports by name. These hooks see what happens instead, whatever code asked. worker.main installs
them after the grader's own imports and before any file of the submission can be imported; each refusal raises
`Refused` where it happened and is recorded with the student's file and line, so that the case fails even when student
code catches the exception (the reply's `refused`: the refusals made while its request ran). A hook cannot be removed,
and student code cannot add one.

Who asks. Libraries raise most of these events on their own behalf all the time: typing and namedtuple read their
caller's frame, importlib compiles and unmarshals every module it loads (torch's lazy imports on a first backward
too), torch.compile builds code objects, traceback reads the frames of a traceback. So most rules judge the frame that
raised the event (its code's file):
- library code: a file under the folders on sys.path when the hooks were installed (the standard library,
  site-packages), importlib's and the standard library's frozen modules, and the grader's own worker files;
- student code: everything else: the submission's files, code compiled from a string, a file written anywhere at run
  time, and the standard library's modules that compile or run what they are given (RUNS_CODE: code, codeop, timeit,
  pdb, runpy, site...), which the tamper scan refuses, so that reaching one counts as running the code it runs.

The rules, event by event:
- NEVER, whoever raises it: nothing the grader, numpy or torch runs while grading needs a heap walk, another thread's
  frames, a tracer or profiler or a debugger, so whatever raises one does it for the student (directly, through a
  library, on a thread, or in a callable handed to the grader); nor another program (a fresh interpreter would run
  code no scan read, with none of these walls: the seccomp filter refuses exec behind this rule, which explains it);
- unpickling a global (pickle.find_class: np.load(allow_pickle=True), torch.load): only torch's compiler reading its
  own cache (TORCH_UNPICKLERS), and then no built-in that runs code and no module that reaches into the process
  (UNPICKLED_NEVER); a cache entry planted in the compiler's folder can still run code through torch's own classes
  (a pickled GraphModule runs its source), as can torch's helpers that compile source they are given;
- ctypes: only where the first caller outside ctypes is torch (loading its own libraries), and never a library file
  outside the Python installation and the system's library folders;
- FROM_STUDENT, when student code raised it: sys._getframe, object.__getattr__ (a frame's, traceback's, generator's
  or coroutine's frame and code, a function's code and defaults), setting a function's __code__, code.__new__,
  function.__new__, marshal, compile, exec and adding an audit hook (filelock, which torch.compile's caches use,
  adds one of its own on Python 3.12);
- exec of code whose file is in the submission's folder: only by the worker's own import (below);
- import, whoever imports: sys.path holds no folder outside the Python installation that it did not hold at
  installation (a zip or folder written while grading; libraries add their own folders; the submission's own folder,
  which students add to find their files, is taken off again, as the finder finds them), and sys.meta_path still
  holds the guard and the submission's finder; and the submission's own code imports only the standard library less
  the tamper scan's modules (a refusal), numpy, torch and its own files (any other module is not there for it:
  ModuleNotFoundError).

The submission's files are imported only by the finder installed here, on sys.meta_path just before the finder of
sys.path's folders (the submission's folder is never on sys.path). The parent copies no file named like a module of the standard library, an
installed package or the worker (submission.shadowed), so no file of the submission stands in for one; and no folder
on sys.path stands in for the submission's own files (a student bundle installed for editing puts its folder, and its
starter files, there). It imports only the files its folder held when the worker started, which the parent filled with the files
its scan read and passed (runner._plan), and compiles each from the bytes it read after checking them against what it
saw then: a file written or changed at run time, or a cached .pyc, never runs.

Cost: every audited event calls the hook. Those without a rule (open, os.*, builtins.id...) return after a set lookup,
about 0.25 microseconds; a judged one costs about 1.2 (the raising frame, its file's class, cached). Timed calls of
correct code raise no judged event (torch's Tensor.__hash__ raises builtins.id); grading the solutions raises about
50,000 judged events in all, nearly all in the lazy imports of torch's compiler that the training cases need.
"""
from __future__ import annotations

import _thread
import hashlib
import importlib.machinery
import os
import sys
import types
from collections.abc import Callable

# Modules that reach into the running interpreter, also when they are another module's attribute
# (`np.ctypeslib`, `torch.serialization.pickle`, `unittest.mock.pkgutil`): its heap (gc), memory
# (ctypes), frames (inspect), import machinery (importlib), built-ins (builtins), code objects
# (marshal), objects rebuilt from names (pickle, dill, copyreg), modules imported and attributes
# read from a string (pkgutil.resolve_name, pydoc.locate, runpy, mock.patch), code compiled from a
# string (codeop), and debuggers, which read their commands from any stream (pdb, bdb);
# `as_strided` reads and writes memory outside its array. The tamper scan refuses naming them (forbidden.py),
# the hook below refuses importing them.
REACHING = frozenset({"gc", "ctypes", "ctypeslib", "inspect", "importlib", "builtins", "marshal", "pickle", "cloudpickle",
                      "dill", "copyreg", "as_strided", "pkgutil", "pydoc", "runpy", "mock", "codeop", "pdb", "bdb"})
# Refused as imports only, as their names are common words elsewhere (`torch.trace`, `exc.code`): modules that
# run a string as code (code, timeit, profile, cProfile, trace, doctest, site's .pth files, rlcompleter's completions),
# load one (zipimport) or unpickle (shelve).
IMPORTED_ONLY = frozenset({"code", "timeit", "profile", "cProfile", "trace", "doctest", "site", "zipimport", "shelve", "rlcompleter"})
# The standard library's modules that compile or run the code they are given (a string, a file, a debugger's command):
# their frames count as the student's.
RUNS_CODE = frozenset({"code", "codeop", "timeit", "profile", "cProfile", "trace", "doctest", "pdb", "bdb", "runpy", "pydoc",
                       "site", "zipimport", "rlcompleter"})
LIBRARIES = ("numpy", "torch")  # what a submission may import besides the standard library and its own files
PROGRAMS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile"})
NEVER = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys._current_exceptions",
                   "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback", "pdb.Pdb"}) | PROGRAMS
# Judged by who raised them. Libraries raise each on their own behalf, sys.addaudithook too (filelock, which
# torch.compile's caches use, adds a hook of its own on Python 3.12).
FROM_STUDENT = frozenset({"sys._getframe", "object.__getattr__", "code.__new__", "function.__new__", "marshal.dumps",
                          "marshal.loads", "marshal.dump", "marshal.load", "compile", "exec", "sys.addaudithook"})
JUDGED = NEVER | FROM_STUDENT | {"import", "pickle.find_class", "object.__setattr__"}  # and every "ctypes." event
# What a refusal calls an event whose name says little to a student.
SAYS = {"compile": "compiling code at run time", "exec": "running code compiled at run time", "code.__new__": "building a code object",
        "function.__new__": "making a function of a code object",
        **{event: f"starting another program ({event})" for event in PROGRAMS}}
TORCH_UNPICKLERS = ("_inductor", "_dynamo", "_functorch")  # torch's compiler, which pickles its graphs into a cache
# What torch's compiler may not unpickle even from its cache: built-ins that run code, and the functions of modules that
# run code, import or unpickle, or reach into the process or out of it. Its cache holds classes of torch's,
# collections' and inspect's (a Signature), builtins.getattr, and others with other versions of torch.
UNPICKLED_NEVER = frozenset({"os", "posix", "sys", "subprocess", "shutil", "socket", "signal", "_thread", "threading", "importlib",
                             "marshal", "pickle", "_pickle", "dill", "cloudpickle", "shelve", "ctypes", "_ctypes", "gc", "code",
                             "codeop", "runpy", "pydoc", "pkgutil", "pdb", "bdb", "timeit", "cProfile", "profile", "trace",
                             "doctest", "site", "zipimport"})
RUNNING_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "open", "breakpoint", "input"})  # getattr is in its cache
SYSTEM_LIBRARIES = ("/usr/lib/", "/usr/lib64/", "/lib/", "/lib64/", "/usr/local/lib/")
WHO = "the worker's audit hook refused"

LIBRARY, GRADER, STUDENT = "library", "grader", "student"


class Refused(RuntimeError):
    """Raised where an audit hook refuses an event (a RuntimeError: a refused sys.addaudithook is then dropped)."""


def install(folder: str) -> Callable[[], list[str]]:
    """Make the submission in `folder` (its copy, the working directory) importable only through its finder, as the
    folder holds it now, and install the audit hook. Call it before any code of the submission runs. Returns what takes
    the record: the refusals since it was last taken, as "the worker's audit hook refused WHAT (FILE, line N)"."""
    rules = Rules(folder)
    getframe, get_ident, busy, judged = sys._getframe, _thread.get_ident, set(), JUDGED

    class Finder:
        """The submission's files, found before sys.path's folders: none is named like a module found there."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            return rules.spec(name, path, getframe(1))

    for entry in [p for p in sys.path if os.path.abspath(p or ".") == rules.folder]:  # `python worker.py --stdio` keeps PYTHONPATH
        sys.path.remove(entry)
    finder = Finder()
    sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder), finder)
    rules.keep_imports(finder)

    def hook(event, args):
        if type(event) is not str or (event not in judged and not event.startswith("ctypes.")):  # most events: no rule
            return
        me = get_ident()
        if me in busy:  # the hook's own reads of frames raise events too
            return
        busy.add(me)
        try:
            refusal = rules.judge(event, args if type(args) is tuple else (), getframe(0).f_back)
        finally:
            busy.discard(me)
        if refusal is not None:
            raise refusal

    sys.addaudithook(hook)
    return rules.take


class Rules:
    """What the audit hook allows in the worker whose submission is in `folder` (the module's docstring says why)."""

    def __init__(self, folder: str):
        self.folder = os.path.abspath(folder)
        self.inside = os.path.join(self.folder, "")
        here = os.path.dirname(os.path.abspath(__file__))
        self.own = os.path.abspath(__file__)
        self.grader = frozenset(os.path.join(here, name) for name in os.listdir(here) if name.endswith(".py"))
        stdlib = os.path.dirname(os.path.abspath(os.__file__))
        self.runs_code = frozenset({os.path.join(stdlib, f"{name}.py") for name in RUNS_CODE}
                                   | {f"<frozen {name}>" for name in RUNS_CODE})
        # The Python installation's folders: those on sys.path, less any that holds the submission or the worker's files.
        folders = (os.path.join(os.path.abspath(p), "") for p in [stdlib, *sys.path] if p)
        ours = (self.inside, os.path.join(here, ""))
        self.roots = tuple(dict.fromkeys(root for root in folders if not self.inside.startswith(root) and not root.startswith(ours)))
        self.ctypes_dir = os.path.join(stdlib, "ctypes", "")
        torch = importlib.machinery.PathFinder.find_spec("torch", [p for p in sys.path if os.path.abspath(p or ".") != self.folder])
        self.torch_dir = os.path.join(torch.submodule_search_locations[0], "") if torch and torch.submodule_search_locations else None
        self.unpicklers = tuple(os.path.join(self.torch_dir, name, "") for name in TORCH_UNPICKLERS) if self.torch_dir else ()
        self.files = _mapped(self.folder)
        self.record: list[str] = []
        self.kinds: dict[str, str] = {}
        self.paths: dict[str, bool] = {}  # sys.path entry -> whether imports may look there
        self.finders: tuple = ()

    def keep_imports(self, finder) -> None:
        """Take the import system as it is now as the one imports must find (`changed`): its sys.path entries, the first
        of sys.meta_path (the guard) and the submission's `finder`."""
        self.paths = {entry: True for entry in sys.path if type(entry) is str}
        self.finders = (sys.meta_path[0], finder)

    def judge(self, event: str, args: tuple, frame) -> BaseException | None:
        """What to raise for `event`, raised by the code `frame` runs (None: no Python code), or None to let it be."""
        if event in NEVER:
            return self.refuse(SAYS.get(event, event), frame)
        if event == "import":
            return self.on_import(args, frame)
        if event == "pickle.find_class":
            return self.on_unpickle(args, frame)
        if event.startswith("ctypes."):
            return self.on_ctypes(event, args, frame)
        code = args[0] if event == "exec" and args and type(args[0]) is types.CodeType else None
        ran = code.co_filename if code is not None and type(code.co_filename) is str else self.inside
        if code is not None and ran.startswith(self.inside) and (frame is None or self.file_of(frame) != self.own):
            return self.refuse(f"running {os.path.basename(ran) or 'code'} other than by the grader's import", frame)
        if frame is None or self.kind(frame) != STUDENT:
            return None
        if event == "object.__getattr__":
            return self.refuse(f"reading .{args[1] if len(args) > 1 and type(args[1]) is str else '?'}", frame)
        if event == "object.__setattr__":
            swapped = len(args) > 1 and type(args[1]) is str and args[1] == "__code__"
            return self.refuse("setting a function's __code__", frame) if swapped else None
        return self.refuse(SAYS.get(event, event), frame)

    def take(self) -> list[str]:
        """The refusals since the last take: each reply carries those of its request, whose case they fail."""
        taken, self.record = self.record, []
        return taken

    def refuse(self, what: str, frame) -> Refused:
        """Record the refusal of `what`, with the student's line that led to `frame` (once a request), and say it."""
        message, where = f"{WHO} {what}", self.where(frame)
        if message + where not in self.record:
            self.record.append(message + where)
        return Refused(f"{message}: submissions may not reach into the grader's process")

    # ---- whose code -------------------------------------------------------------------------------------------

    def file_of(self, frame) -> str:
        """The file of the code `frame` runs. Nothing of a student's may run in the hook: a name that is not a plain str
        (a code object can be built with any) is never hashed or compared, and counts as the student's."""
        name = frame.f_code.co_filename
        return name if type(name) is str else self.inside

    def kind(self, frame) -> str:
        """Whose code `frame` runs: the library's, the grader's or the student's (the module's docstring)."""
        name = self.file_of(frame)
        if name not in self.kinds:
            if name.startswith(self.inside) or name in self.runs_code:
                self.kinds[name] = STUDENT
            elif name in self.grader:
                self.kinds[name] = GRADER
            elif name.startswith("<frozen ") or name.startswith(self.roots):
                self.kinds[name] = LIBRARY
            else:  # compiled from a string, or a file written while grading
                self.kinds[name] = STUDENT
        return self.kinds[name]

    def where(self, frame) -> str:
        """The student's file and line that led to `frame`: its own, or its nearest caller's in the submission."""
        while frame is not None and not self.file_of(frame).startswith(self.inside):
            frame = frame.f_back
        return f" ({os.path.basename(self.file_of(frame))}, line {frame.f_lineno})" if frame is not None else ""

    # ---- the rules -------------------------------------------------------------------------------------------

    def changed(self) -> str | None:
        """The part of the import system that is no longer as kept, if any: sys.path holds a folder outside the Python
        installation that it did not hold (libraries add their own: setuptools its vendored packages, when torch.compile
        imports it), or sys.meta_path lost the guard or the submission's finder (a library may add one for a while:
        setuptools' distutils shim). Nothing of a student's is compared: entries that are no plain str are theirs."""
        path, finders = sys.path, sys.meta_path
        if type(path) is not list or not all(type(entry) is str and self.allowed_path(entry) for entry in path):
            return "sys.path"
        if type(finders) is not list or not all(any(f is kept for f in finders) for kept in self.finders):
            return "sys.meta_path"
        return None

    def allowed_path(self, entry: str) -> bool:
        if entry not in self.paths:
            folder = os.path.join(os.path.abspath(entry), "")
            self.paths[entry] = folder.startswith(self.roots) and not folder.startswith(self.inside)
        return self.paths[entry]

    def on_import(self, args: tuple, frame) -> BaseException | None:
        if type(sys.path) is list:  # the submission's folder, which a student may add to find its own files: the finder does
            for entry in [p for p in sys.path if type(p) is str and os.path.abspath(p) == self.folder]:
                sys.path.remove(entry)
        part = self.changed()
        if part:
            return self.refuse(f"an import after {part} was changed", frame)
        module = args[0] if args and type(args[0]) is str else ""
        while frame is not None and self.file_of(frame).startswith("<frozen importlib"):  # `from numpy import x` imports numpy.x there
            frame = frame.f_back
        if not module or frame is None or not self.file_of(frame).startswith(self.inside):
            return None
        parts = module.split(".")
        if parts[0] in IMPORTED_ONLY or any(p in REACHING for p in parts) or (parts[0].startswith("_") and parts[0] != "__future__"):
            return self.refuse(f"importing {module}", frame)
        if parts[0] in sys.stdlib_module_names or parts[0] in LIBRARIES or parts[0] in self.files:
            return None
        if os.path.lexists(os.path.join(self.folder, f"{parts[0]}.py")):  # written while grading: the finder refuses it
            return None
        return ModuleNotFoundError(f"No module named {parts[0]!r} (a submission imports the standard library, numpy, torch and "
                                   "its own files)", name=parts[0])

    def on_unpickle(self, args: tuple, frame) -> BaseException | None:
        module = args[0] if args and type(args[0]) is str else "?"
        name = args[1] if len(args) > 1 and type(args[1]) is str else "?"
        top = module.partition(".")[0]
        harmless = top not in UNPICKLED_NEVER and not (top in ("builtins", "__builtin__") and name in RUNNING_BUILTINS)
        if frame is not None and self.file_of(frame).startswith(self.unpicklers) and harmless:
            return None
        return self.refuse(f"unpickling {module}.{name}", frame)

    def on_ctypes(self, event: str, args: tuple, frame) -> BaseException | None:
        caller = frame
        while caller is not None and self.file_of(caller).startswith(self.ctypes_dir):
            caller = caller.f_back
        if self.torch_dir is None or caller is None or not self.file_of(caller).startswith(self.torch_dir):
            return self.refuse(event, frame)
        library = args[0] if event == "ctypes.dlopen" and args else None
        if type(library) is bytes:
            library = library.decode(errors="replace")
        installed = type(library) is str and ("/" not in library or library.startswith((*self.roots, *SYSTEM_LIBRARIES)))
        if library is not None and not installed:
            return self.refuse(f"{event} of {library if type(library) is str else 'a library'}", frame)
        return None

    # ---- the submission's files -------------------------------------------------------------------------------

    def spec(self, name, path, frame) -> importlib.machinery.ModuleSpec | None:
        """The module `name` of the submission, as the folder held it when the worker started; None if it has none.
        Refused: a file the folder did not hold then, or one that changed since."""
        if path is not None or type(name) is not str:
            return None
        file = os.path.join(self.folder, f"{name}.py")
        if name not in self.files:
            if os.path.lexists(file):
                raise self.refuse(f"importing {name}.py, which was not in the submission when the grader scanned it", frame)
            return None
        if self.files[name] is None:  # named like a library's module: that module is found instead
            return None
        try:
            with open(file, "rb") as f:
                source = f.read()
        except OSError:
            return None
        if hashlib.sha256(source).digest() != self.files[name]:
            raise self.refuse(f"importing {name}.py, which changed after the grader scanned it", frame)
        spec = importlib.machinery.ModuleSpec(name, _Loader(file, source), origin=file)
        spec.has_location = True
        return spec


class _Loader:
    """Runs a file of the submission from the bytes the finder checked (never a cached .pyc)."""

    def __init__(self, path: str, source: bytes):
        self.path, self.source = path, source

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        exec(compile(self.source, self.path, "exec", dont_inherit=True), module.__dict__)


def installed_paths() -> list[str]:
    """The folders of sys.path inside the Python installation (its standard library, site-packages), not those a
    program, a test or a student bundle adds."""
    prefixes = tuple(os.path.join(os.path.realpath(p), "") for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    return [p for p in sys.path if p and os.path.join(os.path.realpath(p), "").startswith(prefixes)]


def library_module(name: str, installed: list[str]) -> bool:
    """Whether `import NAME` finds a module of the standard library, or one in the `installed` folders."""
    return name in sys.stdlib_module_names or importlib.machinery.PathFinder.find_spec(name, installed) is not None


def _mapped(folder: str) -> dict[str, bytes | None]:
    """Module name -> sha256 of each .py file of `folder` that could be imported, as the folder holds them now; None for
    one named like a module of the standard library or of the Python installation, which is never imported in its
    place (the parent copies no such file: submission.shadowed; this finder, before sys.path's, holds to it too)."""
    installed = installed_paths()
    files = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name.removesuffix(".py")
            if not (entry.name.endswith(".py") and name.isidentifier() and entry.is_file(follow_symlinks=False)):
                continue
            if library_module(name, installed):
                files[name] = None
                continue
            with open(entry.path, "rb") as f:
                files[name] = hashlib.sha256(f.read()).digest()
    return files
