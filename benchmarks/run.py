"""Benchmarks of the grader on this machine; (re)writes BENCHMARKS.md.

    .venv/bin/python benchmarks/run.py                  # everything: 25 to 40 minutes on 2 cores
    .venv/bin/python benchmarks/run.py --runs 10        # more repetitions of the timing verdict
    .venv/bin/python benchmarks/run.py --skip-slow-variants --skip-builtins --class-size 0 --report-size 0 --out /tmp/b.md
    python3 benchmarks/run.py --gpu-only --gpu-json $OUT/gpu.json --out $OUT/gpu.md   # on a GPU: section 6 only
    .venv/bin/python benchmarks/run.py --refresh-gpu-section   # BENCHMARKS.md's section 6 again from gpu.json
    .venv/bin/python benchmarks/run.py --only-report    # section 7 alone, measured and rewritten in place (5 minutes)
    .venv/bin/python benchmarks/run.py --only-walls     # section 8 alone, measured and rewritten in place (4 minutes)
    .venv/bin/python benchmarks/run.py --only-mutants   # section 9 alone, measured and rewritten in place (8 minutes)
    .venv/bin/python benchmarks/run.py --only-export    # section 10 alone, measured and rewritten in place (3 minutes)
    .venv/bin/python benchmarks/run.py --only-regrade   # section 11 alone, measured and rewritten in place (4 minutes)
    .venv/bin/python benchmarks/run.py --only-commands  # section 12 alone: each command typed, before and after (15 minutes)
    .venv/bin/python benchmarks/run.py --only-commands --commands-runs 1 --commands-rows 'version,check:ngram' --out /tmp/b.md

Five measurements, each a section of the file: how long grading the reference
takes and where the time goes; how stable the timing verdict is when the
reference is graded as a student; how deliberately slower (correct) variants
are scored; the reference solutions against PyTorch's built-ins, in-process;
and a class of submissions graded one by one and with `grade-all`
(benchmarks/class_batch.py). Sections 2 to 4 measure on whatever device the
grader times on. Section 6 holds the same measurements on a GPU, with the
peak-memory check: `--gpu-only` measures it there (benchmarks/device.sh) into
benchmarks/gpu.json, which is committed, and every run renders the section
from that file, saying where and when it was measured, or that no GPU was
available. Section 7 measures the class report of 300 submissions: how long
`autograder report` takes, its size, and how fast the page opens in headless
chromium (benchmarks/class_report.py, which also builds that class alone for a
person to look at). Section 8 measures what the worker's run-time walls cost: a
full grade and the timing verdicts with the forbidden operators refused and
without (benchmarks/walls.py). Section 9 measures the mutants of the reference:
the held-out mistakes they name, and what they add to passing and failing
grades (benchmarks/mutants.py). Section 12 times each command a student or a TA types, at commit
commands.BEFORE and in the working tree, in seconds and in this machine's `import torch` (benchmarks/commands.py).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import hashlib
import json
import math
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: benchmarks/ is no installed package; its modules import from the root
    sys.path.insert(0, str(ROOT))

from autograder.cases import TIMING  # noqa: E402
from autograder.outcome import Ended  # noqa: E402
from autograder.rubric import Rubric, load_rubric  # noqa: E402
from autograder.reference import Reference  # noqa: E402
from autograder.runner import GradeRun, grade  # noqa: E402
from autograder.sandbox.host.process import Deadline, Forbidden, Forked, Limits, Started, Worker, start_template  # noqa: E402
from autograder.sandbox.host.proxy import Slot  # noqa: E402
from autograder.sandbox.host.template import Template  # noqa: E402
from autograder.sandbox.host.tiers import Isolation, Tier, choose_tier, grader_files  # noqa: E402
from autograder.submission import open_submission  # noqa: E402
from autograder.timing import Policy, Speed, reference_slot, verdict  # noqa: E402
from benchmarks import class_report, commands, export_batch, mutants, regrade, walls  # noqa: E402
from benchmarks.class_batch import GPU_CLASS, class_parts, class_runs, section_class  # noqa: E402
from benchmarks.common import BENCHMARKS_MD, SOLUTIONS, busy_cpu as _busy_cpu, read_lines as _read, replace_section, section_of, table  # noqa: E402

SLOWDOWNS = (2, 5)
# Extra (B, h, T, T) float32 tensors the memory-hungry variants keep alive: the reference's multi_head_self_attention
# holds at most 3 at once (scores, weights before and after masking), so 1 stays within 2x its peak and 8 goes far beyond.
HUNGRY = (1, 8)
GPU_JSON = ROOT / "benchmarks" / "gpu.json"
GPU_SECTION = "## 6. On a GPU"


# ---------------------------------------------------------------- the machine


def machine(tier: Tier) -> list[tuple[str, str]]:
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or "unknown")
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo") if line.startswith("MemTotal:")), 0)
    gpu = f"{torch.cuda.get_device_name(0)} (driver {_driver()}, CUDA {torch.version.cuda})" if torch.cuda.is_available() else "none"
    return [("CPU", cpu), ("cores", f"{os.cpu_count()} ({len(os.sched_getaffinity(0))} usable by this process)"),
            ("RAM", f"{mem_kb / (1 << 20):.1f} GiB"), ("GPU", gpu), ("OS", platform.platform()),
            ("Python", platform.python_version()), ("torch", torch.__version__),
            ("isolation tier", f"{tier.name} ({tier.guarantees})")]


def _driver() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "unknown"


# ---------------------------------------------------------------- grading


def grade_folder(rubric: Rubric, folder: Path, tier: Tier, secret: str, **options) -> GradeRun:
    with tempfile.TemporaryDirectory() as scratch, Isolation(tier) as isolation:
        return grade(rubric, open_submission(folder, Path(scratch) / "submission"), secret=secret, isolation=isolation, **options)


def restricted(rubric: Rubric, keep) -> Rubric:
    """The rubric with only the cases `keep` accepts (components left empty are dropped)."""
    comps = [dataclasses.replace(c, cases=[k for k in c.cases if keep(k)]) for c in rubric.components]
    return dataclasses.replace(rubric, components=[c for c in comps if c.cases])


@contextlib.contextmanager
def counting(cls, method: str):
    """Count calls of cls.method while inside: requests to workers and worker starts, to price them."""
    original, count = getattr(cls, method), [0]

    def counted(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    setattr(cls, method, counted)
    try:
        yield count
    finally:
        setattr(cls, method, original)


def full_grades(rubric: Rubric, tier: Tier, runs: int) -> list[dict]:
    """Grade solutions/ in full `runs` times: wall time, the machine's and this process's busy CPU over it, per-component
    case seconds, requests and worker starts."""
    out = []
    for i in range(runs):
        with counting(Worker, "exchange") as requests, counting(Started, "__init__") as started, \
                counting(Template, "__init__") as templates, counting(Forked, "__init__") as forked:
            busy, own = _busy_cpu(), _own_cpu()
            run = grade_folder(rubric, SOLUTIONS, tier, f"bench-full-{i}")
            busy, own = _busy_cpu() - busy, _own_cpu() - own
        per_component = defaultdict(float)
        for r in run.results:
            per_component[r.case.component] += r.seconds
        out.append({"wall": run.seconds, "busy": busy, "own": own, "components": dict(per_component),
                    "requests": requests[0], "starts": started[0] + templates[0], "forks": forked[0],
                    "cases": {f"{r.case.number} [{r.case.component}] {r.case.name}": r.seconds for r in run.results},
                    "timing": sum(r.seconds for r in run.results if r.case.check in TIMING),
                    "score": sum(r.score for r in run.results), "max": sum(r.max_score for r in run.results)})
    return out


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker_startup(tier: Tier, runs: int = 5) -> tuple[float, float, float]:
    """Median seconds to start a worker from nothing and get its hello reply, to its first torch call, and to fork one
    from a template that is ready (the template's own start is one start from nothing)."""
    template = start_template(tier)
    hello, first_torch, forks = [], [], []
    try:
        for use in [None] * runs + [template] * (runs + 1):
            slot = Slot(SOLUTIONS, Forbidden(), Limits(), tier, template=use)
            try:
                started = time.perf_counter()
                slot.start()
                (forks if use else hello).append(time.perf_counter() - started)
                slot.proxy(Deadline.after(60)).torch.get_num_threads()
                if not use:
                    first_torch.append(time.perf_counter() - started)
            finally:
                slot.stop()
    finally:
        template.close()
    return median(hello), median(first_torch), median(forks[1:])  # the first fork waits for the template's imports


def call_overhead(tier: Tier, calls: int = 200) -> float:
    """Median seconds of a request that does nearly nothing in the worker: the price of one round trip."""
    slot = Slot(SOLUTIONS, Forbidden(), Limits(), tier)
    student = slot.proxy(Deadline.after(600))
    try:
        student.math.sqrt(4.0)  # the first request imports math; not a round trip's price
        seconds = []
        for _ in range(calls):
            started = time.perf_counter()
            student.math.sqrt(4.0)
            seconds.append(time.perf_counter() - started)
    finally:
        slot.stop()
    return median(seconds)


# ---------------------------------------------------------------- the timing verdict


@dataclass(frozen=True)
class Measured:
    """A graded timing case as the sections show it and gpu.json keeps it."""

    case: str  # its name
    passed: bool
    fraction: float
    seconds: float
    output: str
    extra: dict  # the verdict's: device, ratio, ci, pairs, memory_ratio...

    @classmethod
    def of(cls, result) -> Measured:
        return cls(result.case.name, result.passed, result.fraction, round(result.seconds, 2), result.output, result.extra)


def timing_runs(rubric: Rubric, folder: Path, tier: Tier, secrets: list[str]) -> dict[str, list[Measured]]:
    """Grade the timing cases of `rubric` on `folder` once per secret; each case's results, in order."""
    per_case = defaultdict(list)
    for secret in secrets:
        for r in grade_folder(rubric, folder, tier, secret).results:
            per_case[r.case.name].append(Measured.of(r))
    return per_case


def slowed_copy(dest: Path, case, k: int) -> Path:
    """solutions/ with the function that the timing case times computing its (correct) result k times."""
    file, name = timed_function(case)
    shutil.copytree(SOLUTIONS, dest)
    with open(dest / file, "a") as f:
        f.write(repeat_method(name, k) if "." in name else repeat_function(name, k))
    return dest


def timed_function(case) -> tuple[str, str]:
    if case.check == "lstm.speed":
        return "lstm.py", "lstm_forward"
    if case.check == "transformer.speed":
        return "transformer.py", "TransformerLM.forward"
    return "attention.py", {"sdpa": "scaled_dot_product_attention", "mhsa": "multi_head_self_attention"}[case.params["which"]]


def repeat_function(name: str, k: int) -> str:
    """Rebind `name` to call the original k times and return the last result (no earlier one is kept alive,
    so the variant allocates as the original does, only k times over)."""
    return (f"\n\n_{name}_once = {name}\n\n\n"
            f"def {name}(*args, **kwargs):\n"
            f"    for _ in range({k - 1}):\n"
            f"        _{name}_once(*args, **kwargs)\n"
            f"    return _{name}_once(*args, **kwargs)\n")


def repeat_method(dotted: str, k: int) -> str:
    """Rebind a module's forward to run forward and backward k - 1 times before the forward whose result it returns:
    its case times forward and backward, and repeating the forward alone would leave backward at 1x. The extra
    backward passes go through torch.autograd.grad, which leaves .grad alone and frees each graph at once, so the
    variant allocates as the original does (a mean of k forwards would keep k graphs: k times the peak memory)."""
    cls, method = dotted.split(".")
    return (f"\n\n_{method}_once = {cls}.{method}\n\n\n"
            f"def _{method}_{k}_times(self, *args):\n"
            f"    for _ in range({k - 1}):\n"
            f"        torch.autograd.grad(_{method}_once(self, *args).sum(), list(self.parameters()), allow_unused=True)\n"
            f"    return _{method}_once(self, *args)\n\n\n"
            f"{cls}.{method} = _{method}_{k}_times\n")


def slow_variants(rubric: Rubric, tier: Tier, scratch: Path) -> list[tuple[int, Measured]]:
    """(k, result) for each k and timing case: each variant graded on its own case only."""
    out = []
    for k in SLOWDOWNS:
        for case in (c for comp in rubric.components for c in comp.cases):
            folder = slowed_copy(scratch / f"{case.check}-{case.params.get('which')}-{k}", case, k)
            out += [(k, Measured.of(r)) for r in grade_folder(restricted(rubric, lambda c: c == case), folder, tier, "bench-slow").results]
    return out


def hungry_copy(dest: Path, kept: int) -> Path:
    """solutions/ whose multi_head_self_attention is correct but keeps `kept` extra (B, h, T, T) float32 tensors,
    each as large as its attention weights, alive until it returns: its peak memory grows by that much, its time
    by writing them."""
    shutil.copytree(SOLUTIONS, dest)
    with open(dest / "attention.py", "a") as f:
        f.write("\n\n_multi_head_self_attention_lean = multi_head_self_attention\n\n\n"
                "def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads, causal=True):\n"
                "    B, T, _ = x.shape\n"
                f"    kept = [torch.full((B, num_heads, T, T), float(i), device=x.device) for i in range({kept})]\n"
                "    out = _multi_head_self_attention_lean(x, W_q, W_k, W_v, W_o, num_heads, causal)\n"
                "    del kept\n"
                "    return out\n")
    return dest


def memory_variants(rubric: Rubric, tier: Tier, scratch: Path) -> list[tuple[int, Measured]]:
    """(kept, result) for each memory-hungry variant, graded on the multi_head_self_attention timing case only."""
    case = next(c for comp in rubric.components for c in comp.cases if c.check == "attention.speed" and c.params["which"] == "mhsa")
    return [(kept, Measured.of(r)) for kept in HUNGRY
            for r in grade_folder(restricted(rubric, lambda c: c == case), hungry_copy(scratch / f"hungry-{kept}", kept),
                                  tier, "bench-memory").results]


# ---------------------------------------------------------------- the reference against PyTorch


def interleaved_ratio(ours, builtin, sync, pairs: int, warmup: int = 10) -> tuple[float, float, float]:
    """Median over pairs of ours/builtin, alternating which goes first so drift hits both; also each one's median seconds."""
    for _ in range(warmup):
        ours(), builtin()
    times = {ours: [], builtin: []}
    for i in range(pairs):
        for fn in ((ours, builtin) if i % 2 else (builtin, ours)):
            sync()
            started = time.perf_counter()
            fn()
            sync()
            times[fn].append(time.perf_counter() - started)
    ratios = [a / b for a, b in zip(times[ours], times[builtin])]
    return median(ratios), median(times[ours]), median(times[builtin])


def timing_shapes(rubric: Rubric, key: str) -> dict[str, list[int]]:
    """The timing cases' shapes under `key` ("cpu" or "gpu"), by what they time: sdpa, mhsa, lstm, transformer."""
    return {c.params.get("which", c.check.split(".")[0]): c.params[key]
            for comp in rubric.components for c in comp.cases if c.check in TIMING}


def builtin_pairs(shapes: dict, device: str):
    """(name, shape, ours, builtin) at one device's shapes, each pair first checked to compute the same values."""
    ref = Reference(SOLUTIONS)
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)

    B, h, T, dk = shapes["sdpa"]
    Q, K, V = randn(B, h, T, dk), randn(B, h, T, dk), randn(B, h, T, dk)
    ours = lambda: ref.attention.scaled_dot_product_attention(Q, K, V)  # noqa: E731
    builtin = lambda: torch.nn.functional.scaled_dot_product_attention(Q, K, V)  # noqa: E731
    yield "scaled_dot_product_attention", f"(B, h, T, dk) = {(B, h, T, dk)}, no mask", *agreeing(ours, builtin, ours, builtin)

    B, T, I, H = shapes["lstm"]
    x, h0, c0 = randn(B, T, I), randn(B, H), randn(B, H)
    lstm = torch.nn.LSTM(I, H, batch_first=True).to(device).requires_grad_(False)  # the case times forward only
    lstm.bias_hh_l0.zero_()  # ours has one bias, b = bias_ih + bias_hh
    ours = lambda: ref.lstm.lstm_forward(x, h0, c0, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0)[0]  # noqa: E731
    builtin = lambda: lstm(x, (h0[None], c0[None]))[0]  # noqa: E731
    yield "lstm_forward vs nn.LSTM", f"(B, T, I, H) = {(B, T, I, H)}, forward", *agreeing(ours, builtin, ours, builtin)

    B, T, _, d, _, heads = shapes["transformer"]
    block = ref.transformer.TransformerBlock(d, heads, 4 * d, norm_first=True, causal=True).to(device)
    layer = encoder_layer_like(block, d, heads).to(device)
    xs = randn(B, T, d).requires_grad_()
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T, device=device)
    forward = lambda: block(xs)  # noqa: E731
    builtin_forward = lambda: layer(xs, src_mask=causal, is_causal=True)  # noqa: E731
    yield ("TransformerBlock vs nn.TransformerEncoderLayer",
           f"(B, T, d, heads) = {(B, T, d, heads)}, d_ff = {4 * d}, causal, forward and backward",
           *agreeing(forward, builtin_forward, lambda: forward().sum().backward(), lambda: builtin_forward().sum().backward()))


