"""Section 10 of BENCHMARKS.md: a Gradescope export of 2,000 part-1 submissions, one byte flipped in 10 of them.

`grade-all --plan` reads the whole export (unpacking it, then again from the unpacked copy), and `grade-all` grades, with
`--only`, a sample holding the 10 damaged submissions and the first others; each is a process of its own, its wall time
and the peak resident memory of its largest process measured. benchmarks/run.py runs it (`--only-export`).
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import yaml

from benchmarks.common import ROOT, SOLUTIONS, table

SECTION = "## 10. An export of 2,000 submissions, ten of them damaged"
SIZE, DAMAGED, SAMPLE = 2000, 10, 40
# The peak resident memory of the largest process the command started (its own included), in KiB: Linux's getrusage.
MEASURE = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)")


def make_export(path: Path, size: int, damaged: int) -> list[str]:
    """Gradescope's export zip of `size` submissions of solutions/' ngram.py and backprop.py, one byte of ngram.py
    flipped in `damaged` of them, spread over the export; returns their ids."""
    files = {name: (SOLUTIONS / name).read_bytes() for name in ("ngram.py", "backprop.py")}
    ids = [str(100000 + i) for i in range(size)]
    broken = ids[size // (2 * damaged)::size // damaged][:damaged]
    metadata = {f"submission_{sid}": {":submitters:": [{":name:": f"Student {sid}", ":sid:": sid, ":email:": f"s{sid}@example.edu"}]}
                for sid in ids}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("assignment_1_export/submission_metadata.yml", yaml.safe_dump(metadata))
        for sid in ids:
            for name, data in files.items():
                z.writestr(f"assignment_1_export/submission_{sid}/{name}", data)
    data = bytearray(buf.getvalue())
    archive = zipfile.ZipFile(io.BytesIO(bytes(data)))
    for sid in broken:
        m = archive.getinfo(f"assignment_1_export/submission_{sid}/ngram.py")
        name_len, extra_len = struct.unpack("<HH", data[m.header_offset + 26: m.header_offset + 30])
        data[m.header_offset + 30 + name_len + extra_len + m.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return broken


def _measured(argv: list[str]) -> dict:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True)
    lines = done.stderr.strip().splitlines()
    return {"seconds": round(time.monotonic() - started, 1), "peak_mib": round(int(lines[-1]) / 1024), "status": done.returncode,
            "stdout": done.stdout, "stderr": "\n".join(lines[:-1])}


def part1_rubric(scratch: Path) -> Path:
    spec = yaml.safe_load((ROOT / "grading.yaml").read_text())
    spec["solutions"] = str(SOLUTIONS)
    spec["parts"] = spec["parts"][:1]
    spec["components"] = {cid: spec["components"][cid] for cid in spec["parts"][0]["components"]}
    path = scratch / "rubric" / "grading.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copytree(ROOT / "autograder_tests", path.parent / "autograder_tests")  # the staff tests it names, beside it
    return path


def run(scratch: Path, log) -> dict:
    export, out = scratch / "export.zip", scratch / "out"
    log(f"an export of {SIZE} submissions, {DAMAGED} damaged")
    broken = make_export(export, SIZE, DAMAGED)
    config = part1_rubric(scratch)
    cli = [sys.executable, "-m", "autograder", "grade-all", str(export), "--out", str(out), "--config", str(config)]
    log("grade-all --plan (unpacking the export)")
    first = _measured([*cli, "--plan"])
    log("grade-all --plan again (from the unpacked copy)")
    again = _measured([*cli, "--plan"])
    plan = json.loads((out / "plan.json").read_text())
    sample = broken + [p["id"] for p in plan["submissions"] if p["id"] not in broken][: SAMPLE - len(broken)]
    log(f"grade-all --only {len(sample)} submissions")
    graded = _measured([*cli, "--jobs", "2", "--only", ",".join(sample)])
    rows = list(csv.DictReader(open(out / "grades.csv")))
    reasons = {p["id"]: p.get("reason", "") for p in plan["submissions"]}
    return {"size": SIZE, "damaged": broken, "plan": first, "plan_again": again, "graded": graded, "sample": len(sample),
            "counts": {k: plan[k] for k in ("found", "to_grade", "already_graded", "not_gradable")},
            "plan_reasons": sorted({reasons[sid].split(": ", 1)[1] for sid in broken if ": " in reasons[sid]}),
            "plan_damaged_named": sum(reasons[sid].startswith(f"assignment_1_export/submission_{sid}/ngram.py could not be read")
                                      for sid in broken),
            "rows": {status: sum(r["status"] == status for r in rows) for status in sorted({r["status"] for r in rows})},
            "rows_damaged_not_gradable": sum(r["status"] == "not_gradable" for r in rows if r["submission_id"] in broken),
            "full_marks": sum(r["score"] == r["max_score"] for r in rows if r["submission_id"] not in broken)}


def section(f: dict, measured: str) -> str:
    c = f["counts"]
    return "\n\n".join([
        SECTION,
        measured,
        f"Gradescope's export zip of {f['size']:,} part-1 submissions (each solutions/' ngram.py and backprop.py), one byte of "
        f"ngram.py's compressed data flipped in {len(f['damaged'])} of them, spread over the export "
        f"({', '.join(f['damaged'])}). Each command is a process; peak memory is the largest resident size of any process it "
        "started, its own included (getrusage).",
        table(["command", "seconds", "peak memory (MiB)", "status"], [
            ["`grade-all --plan` (unpacks the export, reads every submission)", f["plan"]["seconds"], f["plan"]["peak_mib"], f["plan"]["status"]],
            ["`grade-all --plan` again (from the unpacked copy)", f["plan_again"]["seconds"], f["plan_again"]["peak_mib"], f["plan_again"]["status"]],
            [f"`grade-all --jobs 2 --only` {f['sample']} submissions (the {len(f['damaged'])} damaged, then the first others)",
             f["graded"]["seconds"], f["graded"]["peak_mib"], f["graded"]["status"]],
        ]),
        f"Reading: the plan found {c['found']:,} submissions, {c['to_grade']:,} to grade and {c['not_gradable']} not gradable; "
        f"{f['plan_damaged_named']} of the {len(f['damaged'])} damaged ones are named with the member that could not be read "
        f"and why ({'; '.join(f['plan_reasons'])}). The batch of {f['sample']} gave "
        + ", ".join(f"{n} {status}" for status, n in f["rows"].items())
        + f": the {f['rows_damaged_not_gradable']} damaged ones not gradable, and {f['full_marks']} of the "
        f"{f['sample'] - len(f['damaged'])} others full marks. At the sample's pace the whole export would take about "
        f"{f['graded']['seconds'] / f['sample'] * c['to_grade'] / 60:.0f} minutes on this machine.",
    ])
