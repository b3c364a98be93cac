"""Check functions, registered by id (`component.name`) for grading.yaml to cite.

A check receives a `Trial` and the case's `params`; it returns normally when
the student's answer is right and raises `CaseFailed` with feedback when not.
"""
from __future__ import annotations

from collections.abc import Callable

CHECKS: dict[str, Callable] = {}
TIMING: set[str] = set()  # checks that time the student (timing.py), which the policy may skip without a GPU


def check(check_id: str, timing: bool = False):
    def register(fn: Callable) -> Callable:
        if check_id in CHECKS:
            raise ValueError(f"check {check_id!r} is registered twice")
        CHECKS[check_id] = fn
        if timing:
            TIMING.add(check_id)
        return fn

    return register


from . import attention, backprop, causal_mask, generation, lstm, ngram, rnn, speed, transformer  # noqa: E402,F401  (registers the checks)
