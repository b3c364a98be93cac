"""What check functions hold instead of student objects.

`student.ngram.NGramLM(2).fit(corpus).prob("corn", ["cows", "eat"])` reads
like local code, but every call is a request to the worker: arguments go over
as plain data, plain results come back rebuilt by the parent, and anything
else stays in the worker behind a `Remote` handle.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import signal
from pathlib import Path
from typing import Protocol

from ...outcome import Ended, GraderFailed
from . import reaper
from ..worker import wire
from .process import PRELOAD, BadReply, CallTimeout, Deadline, Forbidden, Limits, StudentRaised, Worker, WorkerFailure, WorkerWontStart
from .template import Template
from .tiers import Tier


class ForbiddenUsed(Ended):
    """The submission used something its component forbids."""

    kind = "forbidden"

    def describe(self) -> str:
        return f"Uses what this component forbids: {self}."


class RefusedAtRunTime(Ended):
    """The worker's audit hook refused what the submission's code did, however it got there (sandbox/worker/audit.py):
    the run-time counterpart of the tamper scan's refusal. `then`: what the code raised after, if it did."""

    kind = "refused"

    def __init__(self, refusals: str, then: str = ""):
        super().__init__(refusals)
        self.then = then

    def describe(self) -> str:
        return (f"Refused at run time: {self}. That reaches into the grader's process, which submissions may not do "
                "(caught or not, the case fails)." + (f" Your code then raised {self.then}" if self.then else ""))


class Printed:
    """What the student's code printed (through Python's sys.stdout and sys.stderr) during one case, as its worker
    reported it with each reply: untrusted text, so checked and bounded here."""

    LIMIT = 2000  # characters kept per case; the rest is counted

    def __init__(self):
        self.text, self.more = "", 0

    def add(self, text, more) -> None:
        if type(text) is not str or type(more) is not int or more < 0:
            raise BadReply("the worker sent a malformed reply (what was printed is not text and a count)")
        room = self.LIMIT - len(self.text)
        self.text += text[:room]
        self.more += more + max(0, len(text) - room)


class Remote:
    """A student object (or a path to one) living in the worker."""

    __slots__ = ("_student", "_expr")

    def __init__(self, student: Proxy, expr: wire.Expr):
        self._student, self._expr = student, expr

    def __getattr__(self, name: str) -> Remote:
        if name.startswith("__"):
            raise AttributeError(name)
        return Remote(self._student, wire.Expr(self._expr.base, self._expr.attrs + (name,)))

    def __call__(self, *args, **kwargs):
        return self._student.call(self, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<remote {self._expr.describe()}>"


class Slot:
    """One worker at a time for a submission (or for the reference's solutions: `staff`): started on first use,
    replaced after it fails. Checks reach it through a Proxy, one per case. A worker that fails to start
    START_TRIES times is not tried again: each later case ends at once with the same grader's failure."""

    START_TRIES = 2

    def __init__(self, submission_dir: Path, forbidden: Forbidden, limits: Limits, tier: Tier, imports: tuple[str, ...] = PRELOAD,
                 template: Template | None = None, staff: bool = False):
        self.submission_dir, self.forbidden, self.limits, self.tier, self.imports = submission_dir, forbidden, limits, tier, imports
        self.template = template
        self.staff = staff  # runs staff code only: whatever goes wrong in it is the grader's failure
        self.worker: Worker | None = None
        self.held: dict = {}  # what the last worker reported of its walls before student code ran
        self.failed_starts: list[WorkerWontStart] = []

    def proxy(self, deadline: Deadline, validator: Validator | None = None) -> Proxy:
        return Proxy(self, deadline, validator)

    def start(self) -> None:
        if self.worker is not None:
            return
        if len(self.failed_starts) >= self.START_TRIES:
            raise self.failed_starts[-1]
        try:
            self.worker = Worker(self.submission_dir, self.forbidden, self.limits, self.tier, self.imports, self.template)
        except WorkerWontStart as exc:
            self.failed_starts.append(exc)
            raise
        self.held = self.worker.held

    def stop(self) -> None:
        """End the worker, if one runs; the next use starts another, tried again however often starts failed before."""
        self.failed_starts.clear()
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def interrupt(self) -> None:
        """Kill the worker from another thread (grading was interrupted): its pending request ends as WorkerDied."""
        worker = self.worker
        if worker is not None:
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()

    def exchange(self, header: dict, blobs: list[bytes], deadline: Deadline) -> tuple[dict, list[bytes]]:
        self.start()
        try:
            return self.worker.exchange(header, blobs, deadline)
        except WorkerFailure:
            self.stop()
            raise

    @contextlib.contextmanager
    def held_still(self):
        """While the reference is timed: the student's worker stopped, whatever it left running killed."""
        self.start()
        with self.paused():
            yield

    @contextlib.contextmanager
    def paused(self):
        """Whatever runs of this slot's worker (if one is started) stopped, and what it left running killed, while
        something else is timed."""
        worker = self.worker if self.tier.walled else None  # the portable tier stops nothing: it has no /proc to look in
        try:
            pid = reaper.still(worker.process.pid, worker.process.depth) if worker else None
        except ProcessLookupError:  # it died meanwhile: nothing of it runs
            pid = None
        try:
            yield
        finally:
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)


