"""Collecting: read grading.yaml, validate it, and list the cases to run.

The schema refuses unknown keys and wrong types; cross-references (check ids,
component files, parts, check parameters) are validated after it, so a typo in
the rubric fails before anything is graded. Each problem is said with its line,
the case as the results number it (1.3, not the third item of a list counted
from 0) and its name, what was expected, and the name meant where a name is a
near miss of a known one.
"""
from __future__ import annotations

import difflib
import hashlib
import inspect
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from .cases import BUILDS_ON, CHECKS, DATA, FILES, SUBJECTS, TIMING
from .sandbox.host.process import Forbidden
from .sandbox.worker.forbidden_ops import resolve
from .timing import Policy
from .unittests import VISIBILITIES, StaffTest, StaffTestError, collect

Visibility = Literal[VISIBILITIES]  # Gradescope's
ModuleName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")]
CallName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")]
OperatorName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*$")]  # aten::lstm, no overload
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
    # The dispatcher's operators, refused where they run however they are reached. One this torch lacks (another
    # version's, another backend's) cannot run here, so there is nothing to refuse: unlike a call, it is not an error.
    operators: list[OperatorName] = []


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


Problem = tuple[tuple, str]  # where in grading.yaml (its key path, list items counted from 0) and what is wrong there


def cross_references(spec: RubricSpec, components: list[str] | None = None) -> list[Problem]:
    """What the schema cannot see: check ids, component files, parts, check parameters, staff test paths; the forbidden
    calls of `components` only, when given (resolving a call imports its library: a check of ngram imports no torch)."""
    problems = [] if (spec.solutions is None) != (spec.expected is None) else [((), "solutions (the grader) and expected (a student bundle): give exactly one")]
    for cid, comp in spec.components.items():
        where = ("components", cid)
        if cid not in FILES:
            problems.append((where, f"unknown component (no autograder/cases/{cid}.py names its FILE); expected one of "
                                    f"{', '.join(sorted(FILES))}{_near(cid, FILES)}"))
            continue
        if comp.file != FILES[cid]:
            problems.append(((*where, "file"), f"expected {FILES[cid]!r} (fixed by the student API: autograder/cases/{cid}.py), got {comp.file!r}"))
        for i, file in enumerate(comp.unittests):
            if Path(file).is_absolute() or ".." in Path(file).parts or not file.endswith(".py"):
                problems.append(((*where, "unittests", i), f"{file!r}; expected a .py file inside the rubric's folder, named relative to it"))
        for i, call in enumerate(comp.forbidden.calls if components is None or cid in components else ()):
            try:
                resolve(call)
            except (ImportError, AttributeError):
                problems.append(((*where, "forbidden", "calls", i), f"{call!r} does not exist here, so it cannot be forbidden"))
        if not comp.cases and not comp.unittests:
            problems.append((where, "no cases and no unittests; give at least one case"))
        names = [c.name for c in comp.cases]
        for i, case in enumerate(comp.cases):
            at = (*where, "cases", i)
            problems += _case_problems(at, cid, case)
            if case.leaderboard and case.check not in TIMING:
                problems.append(((*at, "leaderboard"), f"only a timing case ranks on the leaderboard; {case.check} times nothing"))
            if names.count(case.name) > 1:
                problems.append(((*at, "name"), f"{case.name!r} is used twice in this component"))
    seen = []
    for i, part in enumerate(spec.parts):
        for cid in part.components:
            if cid not in spec.components:
                problems.append((("parts", i, "components"), f"{cid!r} is not a component of this rubric{_near(cid, spec.components)}"))
            elif cid in seen:
                problems.append((("parts", i, "components"), f"{cid!r} is already in an earlier part"))
            seen.append(cid)
    missing = [cid for cid in spec.components if cid not in seen]
    if missing:
        problems.append((("parts",), f"components {', '.join(missing)} belong to no part"))
    return problems


