"""What a check function receives: one case's inputs, expected values and student."""
from __future__ import annotations

import hashlib

import numpy as np

from . import judge
from .collect import Case
from .sandbox.remote import Student


def case_seed(case: Case, secret: str) -> int:
    """Visible cases use public inputs, so students reproduce them locally; the rest use the secret."""
    key = "public" if case.visible else secret
    digest = hashlib.sha256(f"{key}/{case.component}/{case.name}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class Trial:
    def __init__(self, case: Case, student: Student, expected, secret: str, speed=None):
        self.case, self.student = case, student
        self._expected = expected.for_case(case)  # expected.Live, Recorder or Replay
        self.speed = speed  # timing.Speed: the timing policy, device and reference worker
        self.seed = case_seed(case, secret)
        self.rng = np.random.default_rng(self.seed)
        self.visible = case.visible

    def expect(self, compute):
        """`compute(ref)` on the reference modules: every expected value, and every use of a reference
        object, goes through here (a student bundle replays what it returned)."""
        return self._expected.expect(self.rng, compute)

    def close(self, got, want, what: str, hints: judge.Hints | None = None) -> None:
        """Floats: numbers, arrays or tensors, within the case's tolerances."""
        tol = {"rtol": self.case.rtol, "atol": self.case.atol, "visible": self.visible, "hints": self._expected.hints(self.rng, hints)}
        if isinstance(want, (float, int)):
            judge.expect_number(got, want, what, **tol)
        else:
            judge.expect_array(got, want, what, **tol)

    def equal(self, got, want, what: str, hints: judge.Hints | None = None) -> None:
        judge.expect_equal(got, want, what, visible=self.visible, hints=self._expected.hints(self.rng, hints))

    def fail(self, message: str) -> None:
        raise judge.CaseFailed(message)
