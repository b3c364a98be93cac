"""Section 8 of BENCHMARKS.md: what the worker's run-time walls cost.

Forbidden operators are refused in PyTorch's dispatcher (sandbox/worker/forbidden_ops.py): only their own kernels are
replaced, so no other operator should dispatch more slowly. Measured here, against the same grader with the rubric's
operators emptied (nothing refused; everything else as graded):
- full grades of solutions/, the two alternating, wall time and the machine's busy CPU;
- the timing verdicts of solutions/ graded as a student, each timing case several times each way;
- what installing the refusals costs a worker, per component's operators, in a fresh process that has imported torch;
- what setting global state back costs a request (worker.Settings.restore).
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import defaultdict
from statistics import median

from benchmarks.common import ROOT, SOLUTIONS, busy_cpu, table

SECTION = "## 8. What the walls cost"
WORKER_SIDE = ROOT / "autograder" / "sandbox" / "worker"

# Run in a fresh process that imports torch, as a worker has: the seconds of forbidden_ops.refuse for the operators given
# on stdin, then the microseconds of one Settings.restore.
PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy, torch
import forbidden_ops, worker
operators = json.load(sys.stdin)
started = time.perf_counter()
kept = forbidden_ops.refuse(operators, lambda what: (lambda *a, **k: None))
refuse = time.perf_counter() - started
settings = worker.Settings()
started = time.perf_counter()
for _ in range(1000):
    settings.restore()
print(json.dumps({"refuse": refuse, "restore": (time.perf_counter() - started) * 1000}))
"""


def unwalled(rubric):
    """The rubric with no operator forbidden: what the grader did before the wall, everything else the same."""
    return dataclasses.replace(rubric, components=[dataclasses.replace(c, forbidden=dataclasses.replace(c.forbidden, operators=()))
                                                   for c in rubric.components])


def run(rubric, tier, grade_folder, timing_rubric, runs: int, log) -> dict:
    """The figures of the section; `grade_folder(rubric, folder, tier, secret)` grades as run.py does."""
    figures = {"grades": defaultdict(list), "verdicts": defaultdict(lambda: defaultdict(list))}
    walls = {"refused": (rubric, timing_rubric), "not refused": (unwalled(rubric), unwalled(timing_rubric))}
    for i in range(runs):
        for name, (full, timed) in walls.items():
            log(f"walls: a full grade, operators {name} ({i + 1} of {runs})")
            busy = busy_cpu()
            graded = grade_folder(full, SOLUTIONS, tier, f"walls-{i}")
            figures["grades"][name].append({"wall": graded.seconds, "busy": busy_cpu() - busy,
                                            "score": sum(r.score for r in graded.results),
                                            "max": sum(r.max_score for r in graded.results)})
            log(f"walls: the timing cases, operators {name} ({i + 1} of {runs})")
            for r in grade_folder(timed, SOLUTIONS, tier, f"walls-timing-{i}").results:
                figures["verdicts"][r.case.name][name].append((r.extra.get("ratio"), r.fraction))
    figures["setup"] = {c.id: _probe(list(c.forbidden.operators)) for c in rubric.components if c.forbidden.operators}
    figures["operators"] = {c.id: len(c.forbidden.operators) for c in rubric.components if c.forbidden.operators}
    return figures


def _probe(operators: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, str(WORKER_SIDE)], input=json.dumps(operators), capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def section(figures: dict | None, measured: str) -> str:
    if figures is None:
        return f"{SECTION}\n\nNot measured in this run (`benchmarks/run.py --only-walls` measures it)."
    grades = figures["grades"]
    rows = [[name, len(g), f"{median(x['wall'] for x in g):.1f}", f"{min(x['wall'] for x in g):.1f} - {max(x['wall'] for x in g):.1f}",
             f"{median(x['busy'] for x in g):.1f}", f"{g[0]['score']:g}/{g[0]['max']:g}"] for name, g in grades.items()]
    verdicts = []
    for case, ways in figures["verdicts"].items():
        row = [case]
        for name in ("refused", "not refused"):
            ratios = sorted(r for r, _ in ways[name] if r is not None)
            full = sum(f == 1 for _, f in ways[name])
            row += [f"{ratios[0]:.2f} / {median(ratios):.2f} / {ratios[-1]:.2f}" if ratios else "-", f"{full}/{len(ways[name])}"]
        verdicts.append(row)
    setup = figures["setup"]
    setup_rows = [[c, n, f"{1000 * setup[c]['refuse']:.0f}"] for c, n in figures["operators"].items()]
    restore = median(probe["restore"] for probe in setup.values())
    on, off = (median(x["wall"] for x in grades[name]) for name in ("refused", "not refused"))
    return "\n\n".join([
        SECTION,
        measured,
        "Full grades of solutions/ (timing cases included), the rubric's forbidden operators refused as graded and, "
        "alternating with them, the same rubric with no operator forbidden:",
        table(["operators", "grades", "wall s (median)", "wall s (range)", "busy CPU s (median)", "score"], rows),
        "Timing verdicts of solutions/ graded as a student (ratio = student time / reference time, min / median / max; "
        "runs at full marks):",
        table(["case", "ratio, refused", "full marks", "ratio, not refused", "full marks"], verdicts),
        "What installing the refusals costs each worker of a component (forbidden_ops.refuse, in a fresh process that "
        "has imported torch), and what setting global state back costs each request:",
        table(["component", "operators", "set-up ms"], setup_rows),
        f"Setting global state back (worker.Settings.restore): {restore:.1f} us a request (median over those processes).",
        _reading(grades, figures["verdicts"]),
    ])


def _reading(grades: dict, verdicts: dict) -> str:
    on, off = (median(x["wall"] for x in grades[name]) for name in ("refused", "not refused"))
    medians = {case: [median(r for r, _ in ways[name] if r is not None) for name in ("refused", "not refused")]
               for case, ways in verdicts.items()}
    widest = max(abs(a - b) for a, b in medians.values())
    full = {name: (sum(f == 1 for ways in verdicts.values() for _, f in ways[name]), sum(len(ways[name]) for ways in verdicts.values()))
            for name in ("refused", "not refused")}
    return (f"Reading: the median full grade took {on:.1f} s with the operators refused and {off:.1f} s without "
            f"({on - off:+.1f} s). The median timing ratios of the two ways differ by at most {widest:.2f}; "
            f"{full['refused'][0]}/{full['refused'][1]} verdicts were at full marks with the operators refused, "
            f"{full['not refused'][0]}/{full['not refused'][1]} without.")
