"""Timing cases (autograder/timing.py) measure the student's speed against the reference's, whatever the machine.

The verdict arithmetic and the checksums' comparison are tested directly. Graded runs use the
scaled_dot_product_attention timing case, and lstm_forward's for correct cells in other layouts, whose
assertions are on the checksums' verdict only; every assertion on a measured ratio leaves a margin of
several times, so a slow or busy machine cannot flip it: a student made slow on purpose sleeps 20 times
its own work after each call, whatever the rubric's shape and however fast the machine.
"""
import dataclasses
import importlib.util
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from attacks import processes_with, tier
from conftest import ROOT, SOLUTIONS, grade_folder, solutions_with

from autograder.timing import kept_started
from autograder.rubric import RubricError, load_rubric
from autograder.runner import reference_worker
from autograder.sandbox.host.floor import Floor
from autograder.judge import CaseFailed
from autograder.report import feedback, results_json
from autograder.sandbox.host import reaper
from autograder.sandbox.worker import worker
from autograder.sandbox.host.process import Deadline, Forbidden, Limits
from autograder.sandbox.host.proxy import Slot
from autograder.timing import ROUNDINGS, Policy, _same_checksums, bootstrap_interval, reference_slot, renew, verdict

SDPA_SPEED = "speed: scaled_dot_product_attention against the reference"
LSTM_SPEED = "speed: lstm_forward against the reference"
PLAIN_CASE = "dot_product_attention with a padding mask"
VARIANTS = Path(__file__).parent / "timing_variants"  # correct LSTM cells the corpus below does not hold
ALTERNATIVES = Path(__file__).parent / "alternatives"  # correct submissions in other operation orders
LSTM_LAYOUTS = {  # correct lstm_forward layouts, by their file
    "fused": VARIANTS / "lstm_fused.py",  # one cat([x_t, h]) @ cat([W_ih, W_hh], 1).T per step
    "hoisted": ALTERNATIVES / "fused_hoisted" / "lstm.py",  # x @ W_ih.T + b for every step before the loop
    "cs231n": ALTERNATIVES / "gpt_style" / "lstm.py",  # CS231n-style gate slices of one pre-activation
    "per_gate": VARIANTS / "lstm_per_gate.py",
    "float64": ALTERNATIVES / "float64_internals" / "lstm.py",
}
BEYOND_ROUNDING = "differ from the reference's on the same inputs by more than float32 rounding allows"
# Appended to a copy of solutions/attention.py: the reference's function, then a sleep of 20 times the work,
# so about 21x the reference's time; clock and synchronize are bound here, before any patch of the attacks below.
SLOW = """
import time

_exact = scaled_dot_product_attention
_clock, _synchronize = time.perf_counter, torch.cuda.synchronize


def scaled_dot_product_attention(Q, K, V, mask=None):
    started = _clock()
    out = _exact(Q, K, V, mask)
    if out.is_cuda:
        _synchronize()  # the work itself, not its launch
    time.sleep(20 * (_clock() - started))
    return out
"""


def timing_rubric(rubric, component_id: str, *names: str, without_gpu: str = "grade"):
    """The real rubric cut down to the cases `names` of one component, under the policy `without_gpu`. Measuring
    stops after 5 s (not 20): every ratio asserted here is several times away from its bound."""
    component = rubric.component(component_id)
    cases = [c for c in component.cases if c.name in names]
    assert len(cases) == len(names), names
    timing = dataclasses.replace(rubric.timing, without_gpu=without_gpu, seconds=5.0)
    return dataclasses.replace(rubric, components=[dataclasses.replace(component, cases=cases)], timing=timing)


def attention_with(tmp_path: Path, code: str) -> Path:
    """A copy of solutions/ whose attention.py ends with `code` (which may rebind its functions)."""
    folder = tmp_path / "variant"
    shutil.copytree(SOLUTIONS, folder)
    with open(folder / "attention.py", "a") as f:
        f.write(code)
    return folder


