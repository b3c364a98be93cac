"""Collecting: read grading.yaml, validate it, and list the cases to run.

The schema refuses unknown keys and wrong types with a message naming the key
path and what was expected; cross-references (check ids, component files,
parts, check parameters) are validated the same way, so a typo in the rubric
fails before anything is graded.
"""
from __future__ import annotations

import hashlib
import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from .cases import BUILDS_ON, CHECKS, DATA, FILES, SUBJECTS, TIMING
from .sandbox.worker.guard import resolve
from .timing import Policy
from .unittests import VISIBILITIES, StaffTest, StaffTestError, collect

Visibility = Literal[VISIBILITIES]  # Gradescope's
ModuleName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")]
CallName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")]
Positive = Annotated[float, Field(gt=0)]


class RubricError(Exception):
    """grading.yaml cannot be used; the message says where and why."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Defaults(Strict):
    timeout: Positive = 10.0
    rtol: Annotated[float, Field(ge=0)] = 1e-5
    atol: Annotated[float, Field(ge=0)] = 1e-8
    visibility: Visibility = "visible"
    memory_mb: Annotated[int, Field(ge=256)] = 4096


class LeaderboardSpec(Strict):
    """A timing case's column on Gradescope's leaderboard: `speedup` is the reference's time over the student's
    (higher ranks first by default), `ratio` the student's over the reference's (lower first)."""

    name: Annotated[str, Field(min_length=1)]
    value: Literal["speedup", "ratio"] = "speedup"
    order: Literal["asc", "desc"] | None = None


class CaseSpec(Strict):
    name: Annotated[str, Field(min_length=1)]
    check: str
    points: Annotated[float, Field(ge=0)]
    params: dict[str, Any] = {}
    visibility: Visibility | None = None
    timeout: Positive | None = None
    rtol: Annotated[float, Field(ge=0)] | None = None
    atol: Annotated[float, Field(ge=0)] | None = None
    number: str | None = None  # a student bundle keeps the grader's numbering
    leaderboard: LeaderboardSpec | None = None  # timing cases only


class ForbiddenSpec(Strict):
    modules: list[ModuleName] = []  # refused at import
    calls: list[CallName] = []  # functions and classes refused wherever they are reached


class ComponentSpec(Strict):
    file: str
    title: str
    forbidden: ForbiddenSpec = ForbiddenSpec()
    cases: list[CaseSpec] = []
    unittests: list[str] = []  # staff test files (unittests.py), relative to the rubric's folder: each test method a case
    not_here: Annotated[int, Field(ge=0)] = 0  # a student bundle: cases that run only when graded


class PartSpec(Strict):
    name: str
    components: Annotated[list[str], Field(min_length=1)]


class TimingSpec(Strict):
    """How timing cases turn a speed ratio (student / reference) into points; see timing.Policy."""

    without_gpu: Literal["grade", "inform", "skip"] = "grade"
    full_until: Positive = 1.5
    zero_at: Positive = 4.0
    flag_below: Annotated[float, Field(ge=0, lt=1)] = 0.1
    memory_ratio: Positive = 2.0
    seconds: Positive = 20.0
    tight: Positive = 0.1

    @model_validator(mode="after")
    def bands(self) -> TimingSpec:
        if not self.flag_below < 1 <= self.full_until < self.zero_at:
            raise ValueError(f"expected flag_below < 1 <= full_until < zero_at, got {self.flag_below}, {self.full_until}, {self.zero_at}")
        return self


class RubricSpec(Strict):
    course: str
    solutions: str | None = "solutions"
    expected: str | None = None  # a student bundle: recorded expected values instead of solutions
    accept_misnamed: bool = False  # grade a file named close to a component file (NGram.py) as that file
    defaults: Defaults = Defaults()
    timing: TimingSpec = TimingSpec()
    parts: Annotated[list[PartSpec], Field(min_length=1)]
    components: dict[str, ComponentSpec]

    @model_validator(mode="after")
    def cross_references(self) -> RubricSpec:
        problems = [] if (self.solutions is None) != (self.expected is None) else ["solutions (the grader) and expected (a student bundle): give exactly one"]
        for cid, comp in self.components.items():
            where = f"components.{cid}"
            if cid not in FILES:
                problems.append(f"{where}: unknown component (no autograder/cases/{cid}.py names its FILE); expected one of {', '.join(sorted(FILES))}")
                continue
            if comp.file != FILES[cid]:
                problems.append(f"{where}.file: expected {FILES[cid]!r} (fixed by the student API: autograder/cases/{cid}.py), got {comp.file!r}")
            for i, file in enumerate(comp.unittests):
                if Path(file).is_absolute() or ".." in Path(file).parts or not file.endswith(".py"):
                    problems.append(f"{where}.unittests.{i}: {file!r}; expected a .py file inside the rubric's folder, named relative to it")
            for i, call in enumerate(comp.forbidden.calls):
                try:
                    resolve(call)
                except (ImportError, AttributeError):
                    problems.append(f"{where}.forbidden.calls.{i}: {call!r} does not exist here, so it cannot be forbidden")
            if not comp.cases and not comp.unittests:
                problems.append(f"{where}: no cases and no unittests; give at least one case")
            names = [c.name for c in comp.cases]
            for i, case in enumerate(comp.cases):
                problems += _case_problems(f"{where}.cases.{i}", cid, case)
                if case.leaderboard and case.check not in TIMING:
                    problems.append(f"{where}.cases.{i}.leaderboard: only a timing case ranks on the leaderboard; {case.check} times nothing")
                if names.count(case.name) > 1:
                    problems.append(f"{where}.cases.{i}.name: {case.name!r} is used twice in this component")
        seen = []
        for i, part in enumerate(self.parts):
            for cid in part.components:
                if cid not in self.components:
                    problems.append(f"parts.{i}.components: {cid!r} is not a component of this rubric")
                elif cid in seen:
                    problems.append(f"parts.{i}.components: {cid!r} is already in an earlier part")
                seen.append(cid)
        missing = [cid for cid in self.components if cid not in seen]
        if missing:
            problems.append(f"parts: components {', '.join(missing)} belong to no part")
        if problems:
            raise ValueError("\n".join(problems))
        return self


def _case_problems(where: str, component: str, case: CaseSpec) -> list[str]:
    fn = CHECKS.get(case.check)
    if fn is None:
        known = ", ".join(sorted(c for c in CHECKS if c.startswith(component + ".")))
        return [f"{where}.check: unknown check {case.check!r}; known for {component}: {known or 'none'}"]
    if not case.check.startswith(component + "."):
        return [f"{where}.check: {case.check!r} belongs to another component than {component!r}"]
    nameless = [c for c in BUILDS_ON.get(case.check, ()) if c not in SUBJECTS]
    if nameless:  # a failure of this case names the part it builds on by its subject (runner._causes_first)
        return [f"{where}.check: {case.check} builds on {', '.join(nameless)}, registered without subject=; give each a subject"]
    accepted = list(inspect.signature(fn).parameters)[1:]
    unknown = [name for name in case.params if name not in accepted]
    if unknown:
        return [f"{where}.params: unknown parameter {', '.join(map(repr, unknown))} (check {case.check} takes {_params_of(fn)})"]
    try:
        inspect.signature(fn).bind(None, **case.params)
    except TypeError as exc:
        return [f"{where}.params: {exc} (check {case.check} takes {_params_of(fn)})"]
    try:
        typed_params(fn, case.params)
    except ValidationError as exc:
        error = exc.errors()[0]
        return [f"{where}.params.{error['loc'][0]}: {error['msg']} (got {error['input']!r})"]
    return []


def typed_params(fn, params: dict) -> dict:
    """Check parameters against the check's annotations (YAML reads `1.0e4` as a string)."""
    hints = typing.get_type_hints(fn)
    return {name: TypeAdapter(hints.get(name, typing.Any)).validate_python(value, context=name) for name, value in params.items()}


