"""Benchmarks of the grader on this machine; (re)writes BENCHMARKS.md.

    .venv/bin/python benchmarks/run.py                  # everything: about 20 minutes on 2 cores
    .venv/bin/python benchmarks/run.py --runs 10        # more repetitions of the timing verdict
    .venv/bin/python benchmarks/run.py --skip-slow-variants --skip-builtins --class-size 0 --out /tmp/b.md

Five measurements, each a section of the file: how long grading the reference
takes and where the time goes; how stable the timing verdict is when the
reference is graded as a student; how deliberately slower (correct) variants
are scored; the reference solutions against PyTorch's built-ins, in-process;
and a class of submissions graded one by one and with `grade-all`.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import datetime
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
from collections import Counter, defaultdict
from pathlib import Path
from statistics import median

import torch

from autograder.cases import TIMING
from autograder.rubric import Rubric, load_rubric
from autograder.reference import Reference
from autograder.runner import GradeRun, grade
from autograder.sandbox.host.process import Deadline, Forked, Limits, Started, Worker, start_template
from autograder.sandbox.host.proxy import Slot
from autograder.sandbox.host.template import Template
from autograder.sandbox.host.tiers import Isolation, Tier, choose_tier, grader_files
from autograder.submission import open_submission
from autograder.timing import Policy, verdict
from autograder.verify import load_mistakes, write_variant

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
SLOWDOWNS = (2, 5)


# ---------------------------------------------------------------- the machine


def machine(tier: Tier) -> list[tuple[str, str]]:
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or "unknown")
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo") if line.startswith("MemTotal:")), 0)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return [("CPU", cpu), ("cores", f"{os.cpu_count()} ({len(os.sched_getaffinity(0))} usable by this process)"),
            ("RAM", f"{mem_kb / (1 << 20):.1f} GiB"), ("GPU", gpu), ("OS", platform.platform()),
            ("Python", platform.python_version()), ("torch", torch.__version__),
            ("isolation tier", f"{tier.name} ({tier.guarantees})")]


def _read(path: str) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []


# ---------------------------------------------------------------- grading


def grade_folder(rubric: Rubric, folder: Path, tier: Tier, secret: str) -> GradeRun:
    with tempfile.TemporaryDirectory() as scratch, Isolation(tier) as isolation:
        return grade(rubric, open_submission(folder, Path(scratch) / "submission"), secret=secret, isolation=isolation)


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


def _busy_cpu() -> float:
    """Core-seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    ticks = [int(x) for x in _read("/proc/stat")[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


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
            slot = Slot(SOLUTIONS, [], [], Limits(), tier, template=use)
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
    slot = Slot(SOLUTIONS, [], [], Limits(), tier)
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


def timing_runs(rubric: Rubric, folder: Path, tier: Tier, secrets: list[str]) -> dict[str, list]:
    """Grade the timing cases of `rubric` on `folder` once per secret; each case's results, in order."""
    per_case = defaultdict(list)
    for secret in secrets:
        for r in grade_folder(rubric, folder, tier, secret).results:
            per_case[r.case.name].append(r)
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
    """Rebind a module's forward to the mean of k identical forwards. Its case times forward and backward:
    a mean makes backward run k times too, where keeping the last result would repeat the forward pass only."""
    cls, method = dotted.split(".")
    return (f"\n\n_{method}_once = {cls}.{method}\n\n\n"
            f"def _{method}_{k}_times(self, *args):\n"
            f"    return sum(_{method}_once(self, *args) for _ in range({k})) / {k}\n\n\n"
            f"{cls}.{method} = _{method}_{k}_times\n")


def slow_variants(rubric: Rubric, tier: Tier, scratch: Path) -> list[tuple[int, object]]:
    """(k, result) for each k and timing case: each variant graded on its own case only."""
    out = []
    for k in SLOWDOWNS:
        for case in (c for comp in rubric.components for c in comp.cases):
            folder = slowed_copy(scratch / f"{case.check}-{case.params.get('which')}-{k}", case, k)
            out += [(k, r) for r in grade_folder(restricted(rubric, lambda c: c == case), folder, tier, "bench-slow").results]
    return out


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


def against_builtins(rubric: Rubric, pairs: int) -> list[dict]:
    """Reference over built-in, single-threaded, at the CPU timing shapes (and the GPU's when there is one)."""
    devices = [("cpu", "cpu")] + ([("cuda", "gpu")] if torch.cuda.is_available() else [])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a worker (OMP_NUM_THREADS=1)
    try:
        out = []
        for device, key in devices:
            sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
            for name, shape, ours, builtin in builtin_pairs(timing_shapes(rubric, key), device):
                ratio, ours_s, builtin_s = interleaved_ratio(ours, builtin, sync, pairs)
                out.append({"name": name, "device": device, "shape": shape, "ratio": ratio, "ours": ours_s, "builtin": builtin_s})
        return out
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------- BENCHMARKS.md


# ---------------------------------------------------------------- a class


def make_class(rubric: Rubric, folder: Path, size: int) -> Path:
    """`size` submissions built from solutions/: a quarter correct, half with one known mistake each (the
    catalogue, in turn), a quarter broken (a syntax error in every file)."""
    mistakes = load_mistakes(rubric)
    folder.mkdir(parents=True)
    for i in range(size):
        kind = ("correct", "mistake", "mistake", "broken")[i % 4]
        dest = folder / f"s{i:03d}-{kind}"
        if kind == "mistake":
            m = mistakes[(i // 2) % len(mistakes)]
            write_variant(SOLUTIONS, rubric.component(m.component).file, m.old, m.new, dest)
        else:
            shutil.copytree(SOLUTIONS, dest)
            if kind == "broken":
                for f in dest.glob("*.py"):
                    f.write_text("def broken(:\n" + f.read_text())
    return folder


def class_runs(rubric: Rubric, size: int, jobs: int, scratch: Path) -> dict:
    """The same class graded one submission after another with `autograder grade`, then with `grade-all --jobs`,
    then `grade-all` again (all finished: a resume with nothing to do); wall seconds of each, and the timing
    verdicts of the correct submissions inside the batch."""
    folder = make_class(rubric, scratch / "class", size)
    secret = scratch / "secret.txt"
    secret.write_text("bench-class\n")
    cli = [sys.executable, "-m", "autograder"]
    started = time.monotonic()
    for sub in sorted(folder.iterdir()):
        subprocess.run([*cli, "grade", str(sub), "--secret-file", str(secret), "-q", "--results", str(scratch / "one.json")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    one_by_one = time.monotonic() - started
    out = scratch / "batch"
    batch = [*cli, "grade-all", str(folder), "--out", str(out), "--jobs", str(jobs), "--secret-file", str(secret), "-q"]
    started = time.monotonic()
    subprocess.run(batch, check=True, stdout=subprocess.DEVNULL)
    in_batch = time.monotonic() - started
    started = time.monotonic()
    subprocess.run(batch, check=True, stdout=subprocess.DEVNULL)
    again = time.monotonic() - started
    timing = []
    for sub in sorted(folder.iterdir()):
        if sub.name.endswith("-correct"):
            tests = json.loads((out / "results" / sub.name / "results.json").read_text())["tests"]
            timing += [t["score"] == t["max_score"] for t in tests if "timing" in t["tags"]]
    statuses = Counter(row["status"] for row in csv.DictReader(open(out / "grades.csv")))
    return {"size": size, "jobs": jobs, "one_by_one": one_by_one, "batch": in_batch, "again": again,
            "timing_full": sum(timing), "timing_total": len(timing), "statuses": dict(statuses)}


def section_class(result: dict | None) -> str:
    if not result:
        return "## 5. A class in one command\n\nNot measured in this run (`--class-size 0`)."
    ratio = result["batch"] / result["one_by_one"]
    return "\n\n".join([
        "## 5. A class in one command",
        f"{result['size']} submissions built from `solutions/` (a quarter correct, half with one known mistake of the "
        "catalogue each, a quarter with a syntax error in every file), graded one after another with `autograder grade` "
        f"(a process each, as a shell loop would), then with `autograder grade-all --jobs {result['jobs']}`, then "
        "`grade-all` again on the finished batch.",
        table(["", "seconds"], [["one after another (`grade` in a loop)", f"{result['one_by_one']:.0f}"],
                                [f"`grade-all --jobs {result['jobs']}`", f"{result['batch']:.0f}"],
                                ["`grade-all` again (nothing left to grade)", f"{result['again']:.1f}"]]),
        f"Reading: the batch took {ratio:.2f} of the time of the loop; statuses "
        f"{', '.join(f'{n} {s}' for s, n in sorted(result['statuses'].items()))}. Inside the batch the correct "
        f"submissions kept full timing marks in {result['timing_full']} of {result['timing_total']} timing cases. "
        "A single `grade` already keeps both cores busy (two lanes, section 1), so the batch gains from what the loop "
        "pays per submission (a process start, the rubric's and torch's imports) and from the cores the loop leaves "
        "idle while a timing case runs alone.",
    ])


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


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


def verdict_rows(per_case: dict[str, list]) -> list[list]:
    rows = []
    for name, results in per_case.items():
        ratios = [r.extra["ratio"] for r in results if "ratio" in r.extra]
        widths = [r.extra["ci"][1] - r.extra["ci"][0] for r in results if "ci" in r.extra]
        pairs = [r.extra["pairs"] for r in results if "pairs" in r.extra]
        full = sum(r.passed and r.fraction == 1 for r in results)
        rows.append([name] + [f"{min(v):.2f} / {median(v):.2f} / {max(v):.2f}" if v else "-" for v in (ratios, widths)]
                    + [f"{min(pairs)} / {median(pairs):g} / {max(pairs)}" if pairs else "-",
                       f"{median([r.seconds for r in results]):.1f}", f"{full}/{len(results)}"])
    return rows


def section_stability(per_case: dict[str, list], policy: Policy) -> str:
    runs = max(len(v) for v in per_case.values())
    return "\n\n".join([
        "## 2. Stability of the timing verdict",
        f"The reference graded as a student, timing cases only, {runs} runs with a different `secret` each "
        "(the timing cases are visible, so their inputs and random pair order come from the public seed and do not "
        "change with the secret: the runs differ by measurement noise and by the fresh workers). "
        "Ratio = student time / reference time; the interval is the 95% bootstrap interval of the median.",
        table(["case", "ratio min / median / max", "interval width min / median / max", "pairs min / median / max",
               "seconds (median)", "full marks"], verdict_rows(per_case)),
        stability_reading(per_case, policy),
    ])


def stability_reading(per_case: dict[str, list], policy: Policy) -> str:
    verdicts = [r for results in per_case.values() for r in results]
    full = sum(r.passed and r.fraction == 1 for r in verdicts)
    timed = [r for r in verdicts if "ratio" in r.extra]
    far = max(timed, key=lambda r: abs(math.log(r.extra["ratio"])))
    # A spread across runs wider than a typical interval is not pair-to-pair noise: each run has fresh workers.
    wide = [name for name, results in per_case.items() if len(results) > 1 and all("ci" in r.extra for r in results)
            and spread(results) > median([r.extra["ci"][1] - r.extra["ci"][0] for r in results])]
    text = (f"Reading: identical code should measure 1.00 and earn full marks (ratio up to {policy.full_until:g}); "
            f"{full} of {len(verdicts)} verdicts did. The ratio furthest from 1.00 was {far.extra['ratio']:.2f} "
            f"({far.case.name}). ")
    if wide:
        return text + (f"In {len(wide)} of {len(per_case)} cases ({'; '.join(wide)}) the ratios spread across runs by more "
                       "than a typical interval's width: an interval describes one run, with its pair of fresh "
                       "workers, and what changes between runs (the workers, the machine's state) is not averaged "
                       "away by more pairs.")
    return text + "Every case's ratios stayed within a typical interval's width across runs."


def spread(results) -> float:
    ratios = [r.extra["ratio"] for r in results]
    return max(ratios) - min(ratios)


def section_variants(results: list[tuple[int, object]], policy: Policy) -> str:
    rows = [[r.case.name, f"{k}x", f"{r.extra['ratio']:.2f}" if "ratio" in r.extra else "-",
             "{:.2f}-{:.2f}".format(*r.extra["ci"]) if "ci" in r.extra else "-", r.extra.get("pairs", "-"),
             f"{r.fraction:.0%}" if r.passed else f"failed: {r.output[:80]}", f"{expected_fraction(k, policy):.0%}"]
            for k, r in results]
    return "\n\n".join([
        "## 3. Deliberately slower variants",
        "Copies of `solutions/` where the timed function computes its correct result k times: a wrapper calls "
        "`scaled_dot_product_attention`, `multi_head_self_attention` or `lstm_forward` k times and returns the last "
        "result; `TransformerLM.forward` returns the mean of k identical forwards, so that backward (also timed) runs "
        "k times too. Each variant is graded on its own timing case only. \"at k\" is what the policy gives a ratio of "
        "exactly k.",
        table(["case", "slowdown", "ratio", "95% interval", "pairs", "points", "at k"], rows),
        variants_reading(results, policy),
    ] if results else ["## 3. Deliberately slower variants", "Skipped (`--skip-slow-variants`)."])


def variants_reading(results: list[tuple[int, object]], policy: Policy) -> str:
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
                   f"{worst[1].case.name} at {worst[0]}x: measured {worst[1].extra['ratio']:.2f}, "
                   f"{worst[1].fraction:.0%} of the points.")


def expected_fraction(ratio: float, policy: Policy) -> float:
    """The share of points the policy gives a measured ratio of exactly `ratio`."""
    return verdict(ratio, ratio, ratio, 0, None, policy, {}).fraction


def section_builtins(results: list[dict], pairs: int) -> str:
    if not results:
        return "## 4. The reference against PyTorch's built-ins\n\nSkipped (`--skip-builtins`)."
    rows = [[r["name"], r["device"], r["shape"], f"{r['ours'] * 1e3:.3f}", f"{r['builtin'] * 1e3:.3f}", f"{r['ratio']:.2f}"]
            for r in results]
    slowest = max(results, key=lambda r: r["ratio"])
    fastest = min(results, key=lambda r: r["ratio"])
    return "\n\n".join([
        "## 4. The reference against PyTorch's built-ins",
        f"In this process, `torch.set_num_threads(1)`, at the timing cases' shapes from grading.yaml; reference and "
        f"built-in calls alternate (which goes first alternates too), ratio = median over {pairs} pairs of reference "
        "time / built-in time. The LSTM pair uses the same weights (`bias_hh` zeroed, as ours has one bias); the block "
        "pair copies the block's weights into `nn.TransformerEncoderLayer(norm_first=True, activation=\"gelu\", "
        "dropout=0, batch_first=True, bias=False)` and passes a causal mask. Each pair's outputs are checked to agree "
        "before it is timed.",
        table(["pair", "device", "shape", "reference ms", "built-in ms", "ratio"], rows),
        f"Reading: students are timed against the reference, not against these built-ins, so a ratio above 1 is "
        f"how much faster than the reference the same computation can run in one thread. The largest gap is "
        f"{slowest['name']} on {slowest['device']} ({slowest['ratio']:.2f}x), the smallest {fastest['name']} on "
        f"{fastest['device']} ({fastest['ratio']:.2f}x). Such gaps decide how far below 1.0 a careful student's ratio "
        f"can go; nothing is flagged until {1 / Policy.flag_below:g}x faster than the reference.",
    ])


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timing-only grades of the reference (section 2; default 5)")
    parser.add_argument("--full-runs", type=int, default=3, help="full grades of the reference (section 1; default 3)")
    parser.add_argument("--pairs", type=int, default=200, help="interleaved pairs per built-in comparison (default 200)")
    parser.add_argument("--skip-slow-variants", action="store_true", help="leave out section 3")
    parser.add_argument("--skip-builtins", action="store_true", help="leave out section 4")
    parser.add_argument("--class-size", type=int, default=40, help="submissions in the class of section 5 (0: leave it out)")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md", help="where to write (default BENCHMARKS.md)")
    args = parser.parse_args(argv)

    started, clock = datetime.datetime.now().astimezone(), time.monotonic()
    command = shlex.join([os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable,
                          *sys.argv])
    rubric = load_rubric(ROOT / "grading.yaml")
    timing_rubric = restricted(rubric, lambda c: c.check in TIMING)
    tier = choose_tier(grader_files(rubric.path.parent, rubric.solutions_dir, []))


    def log(what: str) -> None:
        print(f"[{time.monotonic() - clock:4.0f} s] {what}", flush=True)

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
    against = [] if args.skip_builtins else against_builtins(rubric, args.pairs)
    klass = None
    if args.class_size:
        log(f"a class of {args.class_size}")
        with tempfile.TemporaryDirectory() as scratch:
            klass = class_runs(rubric, args.class_size, len(os.sched_getaffinity(0)), Path(scratch))

    text = "\n\n".join([section_machine(machine(tier), command, started, time.monotonic() - clock),
                        section_wall(grades, startup, overhead), section_stability(per_case, rubric.timing),
                        section_variants(variants, rubric.timing), section_builtins(against, args.pairs),
                        section_class(klass)])
    args.out.write_text(text + "\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