def sdpa_speed(rubric, folder: Path, tmp_path: Path):
    """The result of the scaled_dot_product_attention timing case alone on `folder`."""
    (result,) = grade_folder(timing_rubric(rubric, "attention", SDPA_SPEED), folder, tmp_path).results
    return result


@pytest.fixture(scope="module")
def reference_run(rubric, tmp_path_factory):
    """solutions/ graded as the student on the timing case and an ordinary case, under `grade`."""
    return grade_folder(timing_rubric(rubric, "attention", PLAIN_CASE, SDPA_SPEED), SOLUTIONS, tmp_path_factory.mktemp("reference"))


def timing_result(run):
    return next(r for r in run.results if r.case.name == SDPA_SPEED)


def plain_points(run) -> float:
    return next(r for r in run.results if r.case.name == PLAIN_CASE).case.points


# --- the verdict arithmetic -------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio, fraction", [(0.5, 1.0), (1.0, 1.0), (1.5, 1.0), (2.75, 0.5), (4.0, 0.0), (9.0, 0.0)])
def test_points_fall_linearly_from_full_until_to_zero_at(ratio, fraction):
    """Full points up to 1.5x the reference's time, none from 4x, linear between; the message says both (the points
    earned are said before it: report.feedback)."""
    v = verdict(ratio, ratio * 0.9, ratio * 1.1, 9, None, Policy(), {"device": "cpu"})
    assert v.fraction == pytest.approx(fraction)
    assert f"{ratio:.2f}x the reference's time (95% CI {ratio * 0.9:.2f}-{ratio * 1.1:.2f}, 9 pairs)" in v.message
    assert v.message.endswith(": full points up to 1.5x, none from 4x.")
    assert v.extra == {"device": "cpu", "ratio": ratio, "ci": [round(ratio * 0.9, 4), round(ratio * 1.1, 4)], "pairs": 9,
                       "memory_ratio": None}
    assert "flagged" not in v.extra


def test_implausibly_fast_is_flagged_not_rewarded():
    """20x faster than the reference earns nothing and is flagged for a TA."""
    v = verdict(0.05, 0.04, 0.06, 9, None, Policy(), {})
    assert v.fraction == 0.0 and v.extra["flagged"] is True
    assert "x the reference's time (95% CI" in v.message and "flagged for a TA to review" in v.message


@pytest.mark.parametrize("memory, fraction", [(None, 1.0), (1.0, 1.0), (2.0, 1.0), (2.5, 0.0)])
def test_memory_beyond_the_ratio_costs_the_points(memory, fraction):
    """A fast student using more than memory_ratio (2x) the reference's peak GPU memory earns nothing."""
    v = verdict(1.0, 0.9, 1.1, 9, memory, Policy(), {})
    assert v.fraction == fraction and v.extra["memory_ratio"] == memory
    assert ("peak GPU memory" in v.message) == (fraction == 0.0)


@pytest.mark.parametrize("pairs", [7, 40, 200])
def test_bootstrap_interval_holds_the_median(pairs):
    """The 95% interval of the median holds the sample's median and is no wider than the sample."""
    ratios = list(np.random.default_rng(pairs).lognormal(0.3, 0.2, pairs))
    low, high = bootstrap_interval(ratios, np.random.default_rng(0))
    assert min(ratios) <= low <= np.median(ratios) <= high <= max(ratios)
    assert low < high


def test_bootstrap_interval_of_identical_ratios_is_a_point():
    assert bootstrap_interval([1.25] * 7, np.random.default_rng(0)) == (1.25, 1.25)


# --- the checksums ---------------------------------------------------------------------------------------

LSTM_OUTPUTS = ("hs", "h_last", "c_last")
CACHED = " Outputs cached from earlier calls, or work left unfinished when the function returned?"


