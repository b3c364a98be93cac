"""What a check function receives: one case's inputs, expected values and student."""
from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable

import numpy as np

from . import judge
from .rubric import Case
from .rounding import Rounded
from .sandbox.host.proxy import Proxy

Hints = dict[str, Callable]  # a likely mistake -> lambda ref: the wrong answer it gives (ref.oracles computes it)


def case_seed(case: Case, secret: str) -> int:
    """Visible cases use public inputs, so students reproduce them locally; the rest use the secret."""
    key = "public" if case.visible else secret
    digest = hashlib.sha256(f"{key}/{case.component}/{case.name}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class Trial:
    def __init__(self, case: Case, student: Proxy, expected, secret: str, speed=None):
        self.case, self.student = case, student
        self._expected = expected.for_case(case)  # expected.Live, Recorder or Replay
        self.speed = speed  # timing.Speed: the timing policy, device and reference worker
        self.seed = case_seed(case, secret)
        self.rng = np.random.default_rng(self.seed)
        self.visible = case.visible
        # Comparisons begun and passed: a case that failed in one (not by a check's own t.fail) may be explained by a
        # mutant of the reference, whose run again must pass as many and that one too (mutants/match.py).
        self.compared = self.judged = 0

    def expect(self, compute):
        """`compute(ref)` on the reference modules: every expected value, and every use of a reference
        object, goes through here (a student bundle replays what it returned)."""
        return self._expected.expect(self.rng, compute)

    def close(self, got, want, what: str, hints: Hints | None = None, labels: list[str] | None = None,
              dims: judge.Sizes | None = None, nonfinite: str | None = None) -> None:
        """Floats: numbers, arrays or tensors, within the case's rtol and atol, or within the error model's
        bound when `want` is a low-precision case's Rounded value (rounding.rounded). `hints` map a likely
        mistake to `lambda ref: <its wrong answer>`, offered when it explains every element of `got`. `labels`
        name the entries of a 1-D array, for values a check gathered from several calls (see `numbers`).
        `dims` name the sizes of the inputs ({"B, the batch size": 4}), so that a wrong answer that is one of
        them times the expected one is named; `nonfinite` says what makes this component's values NaN or Inf
        (judge.expect_array)."""
        with self._comparison():
            tol = {"rtol": self.case.rtol, "atol": self.case.atol, "visible": self.visible,
                   "hints": self._expected.hints(self.rng, hints), "dims": dims, "nonfinite": nonfinite}
            if isinstance(want.truth if isinstance(want, Rounded) else want, (float, int)):
                judge.expect_number(got, want, what, **tol)
            else:
                judge.expect_array(got, want, what, labels=labels, **tol)

    @contextlib.contextmanager
    def _comparison(self):
        """One comparison: counted as begun, and as passed when it returns."""
        self.compared += 1
        yield
        self.judged += 1

    def part(self, name: str, got, want, what: str, **options) -> tuple[str, Callable[[], None]]:
        """A comparison `close` makes (`options`: its hints, labels, dims, nonfinite), kept for `close_each` to judge
        with the others; `name` is what close_each's sentence calls it ("dW")."""
        return name, functools.partial(self.close, got, want, what, **options)

    def close_each(self, of: str, parts: list[tuple[str, Callable[[], None]]]) -> None:
        """Several outputs of one call (`part`s, or a name and any comparison that raises CaseFailed) judged as one:
        the first failing part's message, then which parts match and which do not (judge.expect_each). `of` names them
        all ("the gradients"); the parts are compared in the order given."""
        judge.expect_each(parts, of)

    def numbers(self, values: list, labels: list[str]) -> np.ndarray:
        """The student's answers to several calls as one float64 array, each checked to be a real number
        first, so that `close` judges them (and any hint) all at once."""
        return np.array([judge.as_number(v, label) for v, label in zip(values, labels)], dtype=np.float64)

    def unchanged(self, got, original, what: str) -> None:
        """An input the student's code was given, fetched back afterwards: it must be exactly as it was."""
        with self._comparison():
            judge.expect_identical(got, original, what)

    def equal(self, got, want, what: str, hints: Hints | None = None) -> None:
        with self._comparison():
            judge.expect_equal(got, want, what, visible=self.visible, hints=self._expected.hints(self.rng, hints))

    def fail(self, message: str) -> None:
        raise judge.CaseFailed(message)
