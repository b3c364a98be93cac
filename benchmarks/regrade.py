"""Section 11 of BENCHMARKS.md: a mid-term fix to one case, regraded in that case's component only, against a full
regrade of the same class.

A class of the course's whole rubric (each submission solutions/' nine files) is graded with `grade-all`; then one ngram
case's points change in the rubric (the fix), and `grade-all` runs again: it grades ngram alone in each submission and
keeps the rest; then `grade-all --regrade` grades everything again. Each run is a process; wall seconds of each.
benchmarks/run.py runs it (`--only-regrade`).
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, SOLUTIONS, table

SECTION = "## 11. A one-case fix, regraded"
SIZE = 10
CASE = '{name: "pad_sentence, n = 1", check: ngram.padding, params: {n: 1}, points: 1}'


def _timed(argv: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return round(time.monotonic() - started, 1), done.stderr


def run(scratch: Path, log) -> dict:
    config = scratch / "course" / "grading.yaml"
    config.parent.mkdir(parents=True)
    config.write_text((ROOT / "grading.yaml").read_text().replace("solutions: solutions", f"solutions: {SOLUTIONS}"))
    shutil.copytree(ROOT / "autograder_tests", config.parent / "autograder_tests")
    for i in range(SIZE):
        shutil.copytree(SOLUTIONS, scratch / "class" / f"s{i:02d}", ignore=shutil.ignore_patterns("*.yaml", "__pycache__"))
    out = scratch / "out"
    cli = [sys.executable, "-m", "autograder", "grade-all", str(scratch / "class"), "--out", str(out), "--config", str(config),
           "--jobs", "2"]
    log(f"a class of {SIZE}, the whole course")
    first, _ = _timed(cli)
    config.write_text(config.read_text().replace(CASE, CASE.replace("points: 1}", "points: 2}")))
    log("one ngram case fixed: grade-all again")
    fix, said = _timed(cli)
    changed = list(csv.DictReader(open(out / "changes.csv")))
    log("grade-all --regrade")
    full, _ = _timed([*cli, "--regrade"])
    return {"size": SIZE, "first": first, "fix": fix, "full": full, "changed": len(changed),
            "said": next((line for line in said.splitlines() if line.startswith("of those")), "")}


def section(f: dict, measured: str) -> str:
    return "\n\n".join([
        SECTION,
        measured,
        f"A class of {f['size']} submissions, each solutions/' nine files, graded with the course's whole rubric "
        "(`grade-all --jobs 2`); then one ngram case's points changed in the rubric (`pad_sentence, n = 1`: 1 -> 2), and "
        "`grade-all` run again; then `grade-all --regrade`, which grades everything again.",
        table(["run", "seconds"], [["first grading", f["first"]], ["after the one-case fix (ngram regraded, the rest kept)", f["fix"]],
                                   ["`--regrade` (everything again)", f["full"]]]),
        f"Reading: the fix took {f['fix'] / f['full']:.2f} of a full regrade's time; it said \"{f['said']}\", and changes.csv "
        f"lists {f['changed']} of the {f['size']} submissions, each +1 through that case.",
    ])