def lstm_shaped(seed: int) -> list[torch.Tensor]:
    """Three float32 tensors shaped as lstm_forward's outputs on the CPU timing shapes."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) for shape in ((8, 64, 64), (8, 64), (8, 64))]


def sums(tensors: list) -> dict:
    """A worker's reply to one timed call that gave `tensors`."""
    return {"checksums": [worker.checksums(tensors)], "peak_bytes": None}


def test_rounding_passes_and_a_miss_is_named_without_expected_values():
    """Every element moved by up to 16 float32 roundings (what another order of operations does, and more) passes;
    one output of other inputs fails, and the message says what was compared, which output missed and by how much,
    never the reference's checksums."""
    want = lstm_shaped(0)
    generator = torch.Generator().manual_seed(1)
    jitter = [(t.double() * (1 + 16 * 2.0 ** -24 * (2 * torch.rand(t.shape, generator=generator, dtype=torch.float64) - 1))).float()
              for t in want]
    _same_checksums(sums(jitter), sums(want), LSTM_OUTPUTS, "lstm_forward", "")

    cached = want[:2] + lstm_shaped(2)[2:]
    with pytest.raises(CaseFailed) as err:
        _same_checksums(sums(cached), sums(want), LSTM_OUTPUTS, "lstm_forward, in a timed block", CACHED)
    message = str(err.value)
    assert message.startswith(f"lstm_forward, in a timed block: your results (hs, h_last, c_last) {BEYOND_ROUNDING}"), message
    assert f"projection on a random direction and its norm, within {ROUNDINGS} roundings of the reference's norm; c_last " \
           "missed by" in message and CACHED in message, message
    assert not [v for c in worker.checksums(want) for v in c[:2] for digits in (".4g", ".6g") if format(v, digits) in message]


def test_non_finite_and_missing_outputs_fail():
    """A NaN anywhere in an output fails with that output named; a result of fewer tensors says how many were expected."""
    want = lstm_shaped(0)
    broken = [want[0].clone(), *want[1:]]
    broken[0][3, 5, 7] = float("nan")
    with pytest.raises(CaseFailed, match=r"hs missed beyond any multiple \(NaN or infinite"):
        _same_checksums(sums(broken), sums(want), LSTM_OUTPUTS, "lstm_forward", "")
    with pytest.raises(CaseFailed, match=r"your results are not the reference's 3 tensors \(hs, h_last, c_last\)"):
        _same_checksums(sums(want[:2]), sums(want), LSTM_OUTPUTS, "lstm_forward", "")


def test_gradients_are_checksummed_in_the_order_of_their_names():
    """A model's parameters may be registered in any order (load_state_dict matches them by name), so a timed call's
    gradients follow the parameters' names, not their order in the class."""

    class Net(torch.nn.Module):
        def __init__(self, head_first: bool):
            super().__init__()
            if head_first:
                self.head = torch.nn.Linear(4, 2)
            self.body = torch.nn.Linear(3, 4)
            if not head_first:
                self.head = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.head(torch.tanh(self.body(x)))

    first, second = Net(head_first=True), Net(head_first=False)
    second.load_state_dict(first.state_dict())
    x = torch.randn(5, 3)
    got, want = worker.results(first, [x], True), worker.results(second, [x], True)
    assert [tuple(t.shape) for t in want] == [(5, 2), (4,), (4, 3), (2,), (2, 4)]  # body.bias, body.weight, head.bias, head.weight
    assert all(torch.equal(a, b) for a, b in zip(got, want))


# --- measured runs ---------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.serial
def test_reference_as_student_is_about_as_fast_as_the_reference(reference_run):
    """Identical code in the two workers measures within 2x of 1 (the same code, so any machine)."""
    r = timing_result(reference_run)
    assert r.passed, r.output
    assert 0.5 <= r.extra["ratio"] <= 2.0, r.output


