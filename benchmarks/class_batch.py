"""Section 5 of BENCHMARKS.md (and the batch part of section 6): a class of submissions graded one by one with
`autograder grade`, then with `grade-all` on the local backend, again (nothing left to do), and on Ray.
benchmarks/run.py runs it (`--class-size N`; 0 leaves it out)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from autograder.batch.inert import read_csv
from autograder.rubric import Rubric
from autograder.runner import LANES
from autograder.verify import load_mistakes, write_variant
from benchmarks.common import SOLUTIONS, busy_cpu, table


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


GPU_CLASS = 8  # submissions of the batch graded on a GPU machine by both backends (section 6)


def class_runs(rubric: Rubric, size: int, jobs: int | None, scratch: Path, loop: bool = True) -> dict:
    """The same class graded one submission after another with `autograder grade` (with `loop`), then with
    `grade-all` on the local backend, `grade-all` again (all finished: a resume with nothing to do), and with
    `grade-all --backend ray` (an embedded Ray, where the extra is installed); wall seconds of each, whether the two
    backends' grades.csv agree (where not, whether beyond timing points), and the timing verdicts of the correct
    submissions inside each batch. `jobs`: each batch's --jobs (None: the backend's default, every usable core)."""
    folder = make_class(rubric, scratch / "class", size)  # makes scratch too
    secret = scratch / "secret.txt"
    secret.write_text("bench-class\n")
    cli = [sys.executable, "-m", "autograder"]
    result = {"size": size, "jobs": jobs, "seconds": {}, "timing": {}, "statuses": {}}
    if loop:
        started, busy = time.monotonic(), busy_cpu()
        for sub in sorted(folder.iterdir()):
            subprocess.run([*cli, "grade", str(sub), "--secret-file", str(secret), "-q", "--results", str(scratch / "one.json")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result["one_by_one"] = time.monotonic() - started
        result["busy"] = {"loop": busy_cpu() - busy}
    rows = {}
    for backend in ("local", "again", "ray"):
        if backend == "ray" and importlib.util.find_spec("ray") is None:
            result["ray_missing"] = True
            break
        out = scratch / ("ray" if backend == "ray" else "local")
        command = [*cli, "grade-all", str(folder), "--out", str(out), "--secret-file", str(secret), "-q",
                   "--backend", "ray" if backend == "ray" else "local", *(["--jobs", str(jobs)] if jobs else [])]
        started, busy = time.monotonic(), busy_cpu()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        result["seconds"][backend] = time.monotonic() - started
        if backend == "local":  # how busy it kept the machine, and how long its timing cases ran alone (bound())
            result.setdefault("busy", {})["local"] = busy_cpu() - busy
            result["alone"] = timing_seconds(out)
        if backend != "again":
            graded = read_csv(out / "grades.csv")
            rows[backend] = {row["submission_id"]: {"status": row["status"], "score": row["score"],
                                                    "untimed": untimed_points(out, row["submission_id"])} for row in graded}
            result["statuses"][backend] = dict(Counter(row["status"] for row in graded))
            result["timing"][backend] = correct_timing(folder, out)
    if "ray" in rows:
        # Timing points follow a ratio measured anew in each batch; everything else must be the same.
        local, ray = rows["local"], rows["ray"]
        for key, fields in (("differ_score", ("status", "score")), ("differ_untimed", ("status", "untimed"))):
            result[key] = sorted(sid for sid in ray if any(ray[sid][f] != local[sid][f] for f in fields))
        result["same_csv"] = not result["differ_score"]
    return result


def untimed_points(out: Path, sid: str) -> list:
    """The points of each case of a batch's submission but its timing cases."""
    tests = json.loads((out / "results" / sid / "results.json").read_text()).get("tests", [])
    return [(t.get("number"), t["score"]) for t in tests if "timing" not in t.get("tags", [])]


def timing_seconds(out: Path) -> float:
    """Seconds a batch's timing cases ran, each alone on the machine, over all its submissions."""
    return sum(t["extra_data"].get("seconds", 0.0) for f in (out / "results").glob("*/results.json")
               for t in json.loads(f.read_text()).get("tests", []) if "timing" in t.get("tags", []))


def correct_timing(folder: Path, out: Path) -> list[dict]:
    """The timing verdicts of a batch's correct submissions: each case's device, ratio and whether it kept full marks."""
    verdicts = []
    for sub in sorted(folder.iterdir()):
        if sub.name.endswith("-correct"):
            tests = json.loads((out / "results" / sub.name / "results.json").read_text())["tests"]
            verdicts += [{"device": t["extra_data"].get("device"), "ratio": t["extra_data"].get("ratio"),
                          "full": t["score"] == t["max_score"]} for t in tests if "timing" in t["tags"]]
    return verdicts