class Validator(Protocol):
    """Checks what a call returned before any check sees it (returns.Boundary), and raises the case's end when a value
    is not what the student API declares."""

    def each(self, fn: wire.Expr, args: list | None, kwargs: dict | None, results: list) -> None:
        """`fn` called with `args` and `kwargs` returned each of `results` (one call made as many times as there are
        results); args and kwargs None: `fn` is an attribute, fetched, and `results` its value."""


class Proxy:
    """The submission as one case reaches it: every request runs under the case's deadline, and what its code
    prints is collected in `printed`. With a `validator`, each value a call returns is checked by it first, with the
    arguments as the parent knows them: a value placed in the worker (`put`) is given as that value."""

    def __init__(self, slot: Slot, deadline: Deadline, validator: Validator | None = None):
        self._slot, self.deadline, self.printed = slot, deadline, Printed()
        self._validator = validator
        self._placed: dict[int, object] = {}  # handle -> the value `put` placed there
        self._kept: dict[int, tuple] = {}  # handle -> the call whose result the worker keeps there, checked once fetched
        self.set_back: list[str] = []  # global settings the student's code changed, which its worker set back
        self._first = True  # the case's first request: the worker's random states start afresh for it

    def __getattr__(self, module: str) -> Remote:
        if module.startswith("_"):
            raise AttributeError(module)
        return Remote(self, wire.Expr(module))

    # ---- requests ----------------------------------------------------------

    def call(self, fn: Remote, *args, keep: bool = False, **kwargs):
        """Call a student function; `keep=True` leaves the result in the worker (checked when `value` fetches it)."""
        result = self._request("call", [fn._expr, list(args), kwargs], keep)
        if keep and self._validator:
            self._kept[_handle(result)] = (fn._expr, list(args), kwargs)
        elif self._validator:
            self._validate(fn._expr, list(args), kwargs, result)
        return result

    def map(self, fn: Remote, calls: list[tuple[list, dict]]) -> list:
        """fn on each (args, kwargs) in one request, the results as `call` would return each: a check that draws
        thousands of samples pays one round trip, not thousands."""
        runs = [list(run) for _, run in itertools.groupby(calls, key=id)]  # one call object repeated ([call] * draws): sent once
        results = self._request("map", [fn._expr, [[list(run[0][0]), run[0][1], len(run)] for run in runs]], False, len(calls))
        if self._validator:  # each call object once, with all that it returned
            done = 0
            for run in runs:
                args, kwargs = run[0]
                self._validate(fn._expr, list(args), kwargs, *results[done:done + len(run)])
                done += len(run)
        return results

    def value(self, obj: Remote):
        """Fetch a student attribute or kept object as plain data."""
        result = self._request("get", [obj._expr], False)
        if self._validator:  # a kept result is checked as the call that made it
            self._validate(*self._kept.get(_handle(obj), (obj._expr, None, None)), result)
        return result

    def put(self, value) -> Remote:
        """Place a value in the worker, to see later whether student code changed it."""
        placed = self._request("put", [value], True)
        if self._validator:
            self._placed[_handle(placed)] = value
        return placed

    def _validate(self, fn: wire.Expr, args: list | None, kwargs: dict | None, *results) -> None:
        known = lambda v: self._placed.get(_handle(v), v)  # noqa: E731
        if args is not None:
            args, kwargs = [known(a) for a in args], {k: known(v) for k, v in kwargs.items()}
        self._validator.each(fn, args, kwargs, list(results))

    def repeat(self, fn: Remote, calls: list[list], backward: bool = False) -> dict:
        """Timing: fn on each argument list, outputs reduced to checksums in the worker: {"checksums", "peak_bytes"}."""
        return self._request("repeat", [fn._expr, calls, backward], False)

    def held_still(self):
        """While the reference is timed: this worker stopped, whatever it left running killed."""
        return self._slot.held_still()

    def drop(self, objects: list) -> None:
        """Let the worker free kept objects (Remote handles) the checks are done with."""
        ids = [r._expr.base.id for r in objects if isinstance(r, Remote) and isinstance(r._expr.base, wire.Handle) and not r._expr.attrs]
        self._request("drop", [ids], False)

    def flush(self) -> None:
        """Evict the GPU's L2 cache (nothing on a CPU)."""
        self._request("flush", [], False)

    def numpy_rng(self, seed: int) -> wire.Make:
        """A numpy Generator built in the worker (an RNG cannot travel as data)."""
        return wire.Make("numpy_rng", seed)

    def torch_generator(self, seed: int) -> wire.Make:
        return wire.Make("torch_generator", seed)

    def spy(self, dotted: str) -> Remote:
        """Record what student code passes to the function at `dotted`; read it back from `.calls`."""
        return self.put(wire.Make("spy", dotted))

    def _request(self, op: str, args: list, keep: bool, results: int | None = None):
        """`results`: the number of values a list reply must hold (a map's, one per call)."""
        try:
            result = self._answer(op, args, keep, results)
        except (CallTimeout, GraderFailed):  # a timeout is the case's, whoever's call ran out its time
            raise
        except Ended as exc:
            if self._slot.staff:  # staff code that raised, died or sent nonsense: nothing the student did
                raise GraderFailed(f"the reference's worker failed ({exc})") from None
            raise
        if isinstance(result, wire.Handle):
            return Remote(self, wire.Expr(result))
        return result

    def _answer(self, op: str, args: list, keep: bool, results: int | None):
        blobs: list[bytes] = []
        header = {"op": op, "args": wire.encode(_exprs(args), blobs), "keep": keep, "first": self._first}
        self._first = False
        reply, reply_blobs = self._slot.exchange(header, blobs, self.deadline)
        try:
            value = self._unpack(reply, reply_blobs)
            if results is not None and (type(value) is not list or len(value) != results):
                raise BadReply(f"the worker sent a malformed reply ({results} results expected)")
            return value
        except WorkerFailure:  # a reply that cannot be believed: the worker is out of step, replace it
            self._slot.stop()
            raise

    def _unpack(self, reply: dict, blobs: list[bytes]):
        self.printed.add(reply.get("printed", ""), reply.get("printed_more", 0))
        changed = reply.get("changed", [])
        if type(changed) is not list or not all(type(c) is str for c in changed):
            raise BadReply("the worker sent a malformed reply (the settings it set back are not a list of text)")
        self.set_back += [c[:200] for c in changed if c[:200] not in self.set_back][:20 - len(self.set_back)]
        violations = reply.get("violations")
        if type(violations) is not list or not all(type(v) is str for v in violations):
            raise BadReply("the worker sent a malformed reply (no violation list)")
        if violations:
            raise ForbiddenUsed("; ".join(v[:300] for v in violations[:5]))
        refused = reply.get("refused", [])  # absent only from a frame the student wrote: it says nothing that counts
        if type(refused) is not list or not all(type(r) is str for r in refused):
            raise BadReply("the worker sent a malformed reply (the refusals are not a list of text)")
        if refused:
            error = reply.get("error")
            then = f"{str(error.get('type'))[:100]}: {str(error.get('message'))[:2000]}" if type(error) is dict else ""
            raise RefusedAtRunTime("; ".join(r[:300] for r in refused[:5]), then)
        if "error" in reply:
            error = reply["error"]
            try:
                raise StudentRaised(str(error["type"])[:100], str(error["message"])[:2000], [str(f)[:300] for f in error["frames"]][:8])
            except (TypeError, KeyError):
                raise BadReply("the worker sent a malformed error") from None
        if "value" not in reply:
            raise BadReply("the worker sent a reply without a value")
        try:
            return wire.decode(reply["value"], blobs)
        except Exception as exc:  # whatever a forged frame makes decoding raise, it fails the case, not the grader
            raise BadReply(f"the worker sent a malformed value ({type(exc).__name__}: {str(exc)[:300]})") from None


def _handle(value) -> int | None:
    """The handle of a kept object (a Remote to it, not to an attribute of it), or None."""
    if isinstance(value, Remote) and isinstance(value._expr.base, wire.Handle) and not value._expr.attrs:
        return value._expr.base.id
    return None


def _exprs(value):
    """Swap Remote objects for the expressions the worker resolves."""
    if isinstance(value, Remote):
        return value._expr
    if isinstance(value, list):
        return [_exprs(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_exprs(v) for v in value)
    if isinstance(value, dict):
        return {k: _exprs(v) for k, v in value.items()}
    return value