@pytest.mark.slow
@pytest.mark.serial
def test_a_slow_implementation_scores_slow(rubric, tmp_path, reference_run):
    """The reference slowed about 21 times measures far slower than the reference as student and earns nothing."""
    r = sdpa_speed(rubric, attention_with(tmp_path, SLOW), tmp_path)
    assert r.passed, r.output  # a verdict, not a failure: the answers are right
    assert r.extra["ratio"] > 5 and r.extra["ratio"] > 2 * timing_result(reference_run).extra["ratio"], r.output
    assert r.fraction == 0.0 and r.score == 0.0
    assert feedback(r).startswith(f"0 of {r.case.points:g} points: "), feedback(r)


# --- attacks ---------------------------------------------------------------------------------------------

# Every clock the student's process could read, and CUDA's synchronisation and events, patched at import.
PATCHED_CLOCKS = """
import time

import torch

time.perf_counter = time.monotonic = time.time = lambda: 0.0
time.perf_counter_ns = time.monotonic_ns = time.time_ns = lambda: 0
torch.cuda.synchronize = lambda *a, **k: None


class _Event:
    def __init__(self, *a, **k):
        pass

    def record(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 0.0


torch.cuda.Event = _Event
"""
# Computes once per input shape, then hands back the first answer at once.
CACHED_BY_SHAPE = """
_compute = scaled_dot_product_attention
_cache = {}


def scaled_dot_product_attention(Q, K, V, mask=None):
    key = (tuple(Q.shape), tuple(K.shape), tuple(V.shape))
    if key not in _cache:
        _cache[key] = _compute(Q, K, V, mask)
    return _cache[key]
"""
# Right the first time it sees inputs, negated whenever their values come again: a timed block that reuses
# inputs fails. (A memo keyed on the inputs is right on repeats, so only reuse itself can show it.)
WRONG_ON_REPEATS = """
_compute = scaled_dot_product_attention
_seen = set()


def scaled_dot_product_attention(Q, K, V, mask=None):
    key = tuple(float(x.double().sum()) for x in (Q, K, V))
    out = _compute(Q, K, V, mask)
    if key in _seen:
        return -out
    _seen.add(key)
    return out
"""
# Returns an empty tensor at once and fills it later in a thread (the sleep makes "later" certain).
DEFERRED = """
import threading
import time

_exact = scaled_dot_product_attention


def scaled_dot_product_attention(Q, K, V, mask=None):
    out = torch.empty_like(Q)  # the output's shape, as the timing inputs are self-attention's: Q, K and V alike

    def fill():
        time.sleep(0.05)
        out.copy_(_exact(Q, K, V, mask))

    threading.Thread(target=fill).start()
    return out
"""


@pytest.mark.slow
@pytest.mark.serial
def test_patched_clocks_do_not_hide_slowness(rubric, tmp_path):
    """A slow student who stops every clock in its own process is still timed slow: the parent holds the clock."""
    r = sdpa_speed(rubric, attention_with(tmp_path, SLOW + PATCHED_CLOCKS), tmp_path)
    assert r.passed, r.output
    assert r.extra["ratio"] > 5 and r.fraction == 0.0 and r.score == 0.0, r.output


@pytest.mark.slow
def test_outputs_cached_by_shape_fail(rubric, tmp_path):
    """Handing back the first answer for every input of the same shape fails: the timed blocks' sums differ."""
    r = sdpa_speed(rubric, attention_with(tmp_path, CACHED_BY_SHAPE), tmp_path)
    assert not r.passed and r.score == 0.0
    assert f"in a timed block: your results (output) {BEYOND_ROUNDING}" in r.output, r.output
    assert "output missed by" in r.output and "cached from earlier calls, or work left unfinished" in r.output, r.output


@pytest.mark.slow
@pytest.mark.serial
def test_timed_blocks_never_repeat_inputs(rubric, tmp_path):
    """Every timed block holds inputs the student has not seen (timing.py: "each pair on fresh inputs"); otherwise
    a slow student who remembers each input's answer is timed on lookups, and its right answers pass the sums."""
    r = sdpa_speed(rubric, attention_with(tmp_path, WRONG_ON_REPEATS), tmp_path)
    assert r.passed, r.output