def _params_of(fn) -> str:
    params = list(inspect.signature(fn).parameters.values())[1:]
    return ", ".join(p.name for p in params) or "no parameters"


@dataclass(frozen=True)
class Leaderboard:
    """A case's column on the leaderboard: a timing case's speedup or ratio, or the value a staff test set (`set`)."""

    name: str
    order: str  # asc or desc
    value: str = "set"


@dataclass(frozen=True)
class Case:
    """One graded case, with every default resolved."""

    component: str
    number: str
    name: str
    check: str
    points: float
    params: dict
    visibility: str
    timeout: float
    rtol: float
    atol: float
    tags: tuple[str, ...] = ()  # beyond the component's own (a staff test's @tags)
    leaderboard: Leaderboard | None = None
    unittest: StaffTest | None = None  # a staff test's method, which runs instead of CHECKS[check]
    hide_errors: str | None = None  # a staff test's @hide_errors: said instead of why it failed

    @property
    def visible(self) -> bool:
        return self.visibility == "visible"


@dataclass(frozen=True)
class Component:
    id: str
    file: str
    title: str
    part: str
    forbidden_modules: list[str]
    forbidden_calls: list[str]
    cases: list[Case]
    not_here: int = 0  # cases a student bundle leaves out: hidden and timing cases


