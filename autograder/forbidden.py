"""Static scans of a submission's source, run in the parent before the worker imports any of it.

Both scans read the component's file and every submission file it imports
(`from helpers import go`), so moving a use into a helper does not hide it.

The forbidden scan names the modules, calls and operators a component forbids,
by their written form: `nn.LSTM`, `torch.nn.LSTM`, `from torch.nn import LSTM`,
a torch name of a forbidden operator (`torch.lstm`, `torch._VF.lstm`,
`torch.ops.aten.lstm.input`) and its schema name in a string (`"aten::lstm"`).
It decides nothing: what costs points is a forbidden module, call or operator
actually reached, which the worker refuses and records at run time
(sandbox/worker/guard.py, sandbox/worker/forbidden_ops.py). A name the cases never reach (nanoGPT keeps
`F.scaled_dot_product_attention` behind `if self.flash:`) costs nothing; runner.py
reports it and flags it for review.

The tamper scan applies to every component, and refuses a file before any of it
runs. The run-time guard and its record of violations live in the worker, the
same process as the student's code, so the guard is only as good as its
isolation from that code: whatever reaches the interpreter's own state (the
heap, the loaded modules, the import machinery, stack frames, a function's
globals or closure, code run from a string, attribute names computed at run
time, raw memory, the grader's own modules) can find the guard and switch it
off. No solution to these assignments needs any of it, so the scan refuses it
with the line, in code that runs or not. It does not flag os, subprocess,
socket, signal, open or threading: processes, network and files are stopped at
run time by the OS-level sandbox, and the security tests exercise those
defences. It is a tripwire on the direct ways in, not a proof that none is left.

The tamper scan reads every .py file of the submission, whoever imports it. A
component is refused when its own file or a file it imports statically is; a
refused file that no component imports statically refuses nothing, but no code
can import it: a worker imports the submission only from the folder `importable`
gives it, which holds the files whose scan (with the files each imports) found
nothing, and only those files as they were scanned (sandbox/worker/audit.py).
What the scan cannot read (a string compiled, a pickle loaded, a file written
while grading) the worker's audit hooks refuse where it runs: the scan
explains, the hooks enforce. Its module tables are theirs (audit.REACHING,
audit.IMPORTED_ONLY), so both refuse the same modules.

Both are described to students from these tables (`forbidden_rules`,
`tamper_rules`): `autograder release` writes the words into the handouts and
the starter docstrings.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

from .sandbox.host.process import WORKER_FILES, Forbidden
from .sandbox.worker.audit import IMPORTED_ONLY, REACHING

# Modules refused as a module or an attribute (REACHING: gc, ctypes, inspect, pickle...) or as an import only
# (IMPORTED_ONLY: code, timeit, site...), the worker's audit hook refusing the same (audit.py says what each reaches);
# and the grader's own: its package, and the worker's modules, loaded under their bare names (`guard`) in the
# student's process.
TAMPER_MODULES = REACHING | IMPORTED_ONLY | {__name__.partition(".")[0]} | {Path(name).stem for name in WORKER_FILES}
# Attributes that import a module, or read an attribute, named by a string, evaluate a string as code, or
# reach the import machinery and the frames, on whatever object holds them (sys under any name,
# `threading._sys`, or a module that re-exports them): flagged wherever they are named.
STRING_REACHING = frozenset({"meta_path", "path_hooks", "path_importer_cache", "settrace", "setprofile", "addaudithook",
                             "_getframe", "_current_frames", "currentframe", "resolve_name", "get_field", "get_type_hints",
                             "ForwardRef", "dictConfig", "fileConfig"})
# Built-ins that run strings as code or hand out namespaces: flagged wherever they are named.
CODE_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint"})
# Built-ins that take an attribute name, and its position: only a literal, ordinary name is allowed,
# since a computed one can spell any of the attributes flagged here.
NAME_ARGUMENT = {"getattr": 1, "setattr": 1, "delattr": 1, "hasattr": 1, "attrgetter": 0, "methodcaller": 0}
FRAME_ATTRIBUTES = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "f_code",
                              "tb_frame", "tb_next", "gi_frame", "cr_frame", "ag_frame", "walk_stack", "walk_tb"})
# sys's own ways to the loaded modules and to tracing, besides STRING_REACHING (also every `sys._name`).
SYS_ATTRIBUTES = frozenset({"modules", "monitoring"})
# Dunders ordinary code uses. Each is a plain string (`__name__`, `__qualname__`, `__module__`,
# `__doc__`, `__version__`), the object's own class, or its own protocol method (`super().__init__()`,
# `x.__len__()`); from none of them is there a way further in except through another dunder
# (`__globals__`, `__closure__`, `__code__`, `__dict__`, `__subclasses__`), which stays flagged.
ALLOWED_DUNDERS = frozenset({"__init__", "__name__", "__class__", "__call__", "__len__", "__getitem__",
                             "__repr__", "__str__", "__doc__", "__version__", "__qualname__", "__module__"})
WHY = "not allowed in submissions: it can reach into the grader's process"


def scan_submission(submission_dir: Path, file: str) -> list[str]:
    """The tamper scan: every use in `file` and the submission files it imports that reaches into the
    grader's process. Any finding refuses the component before its code runs."""
    return _scan_files(submission_dir, file, _tampering)


