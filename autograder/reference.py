"""The reference implementations, loaded into the trusted parent only.

Solution files are imported under their student-API names (`ngram`,
`attention`, ...) so that they can import each other as submissions do. The
parent never imports a submission, so those names always mean the reference.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


class Reference:
    """Attribute access loads the solution module of that name: `ref.ngram`; `ref.oracles` holds the grader's
    own oracles and mistake simulators (autograder/oracles/, never shipped to students)."""

    def __init__(self, solutions_dir: Path):
        self.solutions_dir = solutions_dir

    @property
    def oracles(self):
        return importlib.import_module(f"{__package__}.oracles")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        path = self.solutions_dir / f"{name}.py"
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__file__", None) == str(path):
            return loaded
        if not path.is_file():
            raise AttributeError(f"no reference solution {path}")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