def _case_problems(at: tuple, component: str, case: CaseSpec) -> list[Problem]:
    fn = CHECKS.get(case.check)
    if fn is None:
        known = ", ".join(sorted(c for c in CHECKS if c.startswith(component + ".")))
        return [((*at, "check"), f"unknown check {case.check!r}; known for {component}: {known or 'none'}{_near(case.check, CHECKS)}")]
    if not case.check.startswith(component + "."):
        return [((*at, "check"), f"{case.check!r} belongs to another component than {component!r}")]
    nameless = [c for c in BUILDS_ON.get(case.check, ()) if c not in SUBJECTS]
    if nameless:  # a failure of this case names the part it builds on by its subject (runner._causes_first)
        return [((*at, "check"), f"{case.check} builds on {', '.join(nameless)}, registered without subject=; give each a subject")]
    accepted = list(inspect.signature(fn).parameters)[1:]
    unknown = [name for name in case.params if name not in accepted]
    if unknown:
        return [((*at, "params"), f"unknown parameter {', '.join(map(repr, unknown))} (check {case.check} takes {_params_of(fn)})"
                                  f"{_near(unknown[0], accepted)}")]
    try:
        inspect.signature(fn).bind(None, **case.params)
    except TypeError as exc:
        return [((*at, "params"), f"{exc} (check {case.check} takes {_params_of(fn)})")]
    try:
        typed_params(fn, case.params)
    except ValidationError as exc:
        error = exc.errors()[0]
        return [((*at, "params", error["loc"][0]), f"{error['msg']} (got {error['input']!r})")]
    return []


def _near(name: str, known) -> str:
    """"; did you mean 'points'?" where `name` is a near miss of one of `known` (difflib), whatever its case; else ""."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), by_lower, n=1)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


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

    @property
    def place(self) -> int:
        """Where the column stands on the board, whose first column ranks: a timing case's (0) before a staff test's (1),
        each in the rubric's order. Times differ between correct submissions; a staff test's value may not (every
        correct n-gram model has the same perplexity), and a column where every right answer ties ranks nobody."""
        return 1 if self.value == "set" else 0


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
    forbidden: Forbidden
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
    def leaderboard(self) -> list[str]:
        """The leaderboard's columns in the board's order (Leaderboard.place)."""
        boards = sorted((k.leaderboard for c in self.components for k in c.cases if k.leaderboard), key=lambda b: b.place)
        return list(dict.fromkeys(b.name for b in boards))

    @property
    def staff_files(self) -> list[str]:
        """The staff test files its cases run (relative to its folder)."""
        return sorted({k.unittest.file for c in self.components for k in c.cases if k.unittest})

    @property
    def parts(self) -> list[str]:
        """The names of the course's parts, in order: part n is the n-th."""
        return list(dict.fromkeys(c.part for c in self.components))

    def part_numbers(self, components: list[Component]) -> list[int]:
        """The numbers of the parts `components` belong to, in order."""
        return [self.parts.index(part) + 1 for part in dict.fromkeys(c.part for c in components)]

    def select(self, parts: Sequence[str] = ()) -> list[Component]:
        """Every component, or those of the parts named, each by its number (1, 2...) or its name; in the course's order."""
        if not parts:
            return self.components
        names, chosen = self.parts, set()
        for part in parts:
            name = names[int(part) - 1] if part.isdigit() and 0 < int(part) <= len(names) else part
            if name not in names:
                raise RubricError(f"no part {part!r}; expected a number from 1 to {len(names)} or one of: " + "; ".join(names))
            chosen.add(name)
        return [c for c in self.components if c.part in chosen]

    @property
    def files(self) -> frozenset[str]:
        """The student API's files it grades: a rubric of some parts grades theirs only (submission.open_submission)."""
        return frozenset(c.file for c in self.components)

    def component(self, cid: str) -> Component:
        for comp in self.components:
            if comp.id == cid:
                return comp
        raise RubricError(f"no component {cid!r} in {self.path.name}; expected one of {', '.join(c.id for c in self.components)}")


# libyaml's loader where PyYAML was built with it: grading.yaml loads in 15 ms instead of 150.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, kind: type, error: type[Exception]):
    """The YAML document at `path`, which must be a `kind` (dict or list); `error` says what went wrong."""
    try:
        raw = yaml.load(path.read_text(), Loader=SAFE_LOADER)
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


def load_rubric(path: Path, components: list[str] | None = None, calls: bool = True) -> Rubric:
    """The rubric at `path`, validated whole. `components`: the only ones a command will grade (default: every one):
    the others' forbidden calls are not resolved (cross_references) nor their staff tests collected, since each
    imports its library (a check of ngram must not import torch for lstm's). `calls`: False resolves no forbidden
    call (a student's check, of a rubric resolved when it was released, starts its workers before importing torch)."""
    raw = read_yaml(path, dict, RubricError)
    try:
        spec = RubricSpec.model_validate(raw)
        problems = cross_references(spec, components if calls else [])
    except ValidationError as exc:
        problems = [_schema_problem(e) for e in exc.errors()]
    if problems:
        lines = _key_lines(path.read_text())
        raise RubricError(f"{path.name} is invalid:\n" + "\n".join(_describe(where, what, raw, lines) for where, what in problems))
    return _resolve(spec, path, components)