def section_class(result: dict | None) -> str:
    if not result:
        return "## 5. A class in one command\n\nNot measured in this run (`--class-size 0`)."
    jobs = f" --jobs {result['jobs']}" if result["jobs"] else ""
    return "\n\n".join([
        "## 5. A class in one command",
        f"{result['size']} submissions built from `solutions/` (a quarter correct, half with one known mistake of the "
        "catalogue each, a quarter with a syntax error in every file), graded one after another with `autograder grade` "
        f"(a process each, as a shell loop would), then with `autograder grade-all{jobs}`, then `grade-all` again on the "
        f"finished batch, then with `grade-all{jobs} --backend ray` on an embedded Ray (its start included).",
        *class_parts(result),
    ])


def class_parts(result: dict) -> list[str]:
    """The table and reading of a class graded by class_runs."""
    seconds, jobs = result["seconds"], f" --jobs {result['jobs']}" if result["jobs"] else ""
    rows = [["one after another (`grade` in a loop)", f"{result['one_by_one']:.0f}"]] if "one_by_one" in result else []
    rows += [[f"`grade-all{jobs}` (local backend)", f"{seconds['local']:.0f}"],
             ["`grade-all` again (nothing left to grade)", f"{seconds['again']:.1f}"]]
    rows += [[f"`grade-all{jobs} --backend ray` (an embedded Ray)", f"{seconds['ray']:.0f}"]] if "ray" in seconds else []

    def kept(backend: str) -> str:
        verdicts = result["timing"][backend]
        devices = "/".join(sorted({str(v["device"]) for v in verdicts})) or "no device"
        ratios = [v["ratio"] for v in verdicts if v["ratio"] is not None]
        spread = f", ratios {min(ratios):.2f}-{max(ratios):.2f}" if ratios else ""
        return f"{sum(v['full'] for v in verdicts)} of {len(verdicts)} timing cases (on {devices}{spread})"

    reading = [f"Reading: the local batch took {seconds['local'] / result['one_by_one']:.2f} of the time of the loop"
               if "one_by_one" in result else "Reading: no loop in this run",
               f"statuses {', '.join(f'{n} {s}' for s, n in sorted(result['statuses']['local'].items()))}",
               f"the correct submissions kept full timing marks in {kept('local')} inside the local batch"]
    if "ray" in seconds:
        reading.append(f"in {kept('ray')} through Ray, which took {seconds['ray'] / seconds['local']:.2f} of the local "
                       f"batch's time; {agreement(result)}")
    else:
        reading.append("Ray was not measured: the `ray` extra is not installed")
    return [table(["", "seconds"], rows), "; ".join(reading) + "."] + ([bound(result)] if "alone" in result else [])


def bound(result: dict) -> str:
    """How fast any schedule could grade the local batch's work with each timing case alone on the machine: the
    timing cases' seconds (one core busy, the others waiting) plus the rest of its busy core-seconds over every core."""
    cores, alone, busy = len(os.sched_getaffinity(0)), result["alone"], result["busy"]["local"]
    floor = alone + max(0.0, busy - alone) / cores
    text = (f"Where the time goes: the local batch kept the machine busy {busy:.0f} core-seconds, {alone:.0f} of them in "
            f"timing cases, which run alone while the other cores wait. Any schedule that keeps timing cases alone needs "
            f"at least {alone:.0f} + ({busy:.0f} - {alone:.0f}) / {cores} = {floor:.0f} s for this work")
    if "one_by_one" not in result:
        return text + f"; the batch took {result['seconds']['local'] / floor:.2f}x that."
    return (text + f", {floor / result['one_by_one']:.2f} of the loop's time, and the batch took "
            f"{result['seconds']['local'] / floor:.2f}x that. The loop kept the machine busy {result['busy']['loop']:.0f} "
            f"core-seconds: each `grade` already grades on {min(cores, LANES)} lanes, so what the batch saves is the work "
            "each `grade` repeats (its start, its reference's worker) and the cores a lone `grade` leaves idle.")


def agreement(result: dict) -> str:
    """Whether the two backends' gradebooks agree, and where they differ, whether only in timing points."""
    if result["same_csv"]:
        return "the two grades.csv agree (status and score of every row)"
    beyond = result.get("differ_untimed", [])
    if beyond:
        return f"the two grades.csv DIFFER beyond timing points, in {', '.join(beyond)}"
    return (f"the two grades.csv differ in the score of {len(result['differ_score'])} rows, only in timing points (a ratio "
            "measured anew in each batch): every status and every other case's points agree")
