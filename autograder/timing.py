"""Timing: the student's speed as a ratio to the reference's, taken in one run on the same inputs.

The parent times every block with its own clock around the whole request, so
nothing the worker says about time counts: a student who patches clocks,
events or synchronize, or defers work to another thread or stream, still pays
for the work before the reply, and each block's outputs come back as checksums
that must match the reference's on the same inputs within what rounding allows
(caching and deferred work show as wrong sums). The reference runs in a worker
of its own holding only staff code; student code never gets a handle on it.
Student and reference blocks alternate in random order, each pair on fresh
inputs; the verdict is the median of the per-pair ratios with a bootstrap
interval, and measuring stops when the interval is tight or the time cap is
reached.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .judge import CaseFailed
from .outcome import Ended
from .sandbox.host.floor import Floor
from .sandbox.host.process import Deadline, Forbidden, Limits
from .sandbox.host.proxy import Proxy, Slot
from .sandbox.host.tiers import Tier
from .tensors import deferred

torch = deferred("torch")

BLOCK_SECONDS = 0.02  # each timed request runs this long at least, so the request's own cost is noise
WARMUP_BLOCKS = 2
MIN_PAIRS, MAX_PAIRS = 7, 200
# A timed call's checksums (worker.checksums: each output's projection on a random direction, and its norm) may
# differ from the reference's by this many roundings of the output's norm in its dtype: 8 standard deviations of
# the projection for outputs 128 roundings apart. On the timing inputs (benchmarks/checksums.py, 1000 seeds),
# correct implementations in other operation orders were up to 11 roundings apart and missed by up to 26;
# outputs of other inputs, or left at zero, missed by 58,000 and more (an output whose last position alone was
# left at zero: 9,000).
ROUNDINGS = 1024


@dataclass(frozen=True)
class Policy:
    """grading.yaml `timing:`: how a ratio becomes points, and what to do without a GPU."""

    without_gpu: str = "grade"  # grade (CPU shapes), inform (reported, no points) or skip
    full_until: float = 1.5
    zero_at: float = 4.0
    flag_below: float = 0.1  # faster than 10x the reference: flagged for review, not rewarded
    memory_ratio: float = 2.0  # peak GPU memory beyond this multiple of the reference's costs the points
    seconds: float = 20.0  # measuring stops here even if the interval is still wide
    tight: float = 0.1  # ... or once (high - low) / median is below this


def reference_slot(solutions_dir: Path, tier: Tier, limits: Limits) -> Slot:
    """The reference's worker for timing cases, started on first use. It runs staff code only, so at the root
    tier it keeps the grader's uid rather than the students'."""
    return Slot(solutions_dir, Forbidden(), limits, dataclasses.replace(tier, student_id=None), staff=True)


def renew(reference: Slot) -> None:
    """A reference worker kept across submissions (a batch job keeps one) is replaced once it has used half its CPU
    limit, so that RLIMIT_CPU never ends it in the middle of a student's timing case. One that could not start for an
    earlier submission is tried again for this one."""
    if reference.worker is None:
        reference.stop()
        return
    try:
        proxy = reference.proxy(Deadline.after(30))
        used = proxy.call(proxy.time.process_time)
    except Ended:  # it had died: the slot starts another on first use
        return
    if not isinstance(used, float) or used > reference.limits.cpu_seconds / 2:
        reference.stop()


def kept_started(reference: Slot, floor: Floor) -> None:
    """A reference worker kept across grades (a batch job's, check --watch's), renewed if due and started on this
    thread, not by a grade: a worker dies with the thread that started it (bubblewrap's --die-with-parent), and a
    grade's threads end with it. Started as any start is, never while a timing case runs."""
    renew(reference)
    with floor.shared(), contextlib.suppress(Ended):
        reference.start()


class Speed:
    """What timing checks share in one grade: the policy, the device, and the reference's worker."""

    def __init__(self, policy: Policy, reference: Slot, tier: Tier):
        self.policy, self.reference, self.tier = policy, reference, tier.name
        self._device: str | None = None
        self.device_name = ""
        self.unseen: str | None = None  # why timing fell back to the CPU on a machine with a GPU

    @property
    def device(self) -> str:
        """cuda when the grader sees a GPU and so does a worker inside the tier's walls; else cpu, with `unseen`
        saying why when the grader sees one (a worker without the driver's folder or CUDA_VISIBLE_DEVICES, say)."""
        if self._device is None:
            self._device = "cpu"
            if torch.cuda.is_available():
                reference = self.reference.proxy(Deadline.after(60))
                if reference.call(reference.torch.cuda.is_available) is True:
                    self._device = "cuda"
                    self.device_name = str(reference.call(reference.torch.cuda.get_device_name))
                else:
                    self.unseen = (f"The grader sees a GPU ({torch.cuda.get_device_name()}) but a worker inside the {self.tier} "
                                   f"tier's walls does not ({_why_no_cuda(reference)}), so timing falls back to the CPU.")
            if self._device == "cpu":
                with open("/proc/cpuinfo") as f:
                    self.device_name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown CPU")
        return self._device

    def record(self) -> dict:
        """What a timing case's extra says of where it was timed."""
        return {"device": self.device, "device_name": self.device_name, "tier": self.tier,
                **({"gpu_unseen": self.unseen} if self.unseen else {})}

    @property
    def graded(self) -> bool:
        return self.device == "cuda" or self.policy.without_gpu == "grade"

    def reference_pair(self, student: Proxy) -> tuple[Proxy, Proxy]:
        """The student's proxy and the reference's, under the same case deadline."""
        return student, self.reference.proxy(student.deadline)


def _why_no_cuda(reference: Proxy) -> str:
    """What torch in the reference's worker says when asked to start CUDA."""
    try:
        reference.call(reference.torch.cuda.init)
    except Ended as exc:
        return str(exc)[:300]
    return "torch.cuda.init() raised nothing"


@dataclass(frozen=True)
class Verdict:
    ratio: float
    low: float
    high: float
    pairs: int
    fraction: float  # of the case's points
    message: str
    extra: dict


def compare_speed(t, what: str, student_fn, reference_fn, make_inputs, *, outputs: tuple[str, ...], backward: bool = False) -> Verdict:
    """Time student_fn against reference_fn (Remote callables in their two workers); the verdict is the check's result.

    make_inputs(worker, i) builds the i-th argument list in `worker`, the same in both; no i is used
    twice, so an answer remembered from earlier inputs is never timed. `outputs` names the tensors the
    worker checksums per call (the function's outputs, then with `backward` each parameter's gradient).
    Correctness on the first inputs comes first: a wrong answer earns no timing points. On a GPU, each side's
    peak memory is its largest over the warm-up and timed blocks."""
    speed = t.speed
    started = time.monotonic()
    student, reference = speed.reference_pair(t.student)
    workers = {student: student_fn, reference: reference_fn}
    fresh = _Fresh(workers, make_inputs)

    first = fresh.take(1)
    want = reference.repeat(reference_fn, first[reference], backward)
    got = student.repeat(student_fn, first[student], backward)
    _same_checksums(got, want, outputs, f"{what}, on the timing inputs", "")
    one, _ = _timed(reference, reference_fn, fresh.take(1)[reference], backward)
    reps = max(1, math.ceil(BLOCK_SECONDS / max(one, 1e-6)))
    peaks = {w: [] for w in workers}  # per block: the first call's one-time allocations (a workspace, say) left out
    for _ in range(WARMUP_BLOCKS):
        inputs = fresh.take(reps)
        for w, fn in workers.items():
            peaks[w].append(_peak(_timed(w, fn, inputs[w], backward)[1]))

    ratios: list[float] = []
    low = high = math.nan
    while len(ratios) < MAX_PAIRS:
        inputs, seconds, results = fresh.take(reps), {}, {}
        for w in (list(workers) if t.rng.random() < 0.5 else list(workers)[::-1]):  # random order in each pair
            # a thread or process of the student's must not load the machine while the reference is timed
            with student.held_still() if w is reference else contextlib.nullcontext():
                seconds[w], results[w] = _timed(w, workers[w], inputs[w], backward)
        _same_checksums(results[student], results[reference], outputs, f"{what}, in a timed block",
                        " Outputs cached from earlier calls, or work left unfinished when the function returned?")
        for w in workers:
            peaks[w].append(_peak(results[w]))
        ratios.append(seconds[student] / seconds[reference])
        if len(ratios) >= MIN_PAIRS:
            low, high = bootstrap_interval(ratios, t.rng)
            if (high - low) / float(np.median(ratios)) < speed.policy.tight or time.monotonic() - started > speed.policy.seconds:
                break
    extra = {**speed.record(), "reps_per_block": reps, "timing_seconds": round(time.monotonic() - started, 2)}
    result = verdict(float(np.median(ratios)), low, high, len(ratios), _memory_ratio(peaks[student], peaks[reference]),
                     speed.policy, extra)
    return dataclasses.replace(result, message=f"{result.message} {speed.unseen}") if speed.unseen else result


class _Fresh:
    """Inputs never used before, built in both workers outside any timed request; the previous
    batch is freed first, so memory stays flat however many pairs are measured."""

    def __init__(self, workers: dict, make_inputs):
        self.workers, self.make_inputs = workers, make_inputs
        self.used, self.held = 0, {}

    def take(self, n: int) -> dict:
        for w, sets in self.held.items():
            w.drop([x for args in sets for x in args])
        indices = range(self.used, self.used + n)
        self.used += n
        self.held = {w: [self.make_inputs(w, i) for i in indices] for w in self.workers}
        return self.held


def _timed(worker, fn, calls: list, backward: bool) -> tuple[float, dict]:
    worker.flush()  # outside the timed request: each block starts with a cold L2 on a GPU
    started = time.perf_counter()
    result = worker.repeat(fn, calls, backward)
    return time.perf_counter() - started, result


def checksum_misses(got, want: dict) -> list[list[float]] | None:
    """How far each checksummed tensor of each call misses the reference's, in units of its bound: the larger
    difference of projection and norm over ROUNDINGS unit roundoffs (the reference's dtype) of the reference's
    norm; above 1 is more than rounding. None when the student's reply does not have the reference's shape."""
    sums = got.get("checksums") if isinstance(got, dict) else None
    ref = want["checksums"]
    if not (isinstance(sums, list) and len(sums) == len(ref) and all(
            isinstance(s, list) and len(s) == len(r) and all(isinstance(c, list) and len(c) == 3 and all(type(x) is float for x in c)
                                                             for c in s) for s, r in zip(sums, ref))):
        return None
    return [[_miss(c, r) for c, r in zip(s, rs)] for s, rs in zip(sums, ref)]


def _miss(checksum: list[float], reference: list[float]) -> float:
    (projection, norm, _), (ref_projection, ref_norm, roundoff) = checksum, reference
    difference = max(abs(projection - ref_projection), abs(norm - ref_norm))
    if math.isnan(difference):
        return math.inf
    bound = ROUNDINGS * roundoff * ref_norm
    return difference / bound if bound > 0 else (0.0 if difference == 0 else math.inf)


def _same_checksums(got, want: dict, outputs: tuple[str, ...], what: str, why: str) -> None:
    misses = checksum_misses(got, want)
    listed = ", ".join(outputs) if len(outputs) <= 4 else f"{outputs[0]}, {outputs[1]} and {len(outputs) - 2} more"
    if misses is None:
        raise CaseFailed(f"{what}: your results are not the reference's {len(outputs)} tensors ({listed}), so no timing "
                         "points. The cases that check values say where.")
    miss, worst = max((m, i) for call in misses for i, m in enumerate(call))
    if miss > 1:
        rounding = next((f"{name} rounding" for name in ("float32", "float64", "float16", "bfloat16")
                         if want["checksums"][0][worst][2] == torch.finfo(getattr(torch, name)).eps / 2), "rounding")
        by = f"by {miss:.3g} times that" if math.isfinite(miss) else "beyond any multiple (NaN or infinite, or not zero where the reference's is)"
        raise CaseFailed(f"{what}: your results ({listed}) differ from the reference's on the same inputs by more than "
                         f"{rounding} allows, so no timing points. Compared: each result's projection on a random direction "
                         f"and its norm, within {ROUNDINGS} roundings of the reference's norm; {outputs[worst]} missed {by}."
                         f"{why} The cases that check values say where.")


def _memory_ratio(student: list, reference: list) -> float | None:
    """The student's largest peak GPU memory over the blocks against the reference's; None on a CPU, which
    measures none. A student's worker that reports none where the reference's does was patched past the
    functions it bound before student code ran (worker.bind_timing_cuda)."""
    if not all(_byte_count(b) for b in reference) or max(reference) <= 0:
        return None
    if not all(_byte_count(b) for b in student):
        raise CaseFailed("The worker running your code reported no peak GPU memory for a timed block (the grader's code "
                         "in it always does), so no timing points: does your code patch torch.cuda or the worker?")
    return max(student) / max(reference)


def _peak(result) -> object:
    """A block's peak_bytes as its worker sent it (the student's reply is untrusted: _byte_count judges it)."""
    return result.get("peak_bytes") if isinstance(result, dict) else None


def _byte_count(value) -> bool:
    return type(value) is int and value >= 0


def bootstrap_interval(ratios: list[float], rng: np.random.Generator, draws: int = 2000) -> tuple[float, float]:
    """95% interval of the median by resampling the per-pair ratios."""
    samples = rng.choice(np.asarray(ratios), size=(draws, len(ratios)), replace=True)
    medians = np.median(samples, axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def verdict(ratio: float, low: float, high: float, pairs: int, memory: float | None, policy: Policy, extra: dict) -> Verdict:
    """Points for a ratio (student / reference): full up to full_until, none from zero_at, linear between."""
    fraction = min(1.0, max(0.0, (policy.zero_at - ratio) / (policy.zero_at - policy.full_until)))
    speed = f"{ratio:.2f}x the reference's time (95% CI {low:.2f}-{high:.2f}, {pairs} pairs)"
    extra = {**extra, "ratio": round(ratio, 4), "ci": [round(low, 4), round(high, 4)], "pairs": pairs,
             "memory_ratio": None if memory is None else round(memory, 3)}
    if ratio < policy.flag_below:
        return Verdict(ratio, low, high, pairs, 0.0, f"{speed}: more than {1 / policy.flag_below:g}x faster than the "
                       "reference, which is flagged for a TA to review instead of rewarded.", {**extra, "flagged": True})
    if memory is not None and memory > policy.memory_ratio:
        return Verdict(ratio, low, high, pairs, 0.0, f"{speed}, but {memory:.1f}x the reference's peak GPU memory "
                       f"(limit {policy.memory_ratio:g}x): is a (T, T) mask materialised per head, or every "
                       "intermediate kept?", extra)
    return Verdict(ratio, low, high, pairs, fraction, f"{speed}: full points up to {policy.full_until:g}x, none from "
                   f"{policy.zero_at:g}x.", extra)