def _schema_problem(error: dict) -> Problem:
    """A pydantic error in our words: an unknown key with the keys allowed there (or the near one), a value with what
    was given."""
    if error["type"] == "extra_forbidden":
        keys = _keys_at(error["loc"][:-1])
        return error["loc"], "unknown key" + (_near(str(error["loc"][-1]), keys) or f"; expected one of {', '.join(keys)}")
    got = error.get("input")
    shown = "" if error["type"] == "missing" or isinstance(got, (dict, list)) else f" (got {got!r})"
    return error["loc"], error["msg"].removeprefix("Value error, ") + shown


def _keys_at(loc: tuple) -> list[str]:
    """The keys the schema allows in the mapping at `loc`."""
    kind = RubricSpec
    for step in loc:
        kind = kind.model_fields[step].annotation if _is_model(kind) else typing.get_args(kind)[-1]  # a dict's value, a list's item
        if typing.get_origin(kind) in (typing.Union, types.UnionType):  # an optional one
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
    return list(kind.model_fields)


def _is_model(kind) -> bool:
    return isinstance(kind, type) and issubclass(kind, BaseModel)


def _key_lines(text: str) -> dict[tuple, int]:
    """The line (from 1) of each key path of the YAML document: a key's own line, a list item's first line."""
    lines = {}

    def walk(node: yaml.Node, loc: tuple) -> None:
        if isinstance(node, yaml.MappingNode):
            items = [(key.value, key, value) for key, value in node.value]
        elif isinstance(node, yaml.SequenceNode):
            items = [(i, item, item) for i, item in enumerate(node.value)]
        else:
            return
        for step, start, value in items:
            lines[(*loc, step)] = start.start_mark.line + 1
            walk(value, (*loc, step))

    walk(yaml.compose(text, Loader=yaml.SafeLoader), ())
    return lines


def _describe(loc: tuple, what: str, raw: dict, lines: dict[tuple, int]) -> str:
    """One problem as a person finds it: the line (of the deepest key there is), the case as the results number it
    (component.case, counted from 1), its name, and the rest of the key path."""
    line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
    if loc[:1] == ("components",) and loc[2:3] == ("cases",) and len(loc) > 3:
        where, rest = f"components.{loc[1]} {_case_label(raw, loc[1], loc[3])}", loc[4:]
    elif loc[:1] == ("parts",) and len(loc) > 1:
        part = raw["parts"][loc[1]]
        name = f" {part['name']!r}" if isinstance(part, dict) and isinstance(part.get("name"), str) else ""
        where, rest = f"part {loc[1] + 1}{name}", loc[2:]
    else:
        where, rest = _path(loc) or "the top level", ()
    return f"  - {f'line {line}, ' if line else ''}{where}{f', {_path(rest)}' if rest else ''}: {what}"


def _path(loc: tuple) -> str:
    """A key path, each list item counted from 1: forbidden.calls item 2."""
    return "".join(f" item {step + 1}" if isinstance(step, int) else f"{'.' * (i > 0)}{step}" for i, step in enumerate(loc))


def _case_label(raw: dict, cid: str, index: int) -> str:
    """Case `index` of component `cid` as the results number it, and its name: "case 1.4 'count_ngrams, bigrams'"."""
    case = raw["components"][cid]["cases"][index]
    case = case if isinstance(case, dict) else {}
    parts = raw.get("parts") if isinstance(raw.get("parts"), list) else []
    order = [c for part in parts if isinstance(part, dict) and isinstance(part.get("components"), list) for c in part["components"]]
    number = case.get("number") if isinstance(case.get("number"), str) else (
        f"{order.index(cid) + 1}.{index + 1}" if cid in order else f"{index + 1} (of a component in no part)")
    return f"case {number}" + (f" {case['name']!r}" if isinstance(case.get("name"), str) else "")


def _resolve(spec: RubricSpec, path: Path, graded: list[str] | None) -> Rubric:
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
            if graded is None or cid in graded:
                cases += _staff_cases(path, cid, ci, file, len(cases), d)
        _refuse_twice(path, f"components.{cid}", cases, "name")
        rules = Forbidden(tuple(comp.forbidden.modules), tuple(comp.forbidden.calls), tuple(comp.forbidden.operators))
        components.append(Component(cid, comp.file, comp.title, part_of[cid], rules, cases, comp.not_here))
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

