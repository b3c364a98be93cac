"""Running: drive each component's cases through a worker, one case at a time.

Each component gets its own worker, started before its first case so start-up
time is not charged to the case; a case that kills or hangs its worker fails,
and the next case gets a fresh one. Whatever goes wrong, every case ends with a
result: a case passes only when its check returned normally.
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .cases import BUILDS_ON, CHECKS, SUBJECTS, TIMING
from .rubric import Case, Component, Rubric
from .expected import Live, Replay
from .forbidden import forbidden_names, scan_submission
from .judge import CaseFailed
from .reference import Reference
from .sandbox.host import reaper
from .sandbox.host.process import BadReply, CallTimeout, Limits, StudentRaised, WorkerFailure
from .sandbox.host.proxy import ForbiddenUsed, Printed, Student
from .sandbox.host.tiers import Tier, choose_tier, grader_files, hide
from .submission import Submission
from .timing import Partial, Speed
from .trial import Trial


INTERNAL_ERROR = "The grader itself failed on this case (an internal error, not your fault); course staff must look at it."


@dataclass
class CaseResult:
    case: Case
    passed: bool
    output: str
    seconds: float = 0.0
    forbidden: bool = False  # failed for using a forbidden built-in
    fraction: float = 1.0  # a timing verdict earns part of the points
    counted: bool = True  # False: reported only (a timing case without a GPU under `inform` or `skip`)
    extra: dict = field(default_factory=dict)  # a timing verdict's device, ratio and interval
    wrong: bool = False  # failed on what the student's code did: a wrong answer, or an error it raised
    printed: str = ""  # what the student's code printed during a visible case (never a hidden one), made safe to show
    printed_more: int = 0  # characters it printed beyond those

    @property
    def max_score(self) -> float:
        return self.case.points if self.counted else 0.0

    @property
    def score(self) -> float:
        return self.max_score * self.fraction if self.passed else 0.0


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
    component_ids: list[str] | None = None,
    visible_only: bool = False,
    tier: Tier | None = None,
    expected=None,
    on_result: Callable[[CaseResult], None] = lambda r: None,
) -> GradeRun:
    """Grade `submission`; every student process is dead when this returns. Without a tier, the strongest one here.
    Expected values come from the reference modules, or from the rubric's recording in a student bundle
    (`expected`: an expected.Recorder records them while grading the reference)."""
    started = time.monotonic()
    tier = tier or choose_tier(grader_files(rubric.path.parent, rubric.solutions_dir, []))
    run = GradeRun(isolation={**tier.record(), "held": {}}, rubric=rubric.record)
    run.isolation["notes"] += reaper.harden_parent()
    if tier.name == "root":
        hide(tier.hidden)
    if expected is None:
        expected = Replay(rubric.expected) if rubric.expected else Live(Reference(rubric.solutions_dir))
    components = [rubric.component(c) for c in component_ids] if component_ids else rubric.components
    try:
        for component in components:
            cases = [c for c in component.cases if c.visible or not visible_only]
            run.hidden_not_run += len(component.cases) - len(cases) + component.not_here
            caveat = submission.caveats.get(component.file)  # work of the student's that was not graded
            for result in _grade_component(component, cases, submission, expected, secret, rubric, tier, run.isolation["held"]):
                if caveat and not result.passed:
                    result = replace(result, output=f"{result.output} {caveat}")
                run.results.append(result)
                on_result(result)
    finally:
        reaper.sweep(tier.student_id)
    run.seconds = time.monotonic() - started
    return run


def _grade_component(component: Component, cases: list[Case], submission: Submission, expected, secret: str, rubric: Rubric,
                     tier: Tier, held: dict):
    if component.file not in submission.files:
        message = submission.problems.get(component.file, f"Not submitted: {component.file} was not found in the submission.")
        yield from (CaseResult(case, False, message) for case in cases)
        return
    tampering = scan_submission(submission.dir, component.file)
    if tampering:
        message = f"{component.file} (with the files it imports) was refused before any of it ran: " + "; ".join(tampering) + "."
        yield from (CaseResult(case, False, message) for case in cases)
        return
    named = forbidden_names(submission.dir, component.file, component.forbidden_modules, component.forbidden_calls)
    limits = Limits(cpu_seconds=int(sum(c.timeout for c in cases)) + 60, memory_bytes=rubric.memory_mb << 20)
    student = Student(submission.dir, component.forbidden_modules, component.forbidden_calls, limits, tier)
    speed = Speed(rubric.timing, rubric.solutions_dir, tier, limits)
    try:
        results = [run_case(case, student, expected, secret, speed) for case in cases]
    finally:
        student.stop()
        speed.stop()
        reaper.sweep(tier.student_id)  # what the student left running dies before the next component starts
    held.update(student.held)
    # One use of a forbidden built-in fails the whole component, also the cases that ran before it
    # and those a restarted worker (which starts with a clean record) would otherwise pass. A forbidden
    # name that no case reached costs nothing; course staff review it (report.py tells the student).
    used = next((r.output for r in results if r.forbidden), None)
    if used:
        yield from (replace(r, passed=False, output=used, forbidden=True) for r in results)
        return
    review = {"review": {"file": component.file, "forbidden_names": named}} if named else {}
    yield from (replace(r, extra={**r.extra, **review}) for r in _causes_first(results))


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
        noted.append(replace(r, output=f"{note} Fix that first: the difference here may come from it alone. {r.output}")
                     if causes and r.wrong else r)
    return noted


def run_case(case: Case, student: Student, expected, secret: str, speed: Speed) -> CaseResult:
    started = time.monotonic()
    forbidden, fraction, extra, wrong = False, 1.0, {}, False
    timed = case.check in TIMING
    counted = not timed or speed.graded
    if timed and not speed.graded and speed.policy.without_gpu == "skip":
        return CaseResult(case, False, "Skipped: no GPU here, and timing cases are skipped without one.", counted=False,
                          extra={"device": speed.device})
    printed = student.printed = Printed()
    try:
        student.deadline = None
        student.start()
        student.deadline = time.monotonic() + case.timeout
        CHECKS[case.check](Trial(case, student, expected, secret, speed), **case.params)
        passed, output = True, "Passed."
    except Partial as exc:
        passed, output, fraction, extra = True, str(exc), exc.verdict.fraction, exc.verdict.extra
        if not counted:
            output += " Reported only: without a GPU, timing earns no points here."
    except CaseFailed as exc:
        passed, output, wrong = False, str(exc), True
    except StudentRaised as exc:
        passed, output, wrong = False, _describe_raise(exc), exc.type_name != "NotImplementedError"
    except ForbiddenUsed as exc:
        passed, output, forbidden = False, f"Uses what this component forbids: {exc}.", True
    except CallTimeout:
        passed, output = False, f"Timed out: the case did not finish within {case.timeout:g} s (an infinite loop, or far too slow)."
    except BadReply as exc:
        passed, output = False, f"Your code sent back something the grader cannot accept: {exc}."
    except WorkerFailure as exc:
        passed, output = False, f"Your code crashed the process running it: {exc}."
    except Exception:  # a bug in a check must not stop the run, and must never pass
        traceback.print_exc()
        passed, output = False, INTERNAL_ERROR
    finally:
        student.deadline = None
    shown = _printable(printed.text) if case.visible else ""  # hidden inputs must not show through what they make code print
    return CaseResult(case, passed, output, time.monotonic() - started, forbidden, fraction, counted, extra, wrong,
                      shown, printed.more if case.visible else 0)


def _printable(text: str) -> str:
    """Student text with control and format characters escaped, so that it cannot move the cursor, erase a line
    of the grader's or turn text around in a terminal."""
    return "".join(c if c.isprintable() or c in "\n\t" else ascii(c)[1:-1] for c in text)


def _describe_raise(exc: StudentRaised) -> str:
    if exc.type_name == "NotImplementedError":
        return f"Not implemented yet ({exc.message or 'NotImplementedError'})."
    where = "".join(f"\n  at {frame}" for frame in exc.frames)
    return f"Your code raised {exc.type_name}: {exc.message}{where}"
