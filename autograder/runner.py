"""Running: drive each component's cases through a worker, one case at a time.

Each component gets its own worker, started before its first case so start-up
time is not charged to the case; a case that kills or hangs its worker fails,
and the next case gets a fresh one. Whatever goes wrong, every case ends with
one Outcome (outcome.py): a case passes only when its check returned normally.
"""
from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from .cases import BUILDS_ON, CHECKS, SUBJECTS, TIMING
from .expected import Live, Replay
from .forbidden import forbidden_names, scan_submission
from .outcome import INTERNAL_ERROR, PASSED, Ended, Outcome
from .reference import Reference
from .rubric import Case, Component, Rubric
from .sandbox.host import reaper
from .sandbox.host.process import Deadline, Limits
from .sandbox.host.proxy import Slot
from .sandbox.host.tiers import Isolation, Tier
from .submission import Submission
from .timing import Speed, Verdict
from .trial import Trial


@dataclass(frozen=True)
class CaseResult:
    """A case's report: its outcome, and what it cost."""

    case: Case
    outcome: Outcome
    seconds: float = 0.0
    counted: bool = True  # False: reported only (a timing case without a GPU under `inform` or `skip`)
    printed: str = ""  # what the student's code printed during a visible case (never a hidden one), made safe to show
    printed_more: int = 0  # characters it printed beyond those

    @property
    def passed(self) -> bool:
        return self.outcome.passed

    @property
    def output(self) -> str:
        return self.outcome.message

    @property
    def fraction(self) -> float:
        return self.outcome.fraction

    @property
    def extra(self) -> dict:
        return self.outcome.extra

    @property
    def forbidden(self) -> bool:
        return self.outcome.kind == "forbidden"

    @property
    def max_score(self) -> float:
        return self.case.points if self.counted else 0.0

    @property
    def score(self) -> float:
        return self.max_score * self.fraction if self.passed else 0.0

    def with_outcome(self, **changes) -> CaseResult:
        return replace(self, outcome=replace(self.outcome, **changes))


@dataclass
class GradeRun:
    results: list[CaseResult] = field(default_factory=list)
    hidden_not_run: int = 0
    seconds: float = 0.0
    isolation: dict = field(default_factory=dict)  # the tier and what held, for the terminal and results.json
    rubric: dict = field(default_factory=dict)  # which rubric graded (collect.Rubric.record)

    @property
    def isolation_line(self) -> str:
        held = self.isolation.get("held", {})
        parts = [f"{self.isolation.get('tier', '?')} ({self.isolation.get('guarantees', '')})"]
        if held:
            parts.append("own network namespace" if held.get("network_namespace") else "no network namespace")
            parts.append(f"seccomp {held['seccomp']}")
        return "; ".join(parts + self.isolation.get("notes", []))


def grade(
    rubric: Rubric,
    submission: Submission,
    *,
    secret: str,
    isolation: Isolation,
    component_ids: list[str] | None = None,
    visible_only: bool = False,
    expected=None,
    on_result: Callable[[CaseResult], None] = lambda r: None,
) -> GradeRun:
    """Grade `submission` under `isolation` (entered); every student process is dead when this returns.
    Expected values come from the reference modules, or from the rubric's recording in a student bundle
    (`expected`: an expected.Recorder records them while grading the reference).

    While one component is graded, the next one's worker starts (and imports torch) on the other core, as
    the other student uid at the root tier, so that sweeping what one component left running by uid never
    kills the next one's worker. It is ready before any timing case runs, so it loads nothing timed."""
    started = time.monotonic()
    run = GradeRun(isolation={**isolation.record(), "held": {}}, rubric=rubric.record)
    if expected is None:
        expected = Replay(rubric.expected) if rubric.expected else Live(Reference(rubric.solutions_dir))
    components = [rubric.component(c) for c in component_ids] if component_ids else rubric.components
    tiers = (isolation.tier, isolation.tier.alternate())
    plans = [_plan(c, [k for k in c.cases if k.visible or not visible_only], submission, rubric, tiers[i % 2])
             for i, c in enumerate(components)]
    ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-ahead")
    starting = None  # the start of the next plan's worker, on the other core
    try:
        for i, plan in enumerate(plans):
            if starting:
                starting.result()  # never two starts of one worker at once
            upcoming = next((p.slot for p in plans[i + 1:] if p.slot), None)
            starting = ahead.submit(_start_quietly, upcoming) if upcoming else None
            run.hidden_not_run += len(plan.component.cases) - len(plan.cases) + plan.component.not_here
            caveat = submission.caveats.get(plan.component.file)  # work of the student's that was not graded
            settle = starting.result if starting else (lambda: None)
            for result in _grade_component(plan, expected, secret, rubric, run.isolation["held"], settle):
                if caveat and not result.passed:
                    result = result.with_outcome(message=f"{result.output} {caveat}")
                run.results.append(result)
                on_result(result)
    finally:
        ahead.shutdown(wait=True)
        for plan in plans:
            if plan.slot:
                plan.slot.stop()
        for tier in tiers:
            reaper.sweep(tier.student_id)
    run.seconds = time.monotonic() - started
    return run


@dataclass(frozen=True)
class _Plan:
    """A component to grade: its cases, and either the worker slot to grade them in or why none is needed."""

    component: Component
    cases: list[Case]
    tier: Tier
    slot: Slot | None = None
    early: Outcome | None = None  # every case's outcome, when nothing of the student's can run
    named: list = field(default_factory=list)  # forbidden names in the component's files, run or not