@pytest.mark.slow
def test_deferred_work_earns_nothing(rubric, tmp_path):
    """Returning an unfilled tensor and computing it in a thread fails: the sums are taken before the reply."""
    r = sdpa_speed(rubric, attention_with(tmp_path, DEFERRED), tmp_path)
    assert not r.passed and r.score == 0.0
    # the unfilled tensor holds whatever memory it was given: zeros, other numbers, or NaN
    assert f"on the timing inputs: your results (output) {BEYOND_ROUNDING}" in r.output and "output missed " in r.output, r.output


@pytest.mark.slow
def test_a_wrong_answer_earns_no_timing_points(rubric, tmp_path):
    """Forgetting 1/sqrt(dk) is fast but wrong: the timing case fails on the outputs, before any timing."""
    scores = "scores = Q @ K.transpose(-2, -1) / math.sqrt(dk)  # (..., Tq, Tk)"
    folder = solutions_with(tmp_path, "attention.py", scores, scores.replace(" / math.sqrt(dk)", ""))
    r = sdpa_speed(rubric, folder, tmp_path)
    assert not r.passed and r.score == 0.0
    assert f"on the timing inputs: your results (output) {BEYOND_ROUNDING}" in r.output, r.output


# --- correct code in other layouts ----------------------------------------------------------------------


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"timing_test_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lstm_speed(rubric, tmp_path: Path, code: str):
    """The result of the lstm_forward timing case alone on solutions/ with lstm.py replaced by `code`."""
    folder = tmp_path / "variant"
    shutil.copytree(SOLUTIONS, folder)
    (folder / "lstm.py").write_text(code)
    (result,) = grade_folder(timing_rubric(rubric, "lstm", LSTM_SPEED), folder, tmp_path).results
    return result


@pytest.mark.parametrize("name", LSTM_LAYOUTS)
def test_the_lstm_variants_are_correct(name):
    """The variants graded below compute lstm_forward exactly (float64, against the reference), so what they lose
    in float32 can only be rounding."""
    reference = load_module(SOLUTIONS / "lstm.py")
    generator = torch.Generator().manual_seed(0)
    args = [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in ((3, 7, 4), (3, 5), (3, 5), (20, 4), (20, 5), (20,))]
    (hs, (h, c)), (want_hs, (want_h, want_c)) = load_module(LSTM_LAYOUTS[name]).lstm_forward(*args), reference.lstm_forward(*args)
    for got, want in ((hs, want_hs), (h, want_h), (c, want_c)):
        assert got.dtype == torch.float64 and torch.allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["fused", "hoisted", "cs231n"])
@pytest.mark.slow
@pytest.mark.serial
def test_correct_lstm_layouts_keep_their_timing_points(rubric, tmp_path, name):
    """A fused cat([x, h]) @ W cell, an input projection hoisted out of the loop and CS231n-style layers round
    differently from the reference, within float32 rounding (benchmarks/checksums.py: at most 11 roundings of the
    norm against the bound's 1024), so every timed block passes its checksums and the case ends in a speed verdict.
    What that verdict is depends on the machine: only that there is one is asserted."""
    r = lstm_speed(rubric, tmp_path, LSTM_LAYOUTS[name].read_text())
    assert r.passed, r.output
    assert "x the reference's time (95% CI" in r.output and r.extra["pairs"] >= 7, r.output


@pytest.mark.slow
def test_a_wrong_lstm_earns_no_timing_points(rubric, tmp_path):
    """The gates taken in the lecture's order (i, f, o, g) instead of PyTorch's: with weights at 1/sqrt(fan-in)
    the outputs still move far beyond rounding, so the case fails on its first inputs."""
    fused = LSTM_LAYOUTS["fused"].read_text()
    assert fused.count("i, f, g, o = gates.chunk(4, dim=1)") == 1
    r = lstm_speed(rubric, tmp_path, fused.replace("i, f, g, o = gates.chunk(4, dim=1)", "i, f, o, g = gates.chunk(4, dim=1)"))
    assert not r.passed and r.score == 0.0
    assert f"on the timing inputs: your results (hs, h_last, c_last) {BEYOND_ROUNDING}" in r.output, r.output