def forbidden_names(submission_dir: Path, file: str, forbidden: Forbidden) -> list[str]:
    """Every forbidden module, call and operator that `file` and the submission files it imports name, run or not:
    for review, as only what runs costs points (the worker's record)."""
    return _scan_files(submission_dir, file, lambda tree: _forbidden_uses(tree, forbidden))


def _scan_files(submission_dir: Path, file: str, scan) -> list[str]:
    """'line N: ...' for each finding of `scan`, the component's own file first; the others' findings start with their file name."""
    findings = []
    for path in sorted(submission_files(submission_dir, file), key=lambda p: p.name != file):
        tree = _parse(path)
        if tree is None:
            continue  # the import in the worker reports the syntax error with its line
        prefix = "" if path.name == file else f"{path.name} "
        findings += [prefix + finding for finding in _lines(scan(tree))]
    return findings


def python_files(submission_dir: Path) -> list[str]:
    """Every .py file of the submission's flat folder, by name."""
    return sorted(p.name for p in submission_dir.glob("*.py") if p.is_file())


def importable(submission_dir: Path, files: list[str]) -> Path:
    """The folder a worker imports the submission from, holding `files` of `submission_dir` (those whose tamper scan,
    with the files each imports, found nothing: runner._plan): `submission_dir` itself when they are all its .py files,
    else a copy of them in a folder of its own inside it, made once for them as they are."""
    if sorted(files) == python_files(submission_dir):
        return submission_dir
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256((submission_dir / name).read_bytes()).digest())
    folder = submission_dir / f".importable-{digest.hexdigest()[:16]}"
    if not folder.is_dir():  # two lanes may plan at once: each writes its own, the first to rename wins
        made = Path(tempfile.mkdtemp(prefix=".making-", dir=submission_dir))
        for name in files:
            shutil.copyfile(submission_dir / name, made / name)
        try:
            os.rename(made, folder)
        except OSError:
            shutil.rmtree(made)
    return folder


def submission_files(submission_dir: Path, file: str) -> list[Path]:
    """`file` and, transitively, every .py file of `submission_dir` it imports statically."""
    seen, todo = set(), [submission_dir / file]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = _parse(path)
        if tree is not None:
            todo += [submission_dir / f"{name}.py" for name in _imported_names(tree) if (submission_dir / f"{name}.py").is_file()]
    return sorted(seen)


def scan_forbidden(path: Path, forbidden: Forbidden) -> list[str]:
    """'line N: import of torch' / 'line N: use of torch.nn.LSTM' / 'line N: mention of torch.nn.LayerNorm in
    isinstance' / 'line N: use of the operator aten::lstm (torch.lstm)' for each forbidden name in `path`
    (_forbidden_uses)."""
    tree = _parse(path)
    return _lines(_forbidden_uses(tree, forbidden) if tree else {})


def scan_tampering(path: Path) -> list[str]:
    """'line N: import of gc (...)' for each construct in `path` that reaches into the grader's process."""
    tree = _parse(path)
    return _lines(_tampering(tree) if tree else {})


def _lines(found: dict[int, str]) -> list[str]:
    return [f"line {line}: {found[line]}" for line in sorted(found)]