@dataclass(frozen=True)
class Rubric:
    course: str
    path: Path
    solutions_dir: Path | None  # None in a student bundle
    memory_mb: int
    components: list[Component]
    timing: Policy = Policy()
    expected: Path | None = None  # a student bundle's recorded expected values (expected.Replay)
    accept_misnamed: bool = False  # submission.open_submission grades NGram.py as ngram.py
    digest: str = ""  # sha256 of the rubric file and its staff test files: every run records which rubric graded it

    @property
    def record(self) -> dict:
        """Which rubric graded, for the terminal and results.json."""
        return {"path": str(self.path), "sha256": self.digest}

    @property
    def staff_files(self) -> list[str]:
        """The staff test files its cases run (relative to its folder)."""
        return sorted({k.unittest.file for c in self.components for k in c.cases if k.unittest})

    def component(self, cid: str) -> Component:
        for comp in self.components:
            if comp.id == cid:
                return comp
        raise RubricError(f"no component {cid!r} in {self.path.name}; expected one of {', '.join(c.id for c in self.components)}")


def read_yaml(path: Path, kind: type, error: type[Exception]):
    """The YAML document at `path`, which must be a `kind` (dict or list); `error` says what went wrong."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}") from None
    except yaml.MarkedYAMLError as exc:  # the mark names "<unicode string>"; say the file, line and column instead
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise error(f"{path}{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, kind):
        raise error(f"{path.name}: expected a {'mapping' if kind is dict else 'list'} at the top level, got {type(raw).__name__}")
    return raw


def load_rubric(path: Path) -> Rubric:
    raw = read_yaml(path, dict, RubricError)
    try:
        spec = RubricSpec.model_validate(raw)
    except ValidationError as exc:
        raise RubricError(f"{path.name} is invalid:\n" + "\n".join(_describe(e) for e in exc.errors())) from None
    return _resolve(spec, path)


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    msg = error["msg"].removeprefix("Value error, ")
    if error["type"] == "value_error" and not error["loc"]:
        return "\n".join(f"  - {line}" for line in msg.splitlines())
    got = error.get("input")
    shown = "" if error["type"] == "missing" or isinstance(got, (dict, list)) else f" (got {got!r})"
    return f"  - {where}: {msg}{shown}"


def _resolve(spec: RubricSpec, path: Path) -> Rubric:
    d = spec.defaults
    part_of = {cid: part.name for part in spec.parts for cid in part.components}
    order = [cid for part in spec.parts for cid in part.components]
    components, digest = [], hashlib.sha256(path.read_bytes())
    for ci, cid in enumerate(order, start=1):
        comp = spec.components[cid]
        cases = [
            Case(
                component=cid,
                number=c.number or f"{ci}.{i}",
                name=c.name,
                check=c.check,
                points=c.points,
                params=typed_params(CHECKS[c.check], c.params),
                visibility=c.visibility or d.visibility,
                timeout=c.timeout or d.timeout,
                rtol=d.rtol if c.rtol is None else c.rtol,
                atol=d.atol if c.atol is None else c.atol,
                leaderboard=_leaderboard(c.leaderboard),
            )
            for i, c in enumerate(comp.cases, start=1)
        ]
        for file in (f for f in comp.unittests if (path.parent / f).is_file()):  # a missing one: _refuse_missing says so
            digest.update((path.parent / file).read_bytes())
            cases += _staff_cases(path, cid, ci, file, len(cases), d)
        _refuse_twice(path, f"components.{cid}", cases, "name")
        components.append(Component(cid, comp.file, comp.title, part_of[cid], list(comp.forbidden.modules), list(comp.forbidden.calls), cases,
                                    comp.not_here))
    _refuse_twice(path, "components", [k for c in components for k in c.cases], "number")
    solutions, expected = ((path.parent / p).resolve() if p else None for p in (spec.solutions, spec.expected))
    _refuse_missing(path, components, solutions, expected, [f for c in spec.components.values() for f in c.unittests])
    return Rubric(spec.course, path.resolve(), solutions, d.memory_mb, components, Policy(**spec.timing.model_dump()), expected,
                  spec.accept_misnamed, digest.hexdigest())


def _leaderboard(spec: LeaderboardSpec | None) -> Leaderboard | None:
    if spec is None:
        return None
    return Leaderboard(spec.name, spec.order or ("desc" if spec.value == "speedup" else "asc"), spec.value)


def _staff_cases(path: Path, cid: str, ci: int, file: str, before: int, d: Defaults) -> list[Case]:
    """The cases of a component's staff test file, numbered after the component's cases unless @number says."""
    try:
        tests = collect(path.parent, file)
    except StaffTestError as exc:
        raise RubricError(f"{path.name}: components.{cid}.unittests: {exc}") from None
    return [Case(component=cid, number=t.number or f"{ci}.{before + i}", name=t.name, check=f"{cid}.{t.source.test}",
                 points=t.points, params={}, visibility=t.visibility or d.visibility, timeout=d.timeout, rtol=d.rtol, atol=d.atol,
                 tags=t.tags, leaderboard=Leaderboard(*t.leaderboard) if t.leaderboard else None, unittest=t.source,
                 hide_errors=t.hide_errors)
            for i, t in enumerate(tests, start=1)]


def _refuse_twice(path: Path, where: str, cases: list[Case], field: str) -> None:
    """No two cases of a component share a name, nor two of the rubric a number (a staff test's docstring or @number
    may repeat another's): results and bundles tell cases apart by them."""
    values = [getattr(c, field) for c in cases]
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise RubricError(f"{path.name}: {where}: {', '.join(map(repr, twice))} is the {field} of two cases; give each its own")


def _refuse_missing(path: Path, components: list[Component], solutions: Path | None, expected: Path | None,
                    staff: list[str]) -> None:
    """Refuse, before any student code runs, a rubric whose references, recording or case data are not there:
    graded anyway, each case needing them would fail as the grader's own error."""
    missing = []
    if solutions is not None:
        if not solutions.is_dir():
            missing.append(f"the solutions folder {solutions} (`solutions:` is relative to the rubric's folder)")
        else:
            missing += [f"{solutions / f}, the reference of {f}" for f in dict.fromkeys(c.file for c in components)
                        if not (solutions / f).is_file()]
    missing += [f"the staff test file {path.parent / f} (`unittests:` is relative to the rubric's folder)" for f in staff
                if not (path.parent / f).is_file()]
    if expected is not None and not expected.is_file():
        missing.append(f"the recorded expected values {expected}")
    missing += [f"{file}, read by check {c.check}" for comp in components for c in comp.cases for file in DATA.get(c.check, ())
                if not file.is_file()]
    if missing:
        raise RubricError(f"{path} cannot be used; missing: " + "; ".join(dict.fromkeys(missing)))

