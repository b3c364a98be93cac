"""Helpers for the security suite: grade an attack the way Gradescope does, and look for what it left behind.

Attacks that could take the grading process down (killing the parent, fork
storms, rewriting results) are graded by the real CLI in a subprocess, so a
defence that fails costs one test, not the whole pytest run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.sandbox.host.tiers import STUDENT_ID_BASE, Tier, choose_tier, grader_files

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
CLI_TIMEOUT = 300


@dataclass
class Graded:
    results: dict  # results.json as the CLI left it
    seconds: float
    returncode: int
    output: str

    def scores(self) -> dict[str, tuple[float, float]]:
        """component -> (score, max) from results.json."""
        out: dict[str, tuple[float, float]] = {}
        for test in self.results.get("tests", []):
            got, most = out.get(test["tags"][0], (0.0, 0.0))
            out[test["tags"][0]] = (got + test["score"], most + test["max_score"])
        return out


def grade_cli(folder: Path, tmp_path: Path, components: list[str], *args: str) -> Graded:
    """`autograder grade FOLDER --results R` in a subprocess, as on Gradescope; results.json as written."""
    results = tmp_path / "results" / "results.json"
    argv = [sys.executable, "-m", "autograder", "grade", str(folder), "--results", str(results), *args]
    for component in components:
        argv += ["--component", component]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT,
                          env={**os.environ, "AUTOGRADER_SECRET": "security-tests"})
    seconds = time.monotonic() - started
    text = results.read_text() if results.is_file() else "{}"
    return Graded(json.loads(text), seconds, done.returncode, done.stdout + done.stderr)


def reported(output: str, prefix: str):
    """What an attack found out about the walls around it: it raises an error whose message is `prefix` and then
    JSON on one line, and the grader relays that message as the case's feedback."""
    line = next((line for line in output.splitlines() if prefix in line), None)
    assert line is not None, f"the attack did not report ({prefix!r} is not in its feedback): {output[-2000:]}"
    return json.loads(line.split(prefix, 1)[1])


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line holds `marker` (zombies have none)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def student_processes() -> list[int]:
    """Live processes a worker left: a fork keeps the worker's command line (its scratch folder's name),
    and at the root tier everything a student runs has a uid from STUDENT_ID_BASE up."""
    found = set(processes_with("autograder-worker-"))
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields["Uid"].split()[0]) >= STUDENT_ID_BASE and not fields["State"].strip().startswith("Z"):
            found.add(int(pid))
    return sorted(found)


def tier() -> Tier:
    """The tier the grader picks on this machine for the project's own rubric."""
    return choose_tier(grader_files(ROOT, SOLUTIONS, []))


def require_tier(*names: str) -> Tier:
    """Skip, saying why, where this machine cannot offer one of `names`."""
    here = tier()
    if here.name not in names:
        pytest.skip(f"needs the {' or '.join(names)} tier; this machine offers {here.name} ({'; '.join(here.notes)})")
    return here


def own_student_processes() -> list[int]:
    """student_processes() less those that belong to another test run on this machine (suites run side by
    side): a process is another run's when the first process above it that is not a student's (nor a
    worker's bwrap) is a live grader or pytest outside this one's line. Processes of this run, and orphans
    that escaped to init or to an ancestor of this pytest, are all kept."""
    me = os.getpid()
    ancestors = set(_chain(me)) | {1}
    found = []
    for pid in student_processes():
        chain = _chain(pid)[1:]
        if not chain:
            continue  # gone meanwhile
        if me in chain or next((p for p in chain if not _is_student(p)), 1) in ancestors:
            found.append(pid)
    return found


def _chain(pid: int) -> list[int]:
    """pid and every process above it, as far as /proc shows."""
    chain = [pid]
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            break
        pid = int(stat[stat.rindex(b")") + 2:].split()[1])
        chain.append(pid)
    return chain


def _is_student(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            uid = int(next(line for line in f if line.startswith("Uid:")).split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return uid >= STUDENT_ID_BASE or b"autograder-worker-" in f.read()
    except (OSError, StopIteration):
        return False