def syntax_error(path: Path) -> SyntaxError | None:
    """The SyntaxError that importing `path` would raise, found without running it: a component file that cannot be
    imported fails every case, and needs no worker to show it."""
    try:
        compile(path.read_bytes(), path.name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except (ValueError, MemoryError, RecursionError):  # the worker's import reports these
        pass
    return None


# CPython 3.11 keeps ast.parse's recursion count per interpreter, not per thread: two lanes planning at once (runner.py)
# made it raise "SystemError: AST constructor recursion depth mismatch" now and then, failing a grade at random.
_PARSING = threading.Lock()


def _parse(path: Path) -> ast.Module | None:
    """The syntax tree of `path`, None where it has none; parsed once per content, as every file is scanned for each
    component (runner._plan). The scans only read the trees."""
    return _parsed(path.read_bytes())


@functools.lru_cache(maxsize=256)
def _parsed(source: bytes) -> ast.Module | None:
    try:
        with _PARSING:
            return ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # the worker reports what it cannot import
        return None


def _imported_names(tree: ast.AST) -> set[str]:
    """The top-level names a file imports: `import x.y` and `from x import y` give x, `from . import y` gives y."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.partition(".")[0])
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.name for alias in node.names}
    return names


# ---- forbidden modules and calls ------------------------------------------------------------------

MENTION = "mention of"  # a forbidden name that is not called there: it may have run without calling anything


def _forbidden_uses(tree: ast.AST, forbidden: Forbidden) -> dict[int, str]:
    """Per line, its strongest finding: "use of X" (called, or a base class: code no case reached, since the worker
    fails what runs), "import of M" (a forbidden module), else "mention of X ..." (named only: an isinstance check, an
    import of the name, a reference passed on, an operator's schema name in a string), which may have run."""
    modules, calls = forbidden.modules, forbidden.calls
    if not modules and not calls and not forbidden.operators:
        return {}
    aliases = _import_aliases(tree)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found: dict[int, tuple[int, str]] = {}

    def add(line: int, rank: int, what: str) -> None:
        if line not in found or rank < found[line][0]:
            found[line] = (rank, what)

    for node in ast.walk(tree):
        for module in _imported_modules(node):
            if any(module == m or module.startswith(m + ".") for m in modules):
                add(node.lineno, 1, f"import of {module}")
        for written in _written_names(node):
            full = _expand(written, aliases)
            use = _forbidden_call(written, calls) or _forbidden_call(full, calls) or _operator_named(full, forbidden.operators)
            if use:
                add(node.lineno, *_how(node, use, called, parents))
        full = _expand(node.id, aliases) if isinstance(node, ast.Name) and id(node) in called else ""
        if "." in full:  # `from torch.nn import LSTM`, then LSTM(...)
            use = _forbidden_call(full, calls) or _operator_named(full, forbidden.operators)
            if use:
                add(node.lineno, 0, f"use of {use}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.partition(".")[0] in forbidden.operators:
            add(node.lineno, 2, f"{MENTION} the operator {node.value.partition('.')[0]} by its schema name")
    return {line: what for line, (_, what) in found.items()}


def _how(node: ast.AST, use: str, called: set[int], parents: dict[int, ast.AST]) -> tuple[int, str]:
    """How a line names a forbidden call, and its rank (0 strongest)."""
    parent = parents.get(id(node))
    if id(node) in called or (isinstance(parent, ast.ClassDef) and node in parent.bases):
        return 0, f"use of {use}"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return 2, f"{MENTION} {use} in an import"
    if isinstance(parent, ast.Tuple):
        parent = parents.get(id(parent))
    check = getattr(getattr(parent, "func", None), "id", "")
    return 2, f"{MENTION} {use}" + (f" in {check}" if check in ("isinstance", "issubclass") else "")


def _import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local names bound by imports to dotted paths: `import torch.nn.functional as F` binds F."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return aliases


def _expand(written: str, aliases: dict[str, str]) -> str:
    head, _, rest = written.partition(".")
    return f"{aliases[head]}.{rest}" if head in aliases and rest else aliases.get(head, written)


def _operator_named(full: str, operators: tuple[str, ...]) -> str | None:
    """The forbidden operator that a torch name reaches: `torch.ops.NS.NAME[.overload]` names NS::NAME, and any other
    torch name (`torch.lstm`, `torch._VF.lstm`, `torch._C._nn.scaled_dot_product_attention`, `F.layer_norm`) its
    last part, in any namespace."""
    parts = full.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return None
    if parts[1] == "ops" and len(parts) >= 4:
        found = f"{parts[2]}::{parts[3]}" if f"{parts[2]}::{parts[3]}" in operators else None
    else:
        found = next((op for op in operators if op.partition("::")[2] == parts[-1]), None)
    return f"the operator {found} ({full})" if found else None


def _imported_modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in ("__import__", "import_module"):
            return [node.args[0].value]
    return []


def _written_names(node: ast.AST) -> list[str]:
    """Dotted names as written: attribute chains on a name, imported modules, and what `from X import Y` binds."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [f"{node.module}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Attribute):
        return [_dotted(node)]
    if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return [f"{_dotted(node.args[0])}.{node.args[1].value}"]  # getattr(torch._C, "_VariableFunctions")
    return []


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _forbidden_call(written: str, calls: list[str]) -> str | None:
    """The forbidden call that `written` names: the whole name, or its last two parts or more."""
    for call in calls:
        if written == call or (written.count(".") >= 1 and call.endswith("." + written)):
            return call
    return None


# ---- tampering -------------------------------------------------------------------------------------

def _tampering(tree: ast.AST) -> dict[int, str]:
    nodes = list(ast.walk(tree))
    sys_names = {"sys"} | {alias.asname or alias.name for node in nodes if isinstance(node, (ast.Import, ast.ImportFrom))
                           for alias in node.names if alias.name == "sys"}
    scan = _TamperScan(sys_names, bases={id(n.value) for n in nodes if isinstance(n, ast.Attribute)},
                       called={id(n.func) for n in nodes if isinstance(n, ast.Call)})
    found: dict[int, str] = {}
    for node in nodes:
        what = scan.use(node)
        if what:
            found.setdefault(node.lineno, f"{what} ({WHY})")
    return found


class _TamperScan:
    def __init__(self, sys_names: set[str], bases: set[int], called: set[int]):
        self.sys_names, self.bases, self.called = sys_names, bases, called

    def use(self, node: ast.AST) -> str | None:
        """What `node` uses that reaches into the process, or None."""
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and self.is_sys(node) and id(node) not in self.bases:
            return "sys used other than through an attribute"  # a bare sys reaches sys.modules past this scan
        if isinstance(node, ast.Import):
            return next((f"import of {a.name}" for a in node.names if _tamper_module(a.name)), None)
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and _tamper_module(node.module):
                return f"import of {node.module}"
            on_sys = node.module == "sys"
            return next((f"import of {a.name} from {node.module or '.'}" for a in node.names
                         if _reaching_attribute(a.name, on_sys) or (on_sys and a.name == "*")), None)
        if isinstance(node, ast.Name):
            if node.id == "__builtins__" or node.id in CODE_BUILTINS:
                return f"use of {node.id}"
            return self.uncalled(node, node.id)
        if isinstance(node, ast.Attribute):
            if _reaching_attribute(node.attr, self.is_sys(node.value)):
                return f"use of {'sys' if self.is_sys(node.value) else ''}.{node.attr}"
            return self.uncalled(node, node.attr)
        if isinstance(node, ast.Call):
            return self.name_argument(node)
        if isinstance(node, ast.MatchClass):  # `case Cls(attr=x)` reads attributes by name
            return next((f"match on .{a}" for a in node.kwd_attrs if _reaching_attribute(a, False)), None)
        return None

    def is_sys(self, node: ast.AST) -> bool:
        """sys by its name or an alias, or as another module's attribute (`os.sys`, `threading._sys`)."""
        return (isinstance(node, ast.Name) and node.id in self.sys_names) or (isinstance(node, ast.Attribute) and node.attr.lstrip("_") == "sys")

    def uncalled(self, node: ast.AST, name: str) -> str | None:
        """getattr and its kin passed around (`g = getattr`) escape the check of their name argument."""
        return f"{name} used other than in a call" if name in NAME_ARGUMENT and id(node) not in self.called else None

    def name_argument(self, call: ast.Call) -> str | None:
        fn = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
        if fn not in NAME_ARGUMENT:
            return None
        at = NAME_ARGUMENT[fn]
        arg = call.args[at] if len(call.args) > at else None
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            return f"{fn} with an attribute name that is not a string literal"
        if any(_reaching_attribute(part, False) or part.lstrip("_") == "sys" for part in arg.value.split(".")):  # the bare sys is flagged
            return f"{fn} of {arg.value!r}"
        return None


def _tamper_module(module: str) -> bool:
    """A module that reaches into the process: listed, under a listed name (`numpy.ctypeslib`), or private (`_ctypes`, `__main__`)."""
    top = module.partition(".")[0]
    return top in TAMPER_MODULES or any(part in REACHING for part in module.split(".")) or (top.startswith("_") and top != "__future__")


def _reaching_attribute(name: str, on_sys: bool) -> bool:
    dunder = len(name) > 4 and name.startswith("__") and name.endswith("__")
    return (name in FRAME_ATTRIBUTES or name in REACHING or name in STRING_REACHING or (dunder and name not in ALLOWED_DUNDERS)
            or (on_sys and (name in SYS_ATTRIBUTES or name.startswith("_"))))


# ---- in words: what `autograder release` writes into the handouts and starter docstrings ----------------

def forbidden_rules(forbidden: Forbidden) -> list[str]:
    """A component's forbidden modules, calls and operators as list items: the modules, then the calls grouped by the
    module that holds them (in grading.yaml's order), then the operators, every name spelled out."""
    items = [f"importing {_names(list(forbidden.modules), 'or')}, or a module inside one of them"] if forbidden.modules else []
    owners: dict[str, list[str]] = {}
    for call in forbidden.calls:
        owner, name = call.rsplit(".", 1)
        owners.setdefault(owner, []).append(name)
    items += [f"from `{owner}`: {_names(names, 'and')}" for owner, names in owners.items()]
    if forbidden.operators:
        namespace, _, name = forbidden.operators[0].partition("::")
        items.append(f"the operators {_names(list(forbidden.operators), 'and')}, however your code reaches them: a torch "
                     f"function that runs one, `torch.ops.{namespace}.{name}` and the like, an operator fetched by its name "
                     f"(`\"{namespace}::{name}\"`), TorchScript or `torch.compile`; and PyTorch's own Python implementations "
                     "of them (in `torch._decomp` and `torch._refs`)")
    return items


def tamper_rules() -> list[str]:
    """The tamper scan's tables as list items, one per table, then what the worker refuses of the same at run time and
    the files it leaves out (sandbox/worker/audit.py, submission.shadowed)."""
    return [
        f"these names, as a module (imported in any form, also inside a dotted name) or as an attribute (`np.ctypeslib`): "
        f"{_names(sorted(REACHING), 'and')}",
        f"importing {_names(sorted(TAMPER_MODULES - REACHING), 'or')}, or any module whose name starts with `_` (`_ctypes`, "
        "`__main__`; `from __future__` is fine)",
        f"the built-ins {_names(sorted(CODE_BUILTINS), 'and')}, and `__builtins__`, wherever they are named, called or not",
        f"{_names(list(NAME_ARGUMENT), 'and')}, except in a call whose attribute name is a string literal naming nothing "
        "listed here (`getattr(self, 'weight', None)` is fine; `g = getattr` and a computed name are not)",
        f"the frame and traceback attributes {_names(sorted(FRAME_ATTRIBUTES), 'and')}",
        f"the attributes {_names(sorted(STRING_REACHING), 'and')}, on any object: they import, read or run what a string "
        "names, or reach the import machinery and the frames",
        f"on `sys`: {_names(sorted(SYS_ATTRIBUTES), 'and')}, and every name that starts with `_` (`sys._getframe`); and `sys` "
        "itself, under any name (`os.sys`, `threading._sys`), other than through one of its attributes "
        "(`sys.float_info.epsilon` is fine, `s = sys` is not)",
        f"dunder attributes (`__name__`-style) other than {_names(sorted(ALLOWED_DUNDERS), 'and')}",
        "any of these reached while your code runs, however it gets there (a string run as code, a pickle loaded, a file "
        "written while grading, a file of yours that a library imports by name): the grader refuses it where it runs, and "
        "the case fails even if your code catches the error; every file of yours is read, and one it refuses cannot be "
        "imported",
        "a file of yours named like a module of Python's standard library or an installed package (`secrets.py`, "
        "`numpy.py`): `import` finds that module first, so the file is left out (name your helper files otherwise)",
        "starting another program (`subprocess`, `os.system`, `os.exec...`): a fresh interpreter would run code the "
        "grader never read; forking a copy of your own process is fine",
    ]


def _names(names: list[str], last: str) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} {last} {quoted[-1]}"