def agreeing(ours, builtin, timed_ours, timed_builtin):
    """(timed_ours, timed_builtin) once ours() and builtin() agree: a ratio between two different computations means nothing."""
    got, want = ours(), builtin()
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise AssertionError(f"the reference and the built-in differ by up to {(got - want).abs().max().item():.3g}")
    return timed_ours, timed_builtin


def encoder_layer_like(block, d: int, heads: int) -> torch.nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer holding the block's weights (pre-LN, exact GELU, no dropout, no biases)."""
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True,
                                             norm_first=True, bias=False)
    a = block.attn
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
        layer.self_attn.out_proj.weight.copy_(a.output_proj.weight)
        layer.linear1.weight.copy_(block.ffn.w1.weight)
        layer.linear2.weight.copy_(block.ffn.w2.weight)
    return layer  # its LayerNorms have weight 1 and no bias, as the block's start (bias 0)


def against_builtins(rubric: Rubric, pairs: int, devices: tuple[str, ...]) -> list[dict]:
    """Reference over built-in, single-threaded, at each device's timing shapes ("cpu" or "cuda"). In float32
    throughout: cuDNN's TF32 (on by default, used by nn.LSTM on a GPU) would time another computation."""
    threads, tf32 = torch.get_num_threads(), torch.backends.cudnn.allow_tf32
    torch.set_num_threads(1)  # as in a worker (OMP_NUM_THREADS=1)
    torch.backends.cudnn.allow_tf32 = False
    try:
        out = []
        for device in devices:
            sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
            for name, shape, ours, builtin in builtin_pairs(timing_shapes(rubric, "gpu" if device == "cuda" else "cpu"), device):
                ratio, ours_s, builtin_s = interleaved_ratio(ours, builtin, sync, pairs)
                out.append({"name": name, "device": device, "shape": shape, "ratio": ratio, "ours": ours_s, "builtin": builtin_s})
        return out
    finally:
        torch.set_num_threads(threads)
        torch.backends.cudnn.allow_tf32 = tf32