# --- the policy without a GPU ----------------------------------------------------------------------------

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="the without_gpu policy applies only on a machine without a GPU")


@no_gpu
@pytest.mark.slow
@pytest.mark.serial
def test_without_gpu_grade_counts_the_timing_case(reference_run):
    """`grade`: the CPU measurement earns points, and results.json carries the measurement."""
    r = timing_result(reference_run)
    assert r.counted and r.max_score == r.case.points > 0
    results = results_json(reference_run)
    test = next(t for t in results["tests"] if t["name"].endswith(SDPA_SPEED))
    assert test["max_score"] == r.case.points and test["extra_data"]["device"] == "cpu"
    assert test["extra_data"]["ratio"] == r.extra["ratio"] and test["extra_data"]["pairs"] >= 7
    low, high = test["extra_data"]["ci"]
    assert low <= test["extra_data"]["ratio"] <= high
    assert results["extra_data"]["max_score"] == sum(r.case.points for r in reference_run.results)


@no_gpu
@pytest.mark.slow
@pytest.mark.serial
def test_without_gpu_inform_measures_but_counts_nothing(rubric, tmp_path):
    """`inform`: measured and reported, worth nothing, and left out of the total's maximum."""
    run = grade_folder(timing_rubric(rubric, "attention", PLAIN_CASE, SDPA_SPEED, without_gpu="inform"), SOLUTIONS, tmp_path)
    r = timing_result(run)
    assert r.passed and not r.counted and r.score == 0.0 and r.max_score == 0.0
    assert "x the reference's time (95% CI" in r.output and "Reported only" in r.output, r.output
    results = results_json(run)
    test = next(t for t in results["tests"] if t["name"].endswith(SDPA_SPEED))
    assert test["score"] == 0 and test["max_score"] == 0
    assert {"device", "ratio", "ci", "pairs"} <= test["extra_data"].keys() and test["extra_data"]["device"] == "cpu"
    assert results["extra_data"]["max_score"] == results["score"] == plain_points(run)  # the ordinary case only


@no_gpu
@pytest.mark.slow
def test_without_gpu_skip_reports_a_skip(rubric, tmp_path):
    """`skip`: not run, reported as skipped with no points at stake."""
    run = grade_folder(timing_rubric(rubric, "attention", PLAIN_CASE, SDPA_SPEED, without_gpu="skip"), SOLUTIONS, tmp_path)
    r = timing_result(run)
    assert r.output.startswith("Skipped") and r.score == 0.0 and r.max_score == 0.0
    assert r.extra["device"] == "cpu" and "ratio" not in r.extra
    results = results_json(run)
    assert results["extra_data"]["max_score"] == results["score"] == plain_points(run)


# --- grading.yaml ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("edit, key, expected", [
    ({"full_until": 4.0, "zero_at": 4.0}, "full_until", "full_until < zero_at"),
    ({"full_until": 5.0}, "full_until", "full_until < zero_at"),
    ({"slack": 1.0}, "timing.slack", "unknown key; expected one of without_gpu, full_until, zero_at"),
    ({"zero_ta": 5.0}, "timing.zero_ta", "unknown key; did you mean 'zero_at'?"),
    ({"without_gpu": "maybe"}, "timing.without_gpu", "'grade'"),
], ids=["full_until == zero_at", "full_until > zero_at", "unknown key", "near key", "without_gpu: maybe"])
def test_bad_timing_section_is_refused(tmp_path, edit, key, expected):
    """A `timing:` section that cannot make sense is refused with the key named."""
    data = yaml.safe_load((ROOT / "grading.yaml").read_text())
    data["timing"].update(edit)
    data["solutions"] = str(SOLUTIONS)
    path = tmp_path / "grading.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RubricError) as err:
        load_rubric(path)
    message = str(err.value)
    assert "timing" in message and key in message and expected in message, message


