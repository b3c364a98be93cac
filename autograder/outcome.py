"""How a case ended. Every way a check can end becomes one Outcome, as pytest turns every way a test ends
into one report: the check returned (passed, or a timing verdict worth part of the points), or it was ended
by an `Ended` exception, which says itself what happened, or by a bug of the grader's. Whoever caused the end
is named: the student's code (wrong, raised, crashed...) or the grader itself (infra_error), never one for the
other.

Exceptions that end a case derive from `Ended` wherever they are raised (the judge, the worker's proxy, the
process that runs it), so the runner needs one `except` for all of them and maps no types.
"""
from __future__ import annotations

from dataclasses import dataclass, field

GRADER_FAILED = "infra_error"  # the kind of every outcome the grader itself caused
INTERNAL_ERROR = "The grader itself failed on this case (an internal error, not your fault); course staff must look at it."


@dataclass(frozen=True)
class Outcome:
    # passed; wrong, raised, not_implemented, forbidden, timeout, crashed, bad_reply (the student's code);
    # not_submitted, refused (before any of it ran); skipped (a timing case without a GPU); infra_error (the grader's
    # own failure: its bug, a worker it could not start, the reference's worker failing)
    kind: str
    message: str
    fraction: float = 1.0  # a timing verdict earns part of the points
    extra: dict = field(default_factory=dict)  # a timing verdict's device, ratio and interval

    @property
    def passed(self) -> bool:
        return self.kind == "passed"

    @property
    def wrong(self) -> bool:
        """Failed on what the student's code did: a wrong answer, or an error it raised (not a missing body)."""
        return self.kind in ("wrong", "raised")


PASSED = Outcome("passed", "Passed.")


def seconds_text(x: float) -> str:
    """A time as a person reads it: "8.1 s", "10 s", "0.25 s"."""
    return (f"{x:.2g}" if x < 1 else f"{x:.1f}".removesuffix(".0")) + " s"


class Ended(Exception):
    """Ends a case. Subclasses set `kind`, and override `describe` where the message needs more than str(self)."""

    kind = "wrong"

    def describe(self) -> str:
        return str(self)

    def outcome(self) -> Outcome:
        return Outcome(self.kind, self.describe())


class GraderFailed(Ended):
    """The grader could not do its part of the case (a worker it could not start, the reference's worker failing):
    nothing is decided about the student's code, and the message is addressed to whoever runs the grader."""

    kind = GRADER_FAILED

    def describe(self) -> str:
        return (f"The grader failed on this case, not your code: {self}. No points were decided by it; "
                "course staff must fix the grader's machine and grade the submission again.")