# ---------------------------------------------------------------- BENCHMARKS.md


def section_machine(rows, command: str, started: datetime.datetime, seconds: float) -> str:
    return "\n\n".join([
        "# Benchmarks",
        "Written by `benchmarks/run.py`; do not edit by hand. Run it again after changing the grader, the rubric or the "
        "reference solutions.",
        table(["", ""], [["command", f"`{command}`"], ["date", started.strftime("%Y-%m-%d %H:%M %Z").strip()],
                         ["duration", f"{seconds / 60:.1f} min"]] + [[k, v] for k, v in rows]),
    ])


SLOWEST = 8


def section_wall(grades: list[dict], startup: tuple[float, float], overhead: float) -> str:
    n = len(grades)
    comps = list(grades[0]["components"])
    cores = len(os.sched_getaffinity(0))
    wall, busy, own = (median([g[k] for g in grades]) for k in ("wall", "busy", "own"))
    starts, forks, requests = (median([g[k] for g in grades]) for k in ("starts", "forks", "requests"))
    timing = median([g["timing"] for g in grades])
    starting = starts * startup[0] + forks * startup[2]
    split = [["wall time of `grade`", f"{wall:.1f}", ""],
             [f"busy CPU of the whole machine over it (of {cores} cores x the wall time)", f"{busy:.1f}",
              f"{busy / (cores * wall):.0%}"],
             ["- of which the grader's own process (reference computations, comparisons, the wire)", f"{own:.1f}", f"{own / busy:.0%}"],
             [f"- of which start-ups: {starts:.0f} from nothing x {startup[0] * 1e3:.0f} ms (the template, the reference's worker, "
              f"a worker without torch), {forks:.0f} workers forked from the template x {startup[2] * 1e3:.0f} ms",
              f"{starting:.1f}", f"{starting / busy:.0%}"],
             ["- of which the workers' cases (the rest)", f"{busy - own - starting:.1f}", f"{(busy - own - starting) / busy:.0%}"],
             [f"timing cases ({', '.join(sorted(TIMING))}), each alone on the machine", f"{timing:.1f}", f"{timing / wall:.0%} of the wall"],
             [f"request round trips ({requests:.0f} requests x {overhead * 1e6:.0f} us)", f"{requests * overhead:.2f}",
              f"{requests * overhead / wall:.0%} of the wall"]]
    per_comp = [[c] + [f"{g['components'][c]:.1f}" for g in grades] + [f"{median([g['components'][c] for g in grades]):.1f}"]
                for c in comps]
    biggest = max(comps, key=lambda c: median([g["components"][c] for g in grades]))
    big = median([g["components"][biggest] for g in grades])
    scores = sorted({f"{g['score']:g}/{g['max']:g}" for g in grades})
    slowest = sorted(grades[0]["cases"], key=lambda c: -median([g["cases"][c] for g in grades]))[:SLOWEST]
    slow_rows = [[c, f"{median([g['cases'][c] for g in grades]):.2f}"] for c in slowest]
    idle = cores * wall - busy
    return "\n\n".join([
        "## 1. Grading the reference submission",
        f"`autograder.runner.grade` on `solutions/`, every component and case, {n} runs (medians where one figure is given; "
        "the tier is chosen once beforehand, as the command line does). "
        f"Score: {', '.join(scores)}.",
        table(["", "seconds", "share"], split),
        "Seconds in each component's cases (its lane's time, waits for the other lane's timing cases included):",
        table(["component"] + [f"run {i + 1}" for i in range(n)] + ["median"], per_comp),
        f"Where the seconds go: the {SLOWEST} slowest cases (median seconds).",
        table(["case", "seconds"], slow_rows),
        table(["worker", "median"], [["start from nothing and hello reply, numpy and torch imported (5 starts)", f"{startup[0] * 1e3:.0f} ms"],
                                     ["start from nothing to the answer of a first torch call", f"{startup[1] * 1e3:.0f} ms"],
                                     ["fork from a ready template and hello reply (5 forks)", f"{startup[2] * 1e3:.1f} ms"],
                                     ["round trip of a trivial request (`math.sqrt(4.0)`, 200 calls)",
                                      f"{overhead * 1e6:.0f} us"]]),
        f"Reading: grading the reference takes {wall:.1f} s. Components are graded on two lanes at once, each worker "
        "started ahead on a starter thread, so the wall time is set by CPU: the machine was busy "
        f"{busy:.1f} core-seconds of the {cores * wall:.1f} there were, and the {idle:.1f} idle ones are mostly the "
        f"timing cases ({timing:.1f} s), which run alone while the other lane waits. Of the busy time, start-ups "
        f"are {starting / busy:.0%} ({starts:.0f} processes start from nothing: the template of the submission's workers, which "
        f"imports torch once for them, the reference's worker, and a worker whose component forbids torch; {forks:.0f} "
        f"workers fork from the template) and the grader's own process {own / busy:.0%}. "
        f"`{biggest}` is the largest component ({big:.1f} s of its lane). "
        f"Round trips are cheap: {requests:.0f} requests at {overhead * 1e6:.0f} us each.",
    ])


