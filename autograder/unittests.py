"""Staff tests written the gradescope-utils way: unittest methods, decorated with gradescope-utils' own
`weight`, `visibility`, `number`, `tags`, `partial_credit`, `leaderboard` and `hide_errors`, each one case.

A component lists its test files in grading.yaml (`unittests:`). Their classes derive from `TestCase` below,
whose `self.student` is the case's proxy (student code still runs only in the sandboxed worker), `self.expect`
is `t.expect` (the reference, or a bundle's recording), `self.rng` the case's generator and `self.close` the
judge's tolerant comparison. Collecting reads the decorators into the case (`collect`); running calls the
method as a check (`run`), so a staff test ends in one Outcome like every other case:

- it returned: passed, worth `set_score`'s share of its weight under `partial_credit`;
- an assertion failed (`self.assert*`, `self.fail`): a wrong answer, its message the feedback (or the
  `hide_errors` text); the student's code raising, timing out or crashing ends it as in any check;
- the grader explained the failure itself: a return of another type, dtype or shape than the student API declares
  (returns.py checks each one before the test sees it), or the judge's comparison (`self.close`): in its own words,
  `hide_errors` or not, for a `hide_errors` text names what the test's own assertions check, a cause this failure
  did not show. The grader's words follow the visible/hidden rules as any check's do (never a hidden expected value);
- anything else is the test's own bug: the grader's internal error, which never passes (runner._outcome).
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import time
import unittest
from dataclasses import dataclass
from pathlib import Path

from .judge import CaseFailed
from .outcome import Outcome
from .sandbox.host.process import CallTimeout

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")  # Gradescope's; the rubric's too


class TestCase(unittest.TestCase):
    """The base class of a staff test: `self.student`, `self.expect`, `self.rng` and `self.close` are set
    for each case before `setUp` runs. A test that scores part of its points may say what earned them in
    `self.score_reason` ("3 of 4 sequence lengths match"): the feedback says it after the points."""

    score_reason: str | None = None

    def _bind(self, t) -> None:
        self.student, self.expect, self.rng, self.close = t.student, t.expect, t.rng, t.close


class StaffTestError(Exception):
    """A staff test file cannot be used; the message names the file and the test."""


@dataclass(frozen=True)
class StaffTest:
    """Where a case's test lives: a file (relative to the rubric's folder) and `Class.method` in it."""

    file: str
    test: str


@dataclass(frozen=True)
class Collected:
    """One test method as a case: what its decorators and docstring say."""

    source: StaffTest
    name: str
    points: float
    visibility: str | None
    number: str | None
    tags: tuple[str, ...]
    leaderboard: tuple[str, str] | None  # (column, order)
    hide_errors: str | None


def collect(root: Path, file: str) -> list[Collected]:
    """The cases of the test file `file` (relative to `root`), in the order its classes and methods are written."""
    module = _module(root / file)
    classes = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, TestCase) and c is not TestCase
               and c.__module__ == module.__name__]
    if not classes:
        raise StaffTestError(f"{file}: no class derives from autograder.unittests.TestCase")
    found = []
    for cls in sorted(classes, key=lambda c: inspect.getsourcelines(c)[1]):
        if "setUpClass" in vars(cls) or "tearDownClass" in vars(cls):
            raise StaffTestError(f"{file}: {cls.__name__} defines setUpClass or tearDownClass; each test is a case with its "
                                 "own worker, so prepare in setUp instead")
        names = unittest.TestLoader().getTestCaseNames(cls)
        for method in sorted(names, key=lambda m: inspect.getsourcelines(getattr(cls, m))[1]):
            found.append(_collected(cls, method, StaffTest(file, f"{cls.__name__}.{method}")))
    return found


def _collected(cls, method: str, source: StaffTest) -> Collected:
    fn = getattr(cls, method)
    where = f"{source.file}: {source.test}"
    weight = getattr(fn, "__weight__", None)
    visibility = getattr(fn, "__visibility__", None)
    if visibility is not None and visibility not in VISIBILITIES:
        raise StaffTestError(f"{where}: @visibility({visibility!r}); expected one of {', '.join(VISIBILITIES)}")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0):
        raise StaffTestError(f"{where}: @weight({weight!r}); expected a number >= 0")
    column = getattr(fn, "__leaderboard_column__", None)
    order = getattr(fn, "__leaderboard_sort_order__", "desc")
    if column is not None and order not in ("asc", "desc"):
        raise StaffTestError(f"{where}: @leaderboard sort order {order!r}; expected 'asc' or 'desc'")
    doc = cls(method).shortDescription()
    return Collected(source, doc or source.test, float(weight or 0), visibility, getattr(fn, "__number__", None),
                     tuple(str(tag) for tag in getattr(fn, "__tags__", ())),
                     (column, order) if column is not None else None, getattr(fn, "__hide_errors__", None))


def run(root: Path, case, t) -> Outcome:
    """`case`'s staff test (case.unittest, in the rubric's folder `root`) as a check of the Trial `t`: when it returns,
    a passed Outcome worth `set_score`'s share of the points, with its leaderboard value."""
    cls_name, method = case.unittest.test.split(".")
    cls = getattr(_module(root / case.unittest.file), cls_name)
    fn = getattr(cls, method)
    for kept in ("__score__", "__leaderboard_value__"):  # gradescope-utils keeps these on the function: not from an earlier case
        vars(fn).pop(kept, None)
    test = cls(method)
    test._bind(t)
    try:
        test.setUp()
        try:
            getattr(test, method)()
        finally:
            test.tearDown()
            test.doCleanups()
    except AssertionError as exc:
        raise CaseFailed(case.hide_errors or str(exc) or "The staff test's assertion failed.") from None
    deadline = t.student.deadline
    if time.monotonic() > deadline.at:
        raise CallTimeout(deadline.seconds)
    return _credit(case, vars(fn), test.score_reason)


def _credit(case, kept: dict, reason: str | None) -> Outcome:
    score, extra = kept.get("__score__"), {}
    if case.points and score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= case.points:
            raise ValueError(f"{case.unittest.test}: set_score({score!r}) is outside 0..{case.points:g}")
    fraction = 1.0 if score is None or not case.points else score / case.points
    if case.leaderboard:
        value = kept.get("__leaderboard_value__")
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"{case.unittest.test}: set_leaderboard_value({value!r}); expected a number or a string")
        extra["leaderboard_value"] = value
    message = "Passed." if fraction == 1 else reason or "set by the staff test, which gives no reason."
    return Outcome("passed", message, fraction, extra)


_MODULES: dict[tuple, object] = {}


def _module(path: Path):
    """The test file imported, once per content (a changed file is imported again), under a name of its own."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StaffTestError(f"cannot read the staff test file {path}: {exc.strerror}") from None
    key = (str(path.resolve()), hashlib.sha256(data).hexdigest())
    if key not in _MODULES:
        name = f"autograder_staff_tests.{path.stem}_{key[1][:12]}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # unittest and inspect look classes' modules up here
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise StaffTestError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from None
        _MODULES[key] = module
    return _MODULES[key]