def _plan(component: Component, cases: list[Case], submission: Submission, rubric: Rubric, tier: Tier) -> _Plan:
    if component.file not in submission.files:
        message = submission.problems.get(component.file, f"Not submitted: {component.file} was not found in the submission.")
        return _Plan(component, cases, tier, early=Outcome("not_submitted", message))
    tampering = scan_submission(submission.dir, component.file)
    if tampering:
        message = f"{component.file} (with the files it imports) was refused before any of it ran: " + "; ".join(tampering) + "."
        return _Plan(component, cases, tier, early=Outcome("refused", message))
    named = forbidden_names(submission.dir, component.file, component.forbidden_modules, component.forbidden_calls)
    limits = Limits(cpu_seconds=int(sum(c.timeout for c in cases)) + 60, memory_bytes=rubric.memory_mb << 20)
    slot = Slot(submission.dir, component.forbidden_modules, component.forbidden_calls, limits, tier)
    return _Plan(component, cases, tier, slot, named=named)


def _start_quietly(slot: Slot) -> None:
    """Start a worker ahead of its cases; one that fails to start is started again by its first case, which says why."""
    with contextlib.suppress(Ended):
        slot.start()


def _grade_component(plan: _Plan, expected, secret: str, rubric: Rubric, held: dict, settle: Callable[[], None]):
    if plan.early:
        yield from (CaseResult(case, plan.early) for case in plan.cases)
        return
    speed = Speed(rubric.timing, rubric.solutions_dir, plan.tier, plan.slot.limits)
    results = []
    try:
        for case in plan.cases:
            if case.check in TIMING:
                settle()  # the next worker's start, on the other core, must not load the machine while timed
            results.append(run_case(case, plan.slot, expected, secret, speed))
    finally:
        plan.slot.stop()
        speed.stop()
        reaper.sweep(plan.tier.student_id)  # what the student left running dies before the next component starts
    held.update(plan.slot.held)
    # One use of a forbidden built-in fails the whole component, also the cases that ran before it
    # and those a restarted worker (which starts with a clean record) would otherwise pass. A forbidden
    # name that no case reached costs nothing; course staff review it (report.py tells the student).
    used = next((r.outcome for r in results if r.forbidden), None)
    if used:
        yield from (replace(r, outcome=replace(used, extra=r.extra)) for r in results)
        return
    review = {"review": {"file": plan.component.file, "forbidden_names": plan.named}} if plan.named else {}
    yield from (r.with_outcome(extra={**r.extra, **review}) for r in _causes_first(results))


def _causes_first(results: list[CaseResult]) -> list[CaseResult]:
    """A failed case built on parts that fail their own cases (a TransformerBlock on its FeedForward) names those
    first: the difference may be theirs alone."""
    first_failure = {}
    for r in results:
        if not r.passed:
            first_failure.setdefault(r.case.check, r.case)
    noted = []
    for r in results:
        causes = [first_failure[c] for c in BUILDS_ON.get(r.case.check, ()) if c in first_failure]
        note = " ".join(f"This case uses your {SUBJECTS[c.check]}, which fails case {c.number}." for c in causes)
        noted.append(r.with_outcome(message=f"{note} Fix that first: the difference here may come from it alone. {r.output}")
                     if causes and r.outcome.wrong else r)
    return noted


def run_case(case: Case, student: Slot, expected, secret: str, speed: Speed) -> CaseResult:
    started = time.monotonic()
    counted = case.check not in TIMING or speed.graded
    if not counted and speed.policy.without_gpu == "skip":
        return CaseResult(case, Outcome("skipped", "Skipped: no GPU here, and timing cases are skipped without one.",
                                        extra={"device": speed.device}), counted=False)
    outcome = _outcome(student.start)  # under a start-up deadline of its own, not the case's time limit
    proxy = student.proxy(Deadline.after(case.timeout))
    if outcome.passed:
        outcome = _outcome(lambda: CHECKS[case.check](Trial(case, proxy, expected, secret, speed), **case.params))
    if not counted and outcome.passed:
        outcome = replace(outcome, message=outcome.message + " Reported only: without a GPU, timing earns no points here.")
    shown = _printable(proxy.printed.text) if case.visible else ""  # hidden inputs must not show through what code prints
    return CaseResult(case, outcome, time.monotonic() - started, counted, shown, proxy.printed.more if case.visible else 0)


def _outcome(check: Callable[[], Verdict | None]) -> Outcome:
    """Call a check: it returns (a timing verdict, or nothing), an Ended says how it ended, and anything else is
    the grader's own bug, which must not stop the run and must never pass."""
    try:
        verdict = check()
    except Ended as exc:
        return exc.outcome()
    except Exception:
        traceback.print_exc()
        return Outcome("internal", INTERNAL_ERROR)
    return Outcome("passed", verdict.message, verdict.fraction, verdict.extra) if verdict else PASSED


def _printable(text: str) -> str:
    """Student text with control and format characters escaped, so that it cannot move the cursor, erase a line
    of the grader's or turn text around in a terminal."""
    return "".join(c if c.isprintable() or c in "\n\t" else ascii(c)[1:-1] for c in text)