def stability_table(per_case: dict[str, list[Measured]]) -> str:
    """Per case: ratio, interval width and pairs over the runs, and the peak-memory ratio where one was measured (a GPU)."""
    memory = any(r.extra.get("memory_ratio") is not None for results in per_case.values() for r in results)
    rows = []
    for name, results in per_case.items():
        ratios = [r.extra["ratio"] for r in results if "ratio" in r.extra]
        widths = [r.extra["ci"][1] - r.extra["ci"][0] for r in results if "ci" in r.extra]
        pairs = [r.extra["pairs"] for r in results if "pairs" in r.extra]
        peaks = [r.extra["memory_ratio"] for r in results if r.extra.get("memory_ratio") is not None]
        full = sum(r.passed and r.fraction == 1 for r in results)
        rows.append([name] + [f"{min(v):.2f} / {median(v):.2f} / {max(v):.2f}" if v else "-" for v in (ratios, widths)]
                    + [f"{min(pairs)} / {median(pairs):g} / {max(pairs)}" if pairs else "-"]
                    + ([f"{min(peaks):.2f} / {max(peaks):.2f}" if peaks else "-"] if memory else [])
                    + [f"{median([r.seconds for r in results]):.1f}", f"{full}/{len(results)}"])
    return table(["case", "ratio min / median / max", "interval width min / median / max", "pairs min / median / max"]
                 + (["peak memory ratio min / max"] if memory else []) + ["seconds (median)", "full marks"], rows)


def section_stability(per_case: dict[str, list[Measured]], policy: Policy) -> str:
    runs = max(len(v) for v in per_case.values())
    return "\n\n".join([
        "## 2. Stability of the timing verdict",
        f"The reference graded as a student, timing cases only, {runs} runs with a different `secret` each "
        "(the timing cases are visible, so their inputs and random pair order come from the public seed and do not "
        "change with the secret: the runs differ by measurement noise and by the fresh workers). "
        "Ratio = student time / reference time; the interval is the 95% bootstrap interval of the median.",
        stability_table(per_case),
        stability_reading(per_case, policy),
    ])


