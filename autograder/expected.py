"""Expected values: where a check's `t.expect` and its hints get them.

Both are lambdas given `ref`, the staff side: the reference solutions (`ref.lstm`) and the grader-only
oracles and mistake simulators (`ref.oracles.lstm`). Grading computes them with it (`Live`). A student
bundle holds neither, so `autograder release --out` runs the visible cases once with the reference
solutions as the student (`Recorder`) and ships what each `t.expect` and each hint returned; the
bundle's checks replay it (`Replay`).

Only data is recorded (the wire format: no pickle, no code). A reference object (a module, a fitted
model) replays as a `Ghost`, which a check may only hand on to later `t.expect` calls: a replay never
runs them. Hints are recorded evaluated, since the reference never fails a comparison, and the case's
RNG is restored after every call, so the inputs a check draws next are the ones it drew when recorded.
A replay that is asked for something the recording does not hold (a student's earlier outputs steered
the check elsewhere) fails the case and says so.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
import types
from pathlib import Path

import numpy as np

from .judge import CaseFailed
from .rounding import Rounded
from .sandbox.worker import wire
from .tensors import deferred, is_tensor

torch = deferred("torch")


class Ghost:
    """A reference object in a replay: only later `t.expect` lambdas, which a replay never runs, may hold it."""

    def __getattr__(self, name):
        raise TypeError(f"a check used a reference object (.{name}) outside t.expect; only data replays in a student bundle")

    def __call__(self, *args, **kwargs):
        raise TypeError("a check called a reference object outside t.expect; only data replays in a student bundle")


class Diverged(CaseFailed):
    """The check asked a replay for a value it did not record."""


DIVERGED = ("This case cannot be checked further on your machine: your earlier outputs led it to ask for expected "
            "values that were recorded only for the reference's outputs. Fix the differences reported by the other "
            "cases first; the grader, which has the reference, runs this case in full.")


# The reference runs in the grader's process, which has one torch RNG and one thread count for every lane
# (runner.py): one reference computation at a time, so that a seeded one draws what it drew alone.
REFERENCE = threading.RLock()


def _on_reference(compute, reference):
    with REFERENCE:
        return compute(reference)


class Live:
    """Grading: the reference modules, in this process."""

    def __init__(self, reference):
        self.reference = reference

    def for_case(self, case) -> Live:
        return self

    def expect(self, rng: np.random.Generator, compute):
        return _on_reference(compute, self.reference)

    def hints(self, rng: np.random.Generator, hints: dict | None) -> dict | None:
        """The judge's hints: each `hint(ref)` bound to the reference, computed only if a comparison fails."""
        return {name: functools.partial(_on_reference, hint, self.reference) for name, hint in (hints or {}).items()}


class Recorder:
    """Runs the reference like `Live` and keeps, per case, what each top-level `t.expect` returned and
    what each hint evaluated to."""

    def __init__(self, reference):
        self.reference = reference
        self.cases: dict[str, list] = {}
        self.blobs: list[bytes] = []

    def for_case(self, case) -> _CaseRecorder:
        return _CaseRecorder(self, self.cases.setdefault(case_key(case), []))

    def save(self, path: Path) -> None:
        path.write_bytes(wire.pack({"cases": self.cases}, self.blobs))


class _CaseRecorder:
    def __init__(self, recorder: Recorder, entries: list):
        self.recorder, self.entries, self.depth = recorder, entries, 0

    def expect(self, rng: np.random.Generator, compute):
        with REFERENCE:  # also keeps the recording's blobs in order
            if self.depth:  # inside another expect or a hint: replay never runs this
                return compute(self.recorder.reference)
            self.depth += 1
            try:
                value = compute(self.recorder.reference)
            finally:
                self.depth -= 1
            self.entries.append({"expect": fingerprint(compute), "value": self._data(value), "rng": self._data(rng.bit_generator.state)})
            return value

    def hints(self, rng: np.random.Generator, hints: dict | None) -> dict | None:
        if not hints:
            return hints
        state = rng.bit_generator.state
        with REFERENCE:
            self.depth += 1
            try:
                values = [[name, self._data(_evaluate(functools.partial(hint, self.recorder.reference)))] for name, hint in hints.items()]
            finally:
                self.depth -= 1
                rng.bit_generator.state = state  # live grading evaluates hints only after a failure
            self.entries.append({"hints": values})
        return hints

    def _data(self, value):
        """`value` in the wire format, its arrays in the recording's blobs; None when it holds something
        that is not data (a Ghost on replay)."""
        blobs = self.recorder.blobs
        kept = len(blobs)
        try:
            return {"data": wire.encode(_tagged(value), blobs)}
        except wire.WireError:
            del blobs[kept:]
            return None


