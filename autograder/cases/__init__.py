"""Check functions, registered by id (`component.name`) for grading.yaml to cite.

A check receives a `Trial` and the case's `params`; it returns normally when
the student's answer is right and raises `CaseFailed` with feedback when not.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

from ..sandbox.host.process import PRELOAD

CHECKS: dict[str, Callable] = {}
TIMING: set[str] = set()  # checks that time the student (timing.py), which the policy may skip without a GPU
SUBJECTS: dict[str, str] = {}  # check -> the part of the student's code it grades ("FeedForward")
BUILDS_ON: dict[str, tuple[str, ...]] = {}  # check -> the checks of the parts its cases run too
DATA: dict[str, tuple[Path, ...]] = {}  # check -> the files it reads (a rubric citing it is refused without them)
IMPORTS: dict[str, tuple[str, ...]] = {}  # check -> slow imports its own requests cause, done before its component starts
APART: set[str] = set()  # checks whose cases run long in the student's code: graded in a worker of their own (runner._shares)
# component -> the libraries its cases (and staff tests) build values of: what every worker preloads (numpy and torch),
# unless its module's USES says less (ngram's cases send lists, strings and a numpy generator): its workers, and the
# grader, then never import torch.
USES: dict[str, tuple[str, ...]] = {}
FILES: dict[str, str] = {}  # component -> the student API's file that holds it: each component's case module says (FILE)


def check(check_id: str, timing: bool = False, subject: str | None = None, builds_on: tuple[str, ...] = (),
          data: tuple[Path, ...] = (), imports: tuple[str, ...] = (), apart: bool = False):
    """Register a check. A failed case of a check that `builds_on` others first names the failing cases of
    those (runner.py), so a student sees the cause before its consequences."""
    def register(fn: Callable) -> Callable:
        if check_id in CHECKS:
            raise ValueError(f"check {check_id!r} is registered twice")
        CHECKS[check_id] = fn
        if timing:
            TIMING.add(check_id)
        if subject:
            SUBJECTS[check_id] = subject
        if builds_on:
            BUILDS_ON[check_id] = builds_on
        if data:
            DATA[check_id] = data
        if imports:
            IMPORTS[check_id] = imports
        if apart:
            APART.add(check_id)
        return fn

    return register


# Importing a case module registers its checks: every module here, so that a new component needs no edit of
# this file, and a student bundle (which holds only the modules of the parts it releases) loads what it has.
# A component's module is named for it and names its file; the others (common.py, speed.py) hold shared checks.
for _module in pkgutil.iter_modules(__path__):
    _loaded = importlib.import_module(f"{__name__}.{_module.name}")
    if hasattr(_loaded, "FILE"):
        FILES[_module.name] = _loaded.FILE
        USES[_module.name] = getattr(_loaded, "USES", PRELOAD)