def stability_reading(per_case: dict[str, list[Measured]], policy: Policy) -> str:
    verdicts = [r for results in per_case.values() for r in results]
    full = sum(r.passed and r.fraction == 1 for r in verdicts)
    timed = [r for r in verdicts if "ratio" in r.extra]
    far = max(timed, key=lambda r: abs(math.log(r.extra["ratio"])))
    # A spread across runs wider than a typical interval is not pair-to-pair noise: each run has fresh workers.
    wide = [name for name, results in per_case.items() if len(results) > 1 and all("ci" in r.extra for r in results)
            and spread(results) > median([r.extra["ci"][1] - r.extra["ci"][0] for r in results])]
    text = (f"Reading: identical code should measure 1.00 and earn full marks (ratio up to {policy.full_until:g}); "
            f"{full} of {len(verdicts)} verdicts did. The ratio furthest from 1.00 was {far.extra['ratio']:.2f} "
            f"({far.case}). ")
    if wide:
        return text + (f"In {len(wide)} of {len(per_case)} cases ({'; '.join(wide)}) the ratios spread across runs by more "
                       "than a typical interval's width: an interval describes one run, with its pair of fresh "
                       "workers, and what changes between runs (the workers, the machine's state) is not averaged "
                       "away by more pairs.")
    return text + "Every case's ratios stayed within a typical interval's width across runs."


def spread(results) -> float:
    ratios = [r.extra["ratio"] for r in results]
    return max(ratios) - min(ratios)


VARIANTS = ("Copies of `solutions/` where the timed function computes its correct result k times: a wrapper calls "
            "`scaled_dot_product_attention`, `multi_head_self_attention` or `lstm_forward` k times and returns the last "
            "result; `TransformerLM.forward` first runs forward and backward k - 1 times (through `torch.autograd.grad`, "
            "which leaves the gradients alone), so that backward, also timed, runs k times too. Each variant is graded "
            "on its own timing case only. \"at k\" is what the policy gives a ratio of exactly k.")


def variants_table(results: list[tuple[int, Measured]], policy: Policy) -> str:
    memory = any(r.extra.get("memory_ratio") is not None for _, r in results)
    rows = [[r.case, f"{k}x", f"{r.extra['ratio']:.2f}" if "ratio" in r.extra else "-",
             "{:.2f}-{:.2f}".format(*r.extra["ci"]) if "ci" in r.extra else "-", r.extra.get("pairs", "-")]
            + ([_memory(r)] if memory else [])
            + [f"{r.fraction:.0%}" if r.passed else f"failed: {r.output[:80]}", f"{expected_fraction(k, policy):.0%}"]
            for k, r in results]
    return table(["case", "slowdown", "ratio", "95% interval", "pairs"] + (["peak memory ratio"] if memory else [])
                 + ["points", "at k"], rows)


def _memory(r: Measured) -> str:
    return "-" if r.extra.get("memory_ratio") is None else f"{r.extra['memory_ratio']:.2f}"


def section_variants(results: list[tuple[int, Measured]], policy: Policy) -> str:
    return "\n\n".join([
        "## 3. Deliberately slower variants", VARIANTS, variants_table(results, policy), variants_reading(results, policy),
    ] if results else ["## 3. Deliberately slower variants", "Skipped (`--skip-slow-variants`)."])


def variants_reading(results: list[tuple[int, Measured]], policy: Policy) -> str:
    timed = [(k, r) for k, r in results if "ratio" in r.extra]
    off = [(k, r) for k, r in timed if abs(r.fraction - expected_fraction(k, policy)) > 0.1]
    scale = [r.extra["ratio"] / k for k, r in timed]
    text = (f"Reading: with full marks up to {policy.full_until:g}x and none from {policy.zero_at:g}x, a 2x variant "
            f"should earn {expected_fraction(2, policy):.0%} and a 5x one nothing. Measured ratio / k ranged "
            f"{min(scale):.2f}-{max(scale):.2f}: below 1 because each timed call also reduces its outputs (and, for "
            "the Transformer, every parameter's gradient) to checksums in the worker, a cost both sides pay once per "
            "call however slow the function is. ")
    if not off:
        return text + "Every variant earned within 10 points of the share a ratio of exactly k would."
    worst = max(off, key=lambda kr: abs(kr[1].fraction - expected_fraction(kr[0], policy)))
    return text + (f"{len(off)} of {len(timed)} variants earned more than 10 points away from the share a ratio of "
                   "exactly k would, the furthest "
                   f"{worst[1].case} at {worst[0]}x: measured {worst[1].extra['ratio']:.2f}, "
                   f"{worst[1].fraction:.0%} of the points{_memory_cost(worst[1], policy)}.")


def _memory_cost(r: Measured, policy: Policy) -> str:
    """What the peak-memory check took, when it took the points."""
    memory = r.extra.get("memory_ratio")
    if memory is None or memory <= policy.memory_ratio:
        return ""
    return f", for its peak memory ({memory:.2f}x the reference's, limit {policy.memory_ratio:g}x)"


def expected_fraction(ratio: float, policy: Policy) -> float:
    """The share of points the policy gives a measured ratio of exactly `ratio`."""
    return verdict(ratio, ratio, ratio, 0, None, policy, {}).fraction


def section_builtins(results: list[dict], pairs: int) -> str:
    if not results:
        return "## 4. The reference against PyTorch's built-ins\n\nSkipped (`--skip-builtins`)."
    return "\n\n".join(["## 4. The reference against PyTorch's built-ins", *builtins_parts(results, pairs)])


def builtins_parts(results: list[dict], pairs: int) -> list[str]:
    """How the pairs were timed, their table and its reading."""
    rows = [[r["name"], r["device"], r["shape"], f"{r['ours'] * 1e3:.3f}", f"{r['builtin'] * 1e3:.3f}", f"{r['ratio']:.2f}"]
            for r in results]
    slowest = max(results, key=lambda r: r["ratio"])
    fastest = min(results, key=lambda r: r["ratio"])
    return [
        f"In this process, `torch.set_num_threads(1)`, at the timing cases' shapes from grading.yaml; reference and "
        f"built-in calls alternate (which goes first alternates too), ratio = median over {pairs} pairs of reference "
        "time / built-in time. The LSTM pair uses the same weights (`bias_hh` zeroed, as ours has one bias); the block "
        "pair copies the block's weights into `nn.TransformerEncoderLayer(norm_first=True, activation=\"gelu\", "
        "dropout=0, batch_first=True, bias=False)` and passes a causal mask. Each pair's outputs are checked to agree "
        "before it is timed.",
        table(["pair", "device", "shape", "reference ms", "built-in ms", "ratio"], rows),
        f"Reading: students are timed against the reference, not against these built-ins, so a ratio above 1 is "
        f"how much faster than the reference the same computation can run ({'in one thread' if all(r['device'] == 'cpu' for r in results) else 'on that device'}). The largest gap is "
        f"{slowest['name']} on {slowest['device']} ({slowest['ratio']:.2f}x), the smallest {fastest['name']} on "
        f"{fastest['device']} ({fastest['ratio']:.2f}x). Such gaps decide how far below 1.0 a careful student's ratio "
        f"can go; nothing is flagged until {1 / Policy.flag_below:g}x faster than the reference.",
    ]


