"""How a case ended. Every way a check can end becomes one Outcome, as pytest turns every way a test ends
into one report: the check returned (passed, or a timing verdict worth part of the points), or it was ended
by an `Ended` exception, which says itself what happened, or by a bug of the grader's.

Exceptions that end a case derive from `Ended` wherever they are raised (the judge, the worker's proxy, the
process that runs it), so the runner needs one `except` for all of them and maps no types.
"""
from __future__ import annotations

from dataclasses import dataclass, field

INTERNAL_ERROR = "The grader itself failed on this case (an internal error, not your fault); course staff must look at it."


@dataclass(frozen=True)
class Outcome:
    # passed; wrong, raised, not_implemented, forbidden, timeout, crashed, bad_reply (the student's code);
    # not_submitted, refused (before any of it ran); skipped (a timing case without a GPU); internal (the grader's bug)
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


class Ended(Exception):
    """Ends a case. Subclasses set `kind`, and override `describe` where the message needs more than str(self)."""

    kind = "wrong"

    def describe(self) -> str:
        return str(self)

    def outcome(self) -> Outcome:
        return Outcome(self.kind, self.describe())