@pytest.mark.slow
@pytest.mark.serial
def test_the_student_is_held_still_while_the_reference_is_timed(tmp_path):
    """While the reference's block runs, the student's worker is stopped (its threads too) and every process it
    left running is dead, so nothing of the student's can load the machine against the reference; afterwards
    the worker answers again. (On this 2-core machine, helpers that burn the cores only while the reference runs
    moved a 6x student's ratio by 1.5 at most, too little for a ratio-based test to tell apart from noise.)"""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "leaver.py").write_text("import os\nimport time\n\n\ndef leave():\n    if os.fork() == 0:\n"
                                      "        time.sleep(600)\n        os._exit(0)\n")
    slot = Slot(folder, Forbidden(), Limits(), tier())
    student = slot.proxy(Deadline.after(60))

    def ours() -> list[int]:  # the worker and what it forked, which keeps its command line
        return [pid for pid in processes_with(str(slot.worker.scratch)) if "bwrap" not in _cmdline(pid)]

    try:
        student.leaver.leave()
        deadline = time.monotonic() + 10
        while len(ours()) < 2 and time.monotonic() < deadline:  # a loaded machine may not have run it yet
            time.sleep(0.01)
        assert len(ours()) == 2
        with student.held_still():
            states = [reaper._state(pid) for pid in ours()]
            assert states == ["T"], states  # the worker stopped, the process it left running dead
        assert student.math.sqrt(4.0) == 2.0
    finally:
        slot.stop()


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode(errors="replace")


@pytest.mark.slow
def test_a_kept_reference_worker_is_renewed_before_half_its_cpu_limit():
    """A batch job keeps the reference's worker across submissions; RLIMIT_CPU counts all of them, so renew()
    replaces the worker once it has used half its limit, before the limit could end a student's timing case."""
    reference = reference_slot(SOLUTIONS, tier(), Limits(cpu_seconds=8))  # a start (torch's import) uses about 1 s
    proxy = reference.proxy(Deadline.after(60))
    try:
        proxy.math.sqrt(4.0)
        first = reference.worker
        renew(reference)
        assert reference.worker is first  # far from half its limit: kept
        proxy.call(proxy.builtins.exec, "import time\nwhile time.process_time() < 4.5: pass")
        renew(reference)
        assert reference.worker is None  # past half: stopped, and started afresh on first use
        assert proxy.math.sqrt(9.0) == 3.0 and reference.worker is not first
    finally:
        reference.stop()


@pytest.mark.slow
def test_a_jobs_reference_worker_outlives_each_grade(rubric, tmp_path):
    """A batch job keeps one reference worker for all its submissions. A worker dies with the thread that started it
    (bubblewrap's --die-with-parent) and a grade's threads end with the grade: started by a grade, it died with each
    one and started again inside the next submission's first timing case, its second of imports in the time that
    case holds the machine alone. Started as the job starts it (jobs.kept_started), one worker serves every grade."""
    timed = timing_rubric(rubric, "lstm", LSTM_SPEED)
    reference = reference_worker(timed, tier())
    floor = Floor(tmp_path / "timing.lock")
    try:
        seen = []
        for k in range(2):
            kept_started(reference, floor)
            seen.append(reference.worker)
            (result,) = grade_folder(timed, SOLUTIONS, tmp_path / str(k), tier(), reference=reference, lanes=1,
                                     machine=tmp_path / "timing.lock").results
            assert result.passed
        proxy = reference.proxy(Deadline.after(60))
        assert proxy.math.sqrt(4.0) == 2.0 and reference.worker is seen[0] is seen[1]
    finally:
        reference.stop()