# ---------------------------------------------------------------- on a GPU


def probe(rubric: Rubric, tier: Tier) -> dict:
    """Whether the GPU reaches the workers inside the tier's walls: what the grader sees, the device the timing
    cases will use (Speed asks the reference's worker) and, as a student's code would, a worker of a student uid."""
    found = {"grader": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    reference = reference_slot(rubric.solutions_dir, tier, Limits())
    speed = Speed(rubric.timing, reference, tier)
    try:
        found.update(timing_device=speed.device, device_name=speed.device_name, unseen=speed.unseen)
    finally:
        reference.stop()
    slot = Slot(SOLUTIONS, Forbidden(), Limits(), tier.with_id(0))
    try:
        student = slot.proxy(Deadline.after(120))
        ones = student.call(student.torch.ones, 1024, device="cuda")
        found["student_worker"] = "cuda" if float(ones.sum()) == 1024 else f"wrong sum {float(ones.sum())}"
    except Ended as exc:
        found["student_worker"] = f"cannot compute on cuda: {str(exc)[:300]}"
    finally:
        slot.stop()
    found["ok"] = found["timing_device"] == "cuda" and found["student_worker"] == "cuda"
    return found


def code_digest() -> str:
    """sha256 of what the figures depend on: the grader's package, the solutions and grading.yaml."""
    digest = hashlib.sha256()
    for path in sorted([*(ROOT / "autograder").rglob("*.py"), *SOLUTIONS.rglob("*.py"), ROOT / "grading.yaml"]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _commit() -> str:
    """The commit measured: $AUTOGRADER_COMMIT (a copy of the tree without .git, as on a lent GPU machine), else git's."""
    if os.environ.get("AUTOGRADER_COMMIT"):
        return os.environ["AUTOGRADER_COMMIT"]
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def gpu_figures(rubric: Rubric, tier: Tier, found: dict, runs: int, pairs: int, command: str, save, log) -> dict:
    """Section 6 measured on this machine's GPU, as plain data, passed to `save` after each part: a run cut short
    keeps what it measured, and a part that fails records its error and leaves the others to run."""
    started, clock = datetime.datetime.now().astimezone(), time.monotonic()
    timing_rubric = restricted(rubric, lambda c: c.check in TIMING)
    figures = {"measured": {"command": command, "date": started.strftime("%Y-%m-%d %H:%M %Z").strip(), "commit": _commit(),
                            "code_sha256": code_digest(), "minutes": 0.0, "complete": False},
               "machine": machine(tier), "workers": found, "policy": asdict(rubric.timing)}
    with tempfile.TemporaryDirectory() as scratch:
        parts = [
            ("stability", lambda: {name: [asdict(m) for m in results] for name, results in
                                   timing_runs(timing_rubric, SOLUTIONS, tier, [f"bench-gpu-{i}" for i in range(runs)]).items()}),
            ("memory", lambda: [[kept, asdict(m)] for kept, m in memory_variants(timing_rubric, tier, Path(scratch))]),
            ("batch", lambda: class_runs(rubric, GPU_CLASS, None, Path(scratch) / "class", loop=False)),
            ("variants", lambda: [[k, asdict(m)] for k, m in slow_variants(timing_rubric, tier, Path(scratch))]),
            ("builtins", lambda: {"pairs": pairs, "results": against_builtins(rubric, pairs, ("cuda",))}),
        ]
        for name, measure in parts:
            log(f"GPU: {name}")
            try:
                figures[name] = measure()
            except Exception:
                traceback.print_exc()
                figures[name] = {"error": traceback.format_exc().strip().splitlines()[-1]}
            figures["measured"]["minutes"] = round((time.monotonic() - clock) / 60, 2)
            save(figures)
    figures["measured"]["complete"] = True
    save(figures)
    return figures


def load_gpu(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def section_gpu(figures: dict | None) -> str:
    """Section 6 from gpu.json's figures, or that none were measured."""
    if figures is None:
        return "\n\n".join([GPU_SECTION, "Unmeasured: no GPU was available. `benchmarks/device.sh`, run on a machine with "
                              "one, measures this section into `benchmarks/gpu.json`; once that file is committed, every "
                              "bench run shows it here."])
    m, policy = figures["measured"], Policy(**figures["policy"])
    same = m["code_sha256"] == code_digest()
    workers = figures["workers"]
    rows = [*figures["machine"], ("timing device (the reference's worker)", f"{workers['timing_device']}: {workers['device_name']}"),
            ("a worker of a student uid", workers["student_worker"])]
    return "\n\n".join([
        GPU_SECTION,
        f"Measured by `{m['command']}` on {m['date']} in {m['minutes']:.1f} min, commit {m['commit']}"
        f"{'' if m['complete'] else ' (the run ended early: what it did not reach is marked)'}; the figures live in "
        "`benchmarks/gpu.json`, from which every bench run renders this section. "
        + (f"{m['note']} " if m.get("note") else "")
        + ("The grader's package, the solutions and grading.yaml are as they were then." if same else
           "The grader's package, the solutions or grading.yaml have changed since: run `benchmarks/device.sh` on a GPU "
           "again for figures of this code."),
        table(["", ""], [list(r) for r in rows]),
        "### Stability of the verdict",
        f"As section 2, on the GPU shapes of grading.yaml: the reference graded as a student, timing cases only. "
        "Peak memory ratio = the student's largest peak GPU memory in a block (`torch.cuda.max_memory_allocated` above "
        f"what was allocated before it) over the reference's; beyond {policy.memory_ratio:g}x it costs the points.",
        *_part(figures, "stability", lambda per_case: [stability_table(per_case), stability_reading(per_case, policy)],
               lambda d: {name: [Measured(**r) for r in results] for name, results in d.items()}),
        "### Peak memory",
        "Copies of `solutions/` whose `multi_head_self_attention` is correct but keeps k extra (B, h, T, T) float32 "
        "tensors, each as large as its attention weights, alive until it returns; graded on its timing case only.",
        *_part(figures, "memory", lambda results: memory_parts(results, policy), _pairs),
        "### Deliberately slower variants",
        VARIANTS,
        *_part(figures, "variants", lambda results: [variants_table(results, policy), variants_reading(results, policy)], _pairs),
        "### The reference against PyTorch's built-ins",
        *_part(figures, "builtins", lambda d: builtins_parts(d["results"], d["pairs"]), lambda d: d),
        "### A batch with GPU timing slots",
        f"As section 5, without the loop: {GPU_CLASS} submissions graded by `grade-all` on the local backend (every core "
        "a job; timing cases one at a time on the machine), then by `grade-all --backend ray` on an embedded Ray, whose "
        "timing parts each hold the GPU (`num_gpus=1`) while correctness parts run on the CPUs.",
        *_part(figures, "batch", class_parts, lambda d: d),
    ])


def _pairs(data: list) -> list[tuple[int, Measured]]:
    return [(k, Measured(**r)) for k, r in data]


def _part(figures: dict, name: str, render, load) -> list[str]:
    """A measured part of section 6, or why it is missing."""
    data = figures.get(name)
    if data is None:
        return ["Not measured: the run ended before this part."]
    if isinstance(data, dict) and "error" in data:
        return [f"Not measured: the part failed ({data['error']}); `benchmarks/device.sh`'s log has the traceback."]
    return render(load(data))


def memory_parts(results: list[tuple[int, Measured]], policy: Policy) -> list[str]:
    rows = [[kept, _memory(r), f"{r.extra['ratio']:.2f}" if "ratio" in r.extra else "-",
             f"{r.fraction:.0%}" if r.passed else f"failed: {r.output[:80]}"] for kept, r in results]
    over = [r for _, r in results if (r.extra.get("memory_ratio") or 0) > policy.memory_ratio]
    caught = [r for r in over if r.passed and r.fraction == 0 and "peak GPU memory" in r.output]
    return [table(["extra (B, h, T, T) tensors", "peak memory ratio", "time ratio", "points"], rows),
            f"Reading: beyond {policy.memory_ratio:g}x the reference's peak memory a correct variant earns nothing, however "
            f"fast; {len(over)} of {len(results)} variants measured beyond it, and {len(caught)} of those earned nothing "
            "with feedback naming the peak memory. The others kept what their time earned."]


# ---------------------------------------------------------------- the class report


def report_section(rubric: Rubric, size: int, root: Path | None, command: str, started: datetime.datetime, log) -> str:
    """Section 7 measured now (benchmarks/class_report.py), saying by what command, when and on which commit: it may
    be rewritten alone (--only-report), after the rest of the file."""
    log(f"the class report at {size} submissions")
    clock = time.monotonic()
    figures = class_report.run(size, root, log, rubric)
    measured = (f"Measured by `{command}` on {started.strftime('%Y-%m-%d %H:%M %Z').strip()}, commit {_commit()}, in "
                f"{(time.monotonic() - clock) / 60:.1f} min.")
    return class_report.section(figures, measured)


def walls_section(rubric: Rubric, timing_rubric: Rubric, tier: Tier, runs: int, command: str, started: datetime.datetime, log) -> str:
    """Section 8 measured now (benchmarks/walls.py): it may be rewritten alone (--only-walls)."""
    clock = time.monotonic()
    figures = walls.run(rubric, tier, grade_folder, timing_rubric, runs, log)
    measured = (f"Measured by `{command}` on {started.strftime('%Y-%m-%d %H:%M %Z').strip()}, commit {_commit()}, in "
                f"{(time.monotonic() - clock) / 60:.1f} min.")
    return walls.section(figures, measured)


def mutants_section(rubric: Rubric, tier: Tier, runs: int, command: str, started: datetime.datetime, log) -> str:
    """Section 9 measured now (benchmarks/mutants.py): it may be rewritten alone (--only-mutants)."""
    clock = time.monotonic()
    figures = mutants.run(rubric, tier, grade_folder, runs, log)
    measured = (f"Measured by `{command}` on {started.strftime('%Y-%m-%d %H:%M %Z').strip()}, commit {_commit()}, in "
                f"{(time.monotonic() - clock) / 60:.1f} min.")
    return mutants.section(figures, measured)


def commands_section(runs: int, rows: str | None, command: str, started: datetime.datetime, log) -> tuple[str, list[str]]:
    """Section 12 measured now (benchmarks/commands.py), and its failures: it may be rewritten alone (--only-commands)."""
    clock = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-commands-") as scratch:
        figures = commands.run(Path(scratch), log, runs, rows)
    measured = (f"Measured by `{command}` on {started.strftime('%Y-%m-%d %H:%M %Z').strip()}, commit {_commit()} (after), in "
                f"{(time.monotonic() - clock) / 60:.1f} min.")
    return commands.section(figures, measured), figures["failures"]


def failed(failures: list[str], log) -> None:
    """A command that failed on the solutions' files fails the bench, after its section is written."""
    if failures:
        for line in failures:
            log(f"FAILED: {line}")
        raise SystemExit(1)


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timing-only grades of the reference (section 2; default 5)")
    parser.add_argument("--full-runs", type=int, default=3, help="full grades of the reference (section 1; default 3)")
    parser.add_argument("--pairs", type=int, default=200, help="interleaved pairs per built-in comparison (default 200)")
    parser.add_argument("--skip-slow-variants", action="store_true", help="leave out section 3")
    parser.add_argument("--skip-builtins", action="store_true", help="leave out section 4")
    parser.add_argument("--class-size", type=int, default=40, help="submissions in the class of section 5 (0: leave it out)")
    parser.add_argument("--out", type=Path, help="where to write (default BENCHMARKS.md; with --gpu-only, required and "
                        "another file: section 6 alone)")
    parser.add_argument("--gpu-only", action="store_true", help="measure section 6 only, on this machine's GPU, into "
                        "--gpu-json (status 3, nothing written, when the workers see no GPU)")
    parser.add_argument("--gpu-json", type=Path, default=GPU_JSON, help="section 6's figures: written by --gpu-only, "
                        "rendered by every run (default benchmarks/gpu.json)")
    parser.add_argument("--refresh-gpu-section", action="store_true", help="measure nothing: write section 6 of --out "
                        "again from --gpu-json, keeping the others")
    parser.add_argument("--report-size", type=int, default=class_report.SIZE, help="submissions in the class whose report "
                        f"section 7 measures (default {class_report.SIZE}; 0: leave it out)")
    parser.add_argument("--report-dir", type=Path, help="build section 7's class here, and keep it (default: a temporary "
                        "folder)")
    parser.add_argument("--only-report", action="store_true", help="measure section 7 only, and rewrite it in --out in "
                        "place, keeping the other sections")
    parser.add_argument("--walls-runs", type=int, default=3, help="grades each way of section 8 (default 3; 0: leave it out)")
    parser.add_argument("--only-walls", action="store_true", help="measure section 8 only, and rewrite it in --out in place, "
                        "keeping the other sections")
    parser.add_argument("--mutants-runs", type=int, default=3, help="full grades each way of section 9 (default 3; 0: leave "
                        "it out)")
    parser.add_argument("--only-mutants", action="store_true", help="measure section 9 only, and rewrite it in --out in "
                        "place, keeping the other sections")
    parser.add_argument("--only-export", action="store_true", help="measure section 10 only (an export of 2,000 submissions, "
                        "10 damaged: the plan and a sample graded), and rewrite it in --out in place")
    parser.add_argument("--only-regrade", action="store_true", help="measure section 11 only (a one-case fix regraded against "
                        "a full regrade), and rewrite it in --out in place")
    parser.add_argument("--commands-runs", type=int, default=commands.RUNS, help="runs of each command of section 12, "
                        f"before and after (default {commands.RUNS}; 0: leave it out)")
    parser.add_argument("--commands-rows", help="section 12's rows to measure: comma-separated patterns of their keys "
                        f"({', '.join(r.key for r in commands.ROWS)}; e.g. 'version,check:*'; default all)")
    parser.add_argument("--only-commands", action="store_true", help="measure section 12 only (each command typed, before "
                        "and after), and rewrite it in --out in place; status 1 when a command failed")
    parser.add_argument("--probe", action="store_true", help="say whether the workers see the GPU, and stop (status 3 "
                        "when they do not)")
    args = parser.parse_args(argv)
    benchmarks_md = BENCHMARKS_MD
    if args.gpu_only and (args.out is None or args.out.resolve() == benchmarks_md):
        parser.error("--gpu-only writes section 6 alone: give it an --out other than BENCHMARKS.md, whose other sections it would lose")
    out = args.out or benchmarks_md

    started, clock = datetime.datetime.now().astimezone(), time.monotonic()
    command = shlex.join([os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable,
                          *sys.argv])
    rubric = load_rubric(ROOT / "grading.yaml")
    timing_rubric = restricted(rubric, lambda c: c.check in TIMING)
    if args.refresh_gpu_section:
        out.write_text(replace_section(out.read_text(), GPU_SECTION, section_gpu(load_gpu(args.gpu_json)), before=class_report.SECTION))
        return

    def log(what: str) -> None:
        print(f"[{time.monotonic() - clock:4.0f} s] {what}", flush=True)

    if args.only_report:
        report = report_section(rubric, args.report_size or class_report.SIZE, args.report_dir, command, started, log)
        text = out.read_text() if out.exists() else "# Benchmarks\n"
        out.write_text(replace_section(text, class_report.SECTION, report))
        log(f"wrote section 7 of {out}")
        return
    if args.only_commands:
        section, failures = commands_section(args.commands_runs or commands.RUNS, args.commands_rows, command, started, log)
        text = out.read_text() if out.exists() else "# Benchmarks\n"
        out.write_text(replace_section(text, commands.SECTION, section))
        log(f"wrote section 12 of {out}")
        failed(failures, log)
        return
    tier = choose_tier(grader_files(rubric.path.parent, rubric.solutions_dir, []))
    if args.only_walls:
        section = walls_section(rubric, timing_rubric, tier, args.walls_runs or 3, command, started, log)
        text = out.read_text() if out.exists() else "# Benchmarks\n"
        out.write_text(replace_section(text, walls.SECTION, section))
        log(f"wrote section 8 of {out}")
        return
    for asked, module, number in ((args.only_export, export_batch, 10), (args.only_regrade, regrade, 11)):
        if asked:
            clock_alone = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
                figures = module.run(Path(scratch), log)
            measured = (f"Measured by `{command}` on {started.strftime('%Y-%m-%d %H:%M %Z').strip()}, commit {_commit()}, in "
                        f"{(time.monotonic() - clock_alone) / 60:.1f} min.")
            text = out.read_text() if out.exists() else "# Benchmarks\n"
            out.write_text(replace_section(text, module.SECTION, module.section(figures, measured)))
            log(f"wrote section {number} of {out}")
            return
    if args.only_mutants:
        section = mutants_section(rubric, tier, args.mutants_runs or 3, command, started, log)
        text = out.read_text() if out.exists() else "# Benchmarks\n"
        out.write_text(replace_section(text, mutants.SECTION, section))
        log(f"wrote section 9 of {out}")
        return

    if args.probe or args.gpu_only:
        log(f"isolation tier: {tier.name}; do the workers see the GPU?")
        found = probe(rubric, tier)
        log(json.dumps(found))
        if not found["ok"]:
            log("the timing workers see no GPU: nothing measured")
            raise SystemExit(3)
        if args.probe:
            return
    if args.gpu_only:
        def save(figures: dict) -> None:
            args.gpu_json.write_text(json.dumps(figures, indent=1) + "\n")
            out.write_text(f"# Benchmarks on a GPU\n\n{section_gpu(figures)}\n")

        gpu_figures(rubric, tier, found, args.runs, args.pairs, command, save, log)
        log(f"wrote {args.gpu_json} and {out}")
        return

    log(f"isolation tier: {tier.name}; full grades x {args.full_runs}")
    grades = full_grades(rubric, tier, args.full_runs)
    log("worker start-up and round trips")
    startup, overhead = worker_startup(tier), call_overhead(tier)
    log(f"timing verdict x {args.runs}")
    per_case = timing_runs(timing_rubric, SOLUTIONS, tier, [f"bench-{i}" for i in range(args.runs)])
    variants = []
    if not args.skip_slow_variants:
        log("slower variants")
        with tempfile.TemporaryDirectory() as scratch:
            variants = slow_variants(timing_rubric, tier, Path(scratch))
    log("built-ins")
    against = [] if args.skip_builtins else against_builtins(rubric, args.pairs, ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",))
    klass = None
    if args.class_size:
        log(f"a class of {args.class_size}")
        with tempfile.TemporaryDirectory() as scratch:
            klass = class_runs(rubric, args.class_size, len(os.sched_getaffinity(0)), Path(scratch))
    report = (report_section(rubric, args.report_size, args.report_dir, command, started, log) if args.report_size
              else class_report.section(None))
    walled = (walls_section(rubric, timing_rubric, tier, args.walls_runs, command, started, log) if args.walls_runs
              else walls.section(None, ""))
    mutated = (mutants_section(rubric, tier, args.mutants_runs, command, started, log) if args.mutants_runs
               else mutants.section(None, ""))
    typed, failures = (commands_section(args.commands_runs, args.commands_rows, command, started, log) if args.commands_runs
                       else (f"{commands.SECTION}\n\nNot measured in this run (`--commands-runs 0`).", []))

    text = "\n\n".join([section_machine(machine(tier), command, started, time.monotonic() - clock),
                        section_wall(grades, startup, overhead), section_stability(per_case, rubric.timing),
                        section_variants(variants, rubric.timing), section_builtins(against, args.pairs),
                        section_class(klass), section_gpu(load_gpu(args.gpu_json)), report, walled, mutated, typed])
    before = out.read_text() if out.exists() else ""
    for kept in (export_batch, regrade):  # measured by their own --only-* runs alone: kept as they were, before section 12
        text = replace_section(text, kept.SECTION, section_of(before, kept.SECTION) or f"{kept.SECTION}\n\nNot measured yet.",
                               before=commands.SECTION)
    out.write_text(text.rstrip("\n") + "\n")
    log(f"wrote {out}")
    failed(failures, log)


if __name__ == "__main__":
    main()
