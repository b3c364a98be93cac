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
from dataclasses import dataclass, field
from pathlib import Path

from .cases import CHECKS
from .collect import Case, Component, Rubric
from .forbidden import scan_forbidden
from .judge import CaseFailed
from .reference import Reference
from .sandbox.process import CallTimeout, Limits, StudentRaised, WorkerFailure
from .sandbox.remote import ForbiddenUsed, Student
from .submission import Submission
from .trial import Trial

TIER = "same user, resource limits, separate process"  # the hardened tiers come with the sandbox work


@dataclass
class CaseResult:
    case: Case
    passed: bool
    output: str
    seconds: float = 0.0
    forbidden: bool = False  # failed for using a forbidden built-in

    @property
    def score(self) -> float:
        return self.case.points if self.passed else 0.0


@dataclass
class GradeRun:
    results: list[CaseResult] = field(default_factory=list)
    hidden_not_run: int = 0
    seconds: float = 0.0
    tier: str = TIER


def grade(
    rubric: Rubric,
    submission: Submission,
    *,
    secret: str,
    component_ids: list[str] | None = None,
    visible_only: bool = False,
    on_result: Callable[[CaseResult], None] = lambda r: None,
) -> GradeRun:
    started = time.monotonic()
    run = GradeRun()
    reference = Reference(rubric.solutions_dir)
    components = [rubric.component(c) for c in component_ids] if component_ids else rubric.components
    for component in components:
        cases = [c for c in component.cases if c.visible or not visible_only]
        run.hidden_not_run += len(component.cases) - len(cases)
        for result in _grade_component(component, cases, submission, reference, secret, rubric.memory_mb):
            run.results.append(result)
            on_result(result)
    run.seconds = time.monotonic() - started
    return run


def _grade_component(component: Component, cases: list[Case], submission: Submission, reference: Reference, secret: str, memory_mb: int):
    if component.file not in submission.files:
        message = f"Not submitted: {component.file} was not found in the submission."
        yield from (CaseResult(case, False, message) for case in cases)
        return
    violations = scan_forbidden(submission.dir / component.file, component.forbidden_modules, component.forbidden_calls)
    if violations:
        message = f"{component.file} uses what this component forbids: " + "; ".join(violations) + "."
        yield from (CaseResult(case, False, message) for case in cases)
        return
    limits = Limits(cpu_seconds=int(sum(c.timeout for c in cases)) + 60, memory_bytes=memory_mb << 20)
    student = Student(submission.dir, component.forbidden_modules, component.forbidden_calls, limits)
    try:
        results = [run_case(case, student, reference, secret) for case in cases]
    finally:
        student.stop()
    # One use of a forbidden built-in fails the whole component, also the cases that ran before it
    # and those a restarted worker (which starts with a clean record) would otherwise pass.
    used = next((r.output for r in results if r.forbidden), None)
    yield from (CaseResult(r.case, False, used, r.seconds, True) if used else r for r in results)


def run_case(case: Case, student: Student, reference: Reference, secret: str) -> CaseResult:
    started = time.monotonic()
    forbidden = False
    try:
        student.deadline = None
        student.start()
        student.deadline = time.monotonic() + case.timeout
        CHECKS[case.check](Trial(case, student, reference, secret), **case.params)
        passed, output = True, "Passed."
    except CaseFailed as exc:
        passed, output = False, str(exc)
    except StudentRaised as exc:
        passed, output = False, _describe_raise(exc)
    except ForbiddenUsed as exc:
        passed, output, forbidden = False, f"Uses what this component forbids: {exc}.", True
    except CallTimeout:
        passed, output = False, f"Timed out: the case did not finish within {case.timeout:g} s (an infinite loop, or far too slow)."
    except WorkerFailure as exc:
        passed, output = False, f"Your code crashed the process running it: {exc}."
    except Exception:  # a bug in a check must not stop the run, and must never pass
        traceback.print_exc()
        passed, output = False, "The grader itself failed on this case (an internal error, not your fault); course staff must look at it."
    finally:
        student.deadline = None
    return CaseResult(case, passed, output, time.monotonic() - started, forbidden)


def _describe_raise(exc: StudentRaised) -> str:
    if exc.type_name == "NotImplementedError":
        return f"Not implemented yet ({exc.message or 'NotImplementedError'})."
    where = "".join(f"\n  at {frame}" for frame in exc.frames)
    return f"Your code raised {exc.type_name}: {exc.message}{where}"
