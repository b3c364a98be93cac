"""Verifying the grader before a release: the reference earns every point, the starter none, and every
known mistake is caught where it belongs.

The known mistakes are a staff-written catalog (mistakes.yaml in the solutions folder, which is never
released): each is solutions/ with one edit in the file of the component it breaks. Only the components
graded from that file are graded again: no solution imports another, so the others cannot move; for the
same reason mistakes in different files are graded together, in one variant (judge_each), which pays
a grade's start-up once for several. The submissions run in the sandbox like any other; this module
imports nothing from them.
"""
from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .cases import TIMING
from .rubric import Rubric, read_yaml
from .outcome import INTERNAL_ERROR
from .runner import CaseResult, GradeRun, grade, kept_template
from .sandbox.host.template import Template
from .sandbox.host.tiers import Isolation, isolation_for
from .submission import open_submission

CATALOG = "mistakes.yaml"  # beside the solutions it edits
SECRET = "verify"  # fixed, so that hidden inputs, and with them every verdict, are the same on each run
# Checks that train models or draw thousands of samples (seconds each); other cases catch most mistakes sooner.
QUICK_SKIPS = frozenset({"transformer.training", "seq2seq.training", "ngram.sampling", "transformer.generate_distribution"})


class MistakesError(Exception):
    """The catalog cannot be used; the message names the entry and says why."""


