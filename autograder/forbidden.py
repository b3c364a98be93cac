"""The static half of the forbidden-module rule: scan a submitted file's imports.

The worker refuses the same imports at run time; this scan names the line even
when the import sits in a branch the cases never reach.
"""
from __future__ import annotations

import ast
from pathlib import Path


def scan_forbidden_imports(path: Path, forbidden: list[str]) -> list[str]:
    """'line N: import torch' for every import of a forbidden module in `path`."""
    if not forbidden:
        return []
    try:
        tree = ast.parse(path.read_bytes(), filename=path.name)
    except (SyntaxError, ValueError):
        return []  # the import in the worker reports the syntax error with its line
    found = []
    for node in ast.walk(tree):
        for module in _imported_modules(node):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.append(f"line {node.lineno}: import of {module}")
    return found


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
