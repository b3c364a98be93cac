"""Tools that turn the reference solutions into student-facing releases."""
from __future__ import annotations

import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
PROJECT = PACKAGE.parent


class ReleaseError(Exception):
    """A release cannot be made from here; the message says why."""


def package_files() -> list[Path]:
    """The grader's package as installing it would install it: its modules and the package data pyproject.toml lists."""
    pyproject = PROJECT / "pyproject.toml"
    if not pyproject.is_file():
        raise ReleaseError(f"no pyproject.toml next to the grader's package {PACKAGE}: release from the project's checkout")
    data = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["autograder"]
    return sorted({p for pattern in ["**/*.py", *data] for p in PACKAGE.glob(pattern) if p.is_file() and "__pycache__" not in p.parts})