class Mistake(BaseModel):
    """One known mistake: `old`, which occurs once in the component's solution file, becomes `new`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Annotated[str, Field(min_length=1)]
    component: str
    old: Annotated[str, Field(min_length=1)]
    new: str
    must_fail: Annotated[frozenset[str], Field(min_length=1)]  # checks that must fail
    feedback: Annotated[str, Field(min_length=1)]  # a phrase the student must read
    also: frozenset[str] = frozenset()  # checks of a sibling component of the same file it genuinely breaks


def load_mistakes(rubric: Rubric, path: Path | None = None) -> list[Mistake]:
    """The catalog at `path` (default: the rubric's solutions folder), checked against the rubric and the solutions."""
    if rubric.solutions_dir is None:
        raise MistakesError(f"{rubric.path.name} has no solutions (a student bundle): verify needs the grader's rubric")
    path = path or rubric.solutions_dir / CATALOG
    raw = read_yaml(path, list, MistakesError)
    mistakes, problems = [], []
    for i, entry in enumerate(raw, start=1):
        where = f"entry {i}" + (f" ({entry['name']!r})" if isinstance(entry, dict) and "name" in entry else "")
        try:
            mistake = Mistake.model_validate(entry)
        except ValidationError as exc:
            problems += [f"{where}: {'.'.join(map(str, e['loc'])) or 'the entry'}: {e['msg']}" for e in exc.errors()]
            continue
        problems += [f"{where}: {p}" for p in _problems(mistake, rubric, mistakes)]
        mistakes.append(mistake)
    if problems:
        raise MistakesError(f"{path} is invalid:\n" + "\n".join(f"  - {p}" for p in problems))
    return mistakes


def _problems(mistake: Mistake, rubric: Rubric, earlier: list[Mistake]) -> list[str]:
    component = next((c for c in rubric.components if c.id == mistake.component), None)
    if component is None:
        return [f"component: unknown component {mistake.component!r}; expected one of {', '.join(c.id for c in rubric.components)}"]
    own = {k.check for k in component.cases}
    siblings = {k.check for c in rubric.components if c.file == component.file and c is not component for k in c.cases}
    problems = [f"must_fail: no case of {component.id} grades {check!r}, nor is it in also; known: {', '.join(sorted(own))}"
                for check in sorted(mistake.must_fail - own - mistake.also)]
    problems += [f"also: no other component of {component.file} grades {check!r}; known: {', '.join(sorted(siblings)) or 'none'}"
                 for check in sorted(mistake.also - siblings)]
    count = (rubric.solutions_dir / component.file).read_text().count(mistake.old)
    if count != 1:
        problems.append(f"old: occurs {count} times in {component.file}; it must occur exactly once")
    if any(m.name == mistake.name and m.component == mistake.component for m in earlier):
        problems.append(f"name: another {component.id} mistake has this name")
    return problems


def write_variant(solutions: Path, file: str, old: str, new: str, folder: Path) -> Path:
    """A copy of `solutions` in `folder`, with `old` replaced by `new` in `file`."""
    return write_edits(solutions, [(file, old, new)], folder)


def write_edits(solutions: Path, edits: list[tuple[str, str, str]], folder: Path) -> Path:
    """A copy of `solutions` in `folder`, with each edit (file, old, new) made: `old` replaced by `new` in `file`."""
    shutil.copytree(solutions, folder)
    for file, old, new in edits:
        path = folder / file
        path.write_text(path.read_text().replace(old, new))
    return folder


def course_isolation(rubric: Rubric) -> Isolation:
    """The strongest isolation here for grading the course's own variants, to enter once."""
    return isolation_for(rubric.path.parent, rubric.solutions_dir)


def grade_folder(rubric: Rubric, folder: Path, isolation: Isolation, component_ids: list[str] | None = None,
                 template: Template | None = None) -> GradeRun:
    """A variant graded for verify: whether its mistake is caught, and with which words, not what mutants would name."""
    with tempfile.TemporaryDirectory(prefix="autograder-verify-") as scratch:
        return grade(rubric, open_submission(folder, Path(scratch)), secret=SECRET, isolation=isolation, component_ids=component_ids,
                     template=template, explain=False)


def _lost(r: CaseResult) -> bool:
    return not r.passed or r.score < r.max_score


@dataclass(frozen=True)
class Verdict:
    mistake: Mistake
    run: GradeRun  # the components graded from the mistake's file

    def _belongs(self, r: CaseResult) -> bool:
        """A case the mistake may fail: one of its component, or a check it declares in `also`."""
        return r.case.component == self.mistake.component or r.case.check in self.mistake.also

    @property
    def caught_by(self) -> list[str]:
        return [r.case.name for r in self.run.results if r.case.component == self.mistake.component and _lost(r)]

    @property
    def kept_full_marks(self) -> bool:
        return all(r.score == r.max_score for r in self.run.results if r.case.component == self.mistake.component)

    @property
    def passed_must_fail(self) -> list[str]:
        failed = {r.case.check for r in self.run.results if _lost(r)}  # a partial-credit case fails by losing points
        return sorted(self.mistake.must_fail - failed)

    @property
    def feedback_missing(self) -> bool:
        return self.mistake.feedback not in "\n".join(r.output for r in self.run.results if not r.passed and self._belongs(r))

    @property
    def outside(self) -> list[str]:
        return [f"[{r.case.component}] {r.case.name}" for r in self.run.results if _lost(r) and not self._belongs(r)]

    @property
    def caught(self) -> bool:
        return not (self.kept_full_marks or self.passed_must_fail or self.feedback_missing)

    @property
    def problems(self) -> list[tuple[str, str]]:
        """(flag, detail) for each way the grader falls short on this mistake; none when it is caught in its component only."""
        m = self.mistake
        flags = [
            (self.kept_full_marks, "kept full marks", f"every case of {m.component} gave full points"),
            (self.passed_must_fail, "must_fail passed", ", ".join(self.passed_must_fail)),
            (self.feedback_missing, "feedback phrase missing", f"no case it may fail says {m.feedback!r}"),
            (self.outside, "cost points outside its component", ", ".join(self.outside)),
        ]
        return [(flag, detail) for found, flag, detail in flags if found]


def judge(rubric: Rubric, mistake: Mistake, isolation: Isolation, quick: bool = False) -> Verdict:
    """Grade solutions/ with `mistake` in, on the components of its file, under `isolation` (entered); `quick`
    leaves out the slow cases of QUICK_SKIPS and the timing cases (they measure speed, which no mistake of the catalog
    is about, for seconds each) unless must_fail names them."""
    return next(judge_each(rubric, [mistake], isolation, quick))


def judge_each(rubric: Rubric, mistakes: list[Mistake], isolation: Isolation, quick: bool = False) -> Iterator[Verdict]:
    """Each mistake judged as `judge` judges it, several graded at once: one variant holds one mistake in each of
    several files, and one grade takes the components of all those files. No solution imports another, so each file's
    components see their own mistake alone. The variants are the course's own code, edits of solutions/, so their
    workers fork from one template (a process that imports torch) kept for every group. Verdicts come group by group."""
    template = kept_template(rubric, isolation.tier)  # None: each grade starts its own, as elsewhere
    try:
        yield from _judge_groups(rubric, mistakes, isolation, quick, template)
    finally:
        if template:
            template.close()


def _judge_groups(rubric: Rubric, mistakes: list[Mistake], isolation: Isolation, quick: bool,
                  template: Template | None) -> Iterator[Verdict]:
    for group in one_per_file(rubric, mistakes):
        files = {m: rubric.component(m.component).file for m in group}
        components = []
        for m in group:
            skip = (QUICK_SKIPS | TIMING) - m.must_fail if quick else frozenset()
            components += [dataclasses.replace(c, cases=[k for k in c.cases if k.check not in skip])
                           for c in rubric.components if c.file == files[m]]
        with tempfile.TemporaryDirectory(prefix="autograder-verify-") as scratch:
            folder = write_edits(rubric.solutions_dir, [(files[m], m.old, m.new) for m in group], Path(scratch) / "variant")
            run = grade_folder(dataclasses.replace(rubric, components=components), folder, isolation, template=template)
        for m in group:
            yield Verdict(m, _only(run, {c.id for c in rubric.components if c.file == files[m]}))


def one_per_file(rubric: Rubric, mistakes: list[Mistake]) -> list[list[Mistake]]:
    """The mistakes in groups of at most one per file, in the catalog's order: each group can be graded as one
    variant (no solution imports another)."""
    groups: list[list[Mistake]] = []
    for m in mistakes:
        file = rubric.component(m.component).file
        group = next((g for g in groups if all(rubric.component(o.component).file != file for o in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(m)
    return groups


def _only(run: GradeRun, components: set[str]) -> GradeRun:
    """The part of `run` that graded `components`, as a run of them alone would report it."""
    return dataclasses.replace(run, results=[r for r in run.results if r.case.component in components],
                               forbidden={c: n for c, n in run.forbidden.items() if c in components})


@dataclass(frozen=True)
class Report:
    solutions: GradeRun
    starter: GradeRun
    verdicts: list[Verdict]
    seconds: float

    @property
    def solutions_missed(self) -> list[CaseResult]:
        return [r for r in self.solutions.results if _lost(r)]

    @property
    def starter_earned(self) -> list[CaseResult]:
        return [r for r in self.starter.results if r.score > 0]

    @property
    def starter_crashed(self) -> list[CaseResult]:
        return [r for r in self.starter.results if r.output == INTERNAL_ERROR]

    @property
    def passed(self) -> bool:
        return not (self.solutions_missed or self.starter_earned or self.starter_crashed or any(v.problems for v in self.verdicts))


def verify(rubric: Rubric, mistakes: list[Mistake], components: list[str] | None = None, quick: bool = False,
           progress: Callable[[str], None] = lambda line: None) -> Report:
    """Grade the solutions and the starter on `components` (default: all), then judge each of their known mistakes."""
    started = time.monotonic()
    ids = [rubric.component(c).id for c in components] if components else [c.id for c in rubric.components]  # unknown: RubricError
    runs, verdicts = {}, []
    with course_isolation(rubric) as entered:
        for name, folder in (("solutions", rubric.solutions_dir), ("starter", rubric.path.parent / "starter")):
            runs[name] = grade_folder(rubric, folder, entered, ids)
            progress(f"{name}: {_points(runs[name].results)} points ({runs[name].seconds:.1f} s)")
        chosen = [m for m in mistakes if m.component in ids]
        for verdict in judge_each(rubric, chosen, entered, quick):
            verdicts.append(verdict)
            flags = "; ".join(flag for flag, _ in verdict.problems)
            progress(f"{verdict.mistake.component}: {verdict.mistake.name}: {flags or 'caught'} (graded with others: {verdict.run.seconds:.1f} s)")
    verdicts.sort(key=lambda v: chosen.index(v.mistake))  # the catalog's order
    return Report(runs["solutions"], runs["starter"], verdicts, time.monotonic() - started)


def _points(results: list[CaseResult]) -> str:
    return f"{sum(r.score for r in results):g}/{sum(r.max_score for r in results):g}"


def print_report(report: Report, console: Console) -> None:
    table = Table(title="Known mistakes")
    for column in ("component", "mistake", "caught by", "problems"):
        table.add_column(column)
    for v in report.verdicts:
        names = v.caught_by
        caught_by = "; ".join(names[:3]) + (f"; {len(names) - 3} more" if len(names) > 3 else "")  # names hold commas
        flags = "; ".join(flag for flag, _ in v.problems)
        table.add_row(v.mistake.component, escape(v.mistake.name), escape(caught_by), f"[red]{flags}[/]" if flags else "[green]none[/]")
    console.print(table)
    for v in report.verdicts:
        for flag, detail in v.problems:
            console.print(f"{v.mistake.component}: {v.mistake.name}: {flag}: {detail}", markup=False, highlight=False)
    console.print(f"solutions: {_points(report.solutions.results)} points; starter: {_points(report.starter.results)} points", highlight=False)
    for what, results in (("solutions missed", report.solutions_missed), ("starter earned", report.starter_earned),
                          ("starter crashed", report.starter_crashed)):
        for r in results:
            console.print(f"{what}: [{r.case.component}] {r.case.name}: {r.output}", markup=False, highlight=False)
    for component in dict.fromkeys(r.case.component for r in report.solutions.results):
        verdicts = [v for v in report.verdicts if v.mistake.component == component]
        console.print(f"{component}: {sum(v.caught for v in verdicts)}/{len(verdicts)} known mistakes caught", highlight=False)
    caught, total = sum(v.caught for v in report.verdicts), len(report.verdicts)
    share = f" ({caught / total:.0%})" if total else ""
    console.print(f"[bold]Caught {caught}/{total} known mistakes{share}[/]  ({report.seconds:.0f} s; isolation: "
                  f"{report.solutions.isolation_line})", highlight=False)
    console.print("verify: passed" if report.passed else "[red]verify: FAILED[/]", highlight=False)
