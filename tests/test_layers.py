"""The grader's modules import one way, down the layers (issue 42): no module imports another inside a function to dodge
a cycle, and the modules' own imports form no cycle. The two imports made late are listed with why."""
import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "autograder"
# (module, what it imports late): why it is late. Nothing here dodges a cycle.
LATE = {
    ("autograder.batch", "autograder.batch.cluster"): "Ray is an extra: imported only for --backend ray",
    ("autograder.sandbox.host.floor", "autograder.sandbox.host.machine_floor"): "flock(2) is POSIX's: a student's check runs anywhere",
}


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The grader's modules an import statement of `module` names (a name imported from a package may be a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    base = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
    found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    return found or ([base] if base in MODULES else [])


def _imports(module: str) -> tuple[set[str], set[str]]:
    """(what `module` imports at its top level, what it imports inside functions)."""
    tree = ast.parse(MODULES[module].read_text())
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)}
    top, late = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            (late if id(node) in inside else top).update(_imported(module, node))
    return top - {module}, late - {module}


def test_no_module_imports_another_late_but_for_the_listed_reasons():
    late = {(m, other) for m in MODULES for other in _imports(m)[1]}
    assert late == set(LATE)


def test_the_modules_imports_form_no_cycle():
    graph = {m: {o for o in _imports(m)[0] if not m.startswith(o + ".")} for m in MODULES}  # a package's own parents: its __init__ runs first
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for other in sorted(graph[m]):
            assert state.get(other) != 1, " -> ".join([*path, m, other])
            if other not in state:
                visit(other, [*path, m])
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m, [])