class Replay:
    """A student bundle: the values a `Recorder` saved."""

    def __init__(self, path: Path):
        with open(path, "rb") as f:
            header, self.blobs = wire.read_frame(f.fileno())
        self.cases: dict[str, list] = header["cases"]

    def for_case(self, case) -> _CaseReplay:
        return _CaseReplay(self, iter(self.cases.get(case_key(case), ())))

    def value(self, recorded):
        return Ghost() if recorded is None else _untagged(wire.decode(recorded["data"], self.blobs))


class _CaseReplay:
    def __init__(self, replay: Replay, entries):
        self.replay, self.entries = replay, entries

    def expect(self, rng: np.random.Generator, compute):
        entry = next(self.entries, {})
        if entry.get("expect") != fingerprint(compute):
            raise Diverged(DIVERGED)
        rng.bit_generator.state = self.replay.value(entry["rng"])
        return self.replay.value(entry["value"])

    def hints(self, rng: np.random.Generator, hints: dict | None) -> dict | None:
        if not hints:
            return hints
        entry = next(self.entries, {})
        if [name for name, _ in entry.get("hints", ())] != list(hints):
            raise Diverged(DIVERGED)
        return {name: (lambda v=self.replay.value(value): v) for name, value in entry["hints"] if value is not None}


ROUNDED = "__rounded__"  # a Rounded value travels as {ROUNDED: [truth, dtype, bound]}, a dict of plain data


def _tagged(value):
    if isinstance(value, Rounded):
        return {ROUNDED: [value.truth, value.dtype, value.bound]}
    if type(value) in (tuple, list):
        return type(value)(_tagged(v) for v in value)
    if type(value) is dict:
        return {k: _tagged(v) for k, v in value.items()}
    return value


def _untagged(value):
    if type(value) is dict and list(value) == [ROUNDED]:
        return Rounded(*value[ROUNDED])
    if type(value) in (tuple, list):
        return type(value)(_untagged(v) for v in value)
    if type(value) is dict:
        return {k: _untagged(v) for k, v in value.items()}
    return value


def case_key(case) -> str:
    return f"{case.component}/{case.name}"


def fingerprint(compute) -> str:
    """Which `t.expect` call this is: its code, and the exact parts of what it closes over (integers,
    strings, shapes, dtypes, integer arrays). Floats are left out: a correct student's float outputs may
    differ from the reference's in the last bits and still pass."""
    parts = [compute.__code__.co_qualname, compute.__code__.co_firstlineno]
    for cell in compute.__closure__ or ():
        try:
            parts.append(_exact(cell.cell_contents))
        except ValueError:  # an empty cell
            parts.append(None)
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def _exact(value, depth: int = 0):
    if depth > 4:
        return "..."
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return "float"
    if type(value) in (list, tuple):
        return [_exact(v, depth + 1) for v in value]
    if type(value) is dict:
        return [[_exact(k, depth + 1), _exact(v, depth + 1)] for k, v in value.items()]
    if type(value) in (set, frozenset):
        return sorted(str(_exact(v, depth + 1)) for v in value)
    if type(value) is np.ndarray or is_tensor(value, subclasses=True) or isinstance(value, np.generic):
        array = value.detach().cpu().numpy() if is_tensor(value, subclasses=True) else np.asarray(value)
        exact = array.dtype.kind in "biu" and array.size <= 4096
        return [str(array.dtype), list(array.shape), array.tolist() if exact else None]
    if isinstance(value, types.FunctionType):
        return value.__code__.co_qualname
    return "object"  # a reference object (a Ghost on replay), a student's proxy, the trial


def _evaluate(hint):
    try:
        return hint()
    except Exception:  # a hint that cannot be computed for these inputs never matches, live or replayed
        return None

