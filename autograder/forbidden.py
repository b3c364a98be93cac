"""The static half of the forbidden-built-in rule: scan a submitted file's source.

The worker refuses the same modules and calls at run time (sandbox/guard.py);
this scan names the line even when the use sits in a branch the cases never
reach. Calls are matched by their written form: `nn.LSTM`, `torch.nn.LSTM`,
`from torch.nn import LSTM`, and any mention of torch's private kernel
namespaces when their kernels are forbidden.
"""
from __future__ import annotations

import ast
from pathlib import Path

# Names through which the kernels of a forbidden namespace can be reached.
PRIVATE_NAMESPACES = {"torch._VF": ("_VF", "_VariableFunctions", "_VariableFunctionsClass")}


def scan_forbidden(path: Path, modules: list[str], calls: list[str]) -> list[str]:
    """'line N: import of torch' / 'line N: use of torch.nn.LSTM' for each forbidden use in `path`."""
    if not modules and not calls:
        return []
    try:
        tree = ast.parse(path.read_bytes(), filename=path.name)
    except (SyntaxError, ValueError):
        return []  # the import in the worker reports the syntax error with its line
    private = {alias: owner for owner, aliases in PRIVATE_NAMESPACES.items()
               if any(c.startswith(owner + ".") for c in calls) for alias in aliases}
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        for module in _imported_modules(node):
            if any(module == m or module.startswith(m + ".") for m in modules):
                found.setdefault(node.lineno, f"line {node.lineno}: import of {module}")
        for written in _written_names(node):
            use = _forbidden_call(written, calls) or private.get(written.rsplit(".", 1)[-1])
            if use:
                found.setdefault(node.lineno, f"line {node.lineno}: use of {use}")
    return [found[line] for line in sorted(found)]


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
        parts = [node.attr]
        base = node.value
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name):
            parts.append(base.id)
        return [".".join(reversed(parts))]
    return []


def _forbidden_call(written: str, calls: list[str]) -> str | None:
    """The forbidden call that `written` names: the whole name, or its last two parts or more."""
    for call in calls:
        if written == call or (written.count(".") >= 1 and call.endswith("." + written)):
            return call
    return None
