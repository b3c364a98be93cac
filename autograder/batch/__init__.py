"""`autograder grade-all`: a class's submissions graded in parallel, resumably, into a gradebook.

inputs.py reads what to grade, journal.py remembers what is finished, jobs.py grades in parallel processes on this
machine (or cluster.py on a Ray cluster), gradebook.py writes the outputs. This module puts them together in one run,
and is the only writer of the outputs whichever backend grades.
"""
from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..report import results_json, write_results
from ..rubric import Rubric
from .gradebook import (UNRANKED, canvas_csv, feedback_md, grades_csv, leaderboard_csv, leaderboard_rows, max_score, points,
                        student_grades_csv, summary_json, write_atomically)
from .inputs import Batch, Entry, ExportError, read_batch
from .jobs import Jobs, Setup, Task, failure
from .journal import Journal, batch_secret, grading_key, tree_digest
from .report import DEFAULT_THRESHOLD, build_report

__all__ = ["BatchOptions", "ExportError", "build_report", "grade_all"]


@dataclass(frozen=True)
class BatchOptions:
    jobs: int | None  # submissions graded at once (None: the usable cores; on a cluster, as many as it holds)
    secret_file: Path | None
    require_tier: str
    regrade: bool
    only: tuple[str, ...]
    budget: float  # seconds one submission may take before it is stopped (status timeout); on a cluster, each part
    similarity: float = DEFAULT_THRESHOLD  # the report flags pairs of files sharing this share of their tokens
    backend: str = "local"  # local: job processes on this machine; ray: a Ray cluster (cluster.py)
    address: str | None = None  # ray: the cluster to join (None: an embedded one on this machine)
    timing_on: str = "auto"  # ray: timing cases on a GPU, on a node's CPUs (its timing slot), or auto: GPUs if it has any
    schedule_timeout: float = 600.0  # ray: seconds a part may wait for a grader to start for it before it is infra_error


def grade_all(rubric: Rubric, source: Path, out: Path, options: BatchOptions, say, progress) -> dict:
    """Grade what `source` holds into `out`; returns the rows of the gradebook (submission id -> row).
    `say(text)` prints a note; `progress(done, total, row)` is called once before grading (row None: `done` were
    graded before), then as each submission ends. Stopped (a KeyboardInterrupt), it still writes the gradebook of what
    finished, and summary.json's runs say that this one did not finish."""
    started, began = time.monotonic(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    out.mkdir(parents=True, exist_ok=True)
    runs = json.loads((out / "summary.json").read_text()).get("runs", []) if (out / "summary.json").exists() else []
    batch = read_batch(source, out / "unpacked")
    entries = batch.selected(options.only, source)
    secret, secret_file = batch_secret(out, options.secret_file, say)
    solutions = tree_digest(rubric.solutions_dir)
    key = grading_key(rubric.digest, solutions, secret)
    journal = Journal(out / "journal.jsonl")
    contents = {e.id: e.digest() for e in entries}
    todo = [e for e in entries if options.regrade or not journal.done(e.id, contents[e.id], key)]
    before = {e.id: journal.latest[e.id] for e in todo if e.id in journal.latest}
    cores = len(os.sched_getaffinity(0))
    jobs = options.jobs or cores
    unreadable = [e for e in todo if e.problem]
    say(f"{len(entries)} submissions ({batch.kind} {source}); {len(entries) - len(todo)} already graded with this rubric, "
        f"grader and secret; {len(todo) - len(unreadable)} to grade" + (f" with {jobs} job{'s' * (jobs != 1)}" if options.backend == "local" else "")
        + (f"; {len(unreadable)} not gradable as the export holds them (`grade-all --plan` lists why)" if unreadable else ""))
    for line in export_notes(batch, entries):
        say(line)
    progress(len(entries) - len(todo), len(entries), None)
    by_id = {e.id: e for e in entries}
    record = {"grader_version": __version__, "rubric": {"path": str(rubric.path), "sha256": rubric.digest},
              "solutions_sha256": solutions, "source": str(source.resolve())}

    def done(task: Task, reply: dict) -> None:
        sid = task.id
        results = reply["results"] if "results" in reply else results_json(reply["run"], reply["account"])
        write_results(out / "results" / sid / "results.json", results)
        per_component, per_part = points(rubric, results)
        status, message = reply["status"], reply.get("message", "")
        if "run" in reply and reply["run"].grader_failed:  # graded, but not all of it: the grader's failure, to grade again
            status, message = "infra_error", reply["run"].grader_failure_line()
        row = {"id": sid, "content": contents[sid], "key": key, "status": status, "message": message,
               "score": float(results.get("score", 0.0)), "max_score": max_score(rubric), "components": per_component,
               "parts": per_part, "leaderboard": results.get("leaderboard", []), "seconds": round(reply.get("seconds", 0.0), 2),
               "graded_at": time.time()}
        write_atomically(out / "feedback" / f"{sid}.md", feedback_md(sid, row, results))
        journal.record(row)  # last: until this line is on disk, the submission is not done
        finished.append(sid)
        progress(len(entries) - len(todo) + len(finished), len(entries), row)

    finished: list[str] = []
    setup = Setup(rubric, secret, (out.resolve(), source.resolve(), *([secret_file] if secret_file else [])),
                  options.require_tier, out / ".timing.lock", max(1, cores // jobs), os.getpid())
    isolation: dict = {}  # what the jobs' walls were, as their first one reported (none started: nothing to grade)
    completed = False  # whether this run got through its list (not stopped, no error)
    try:
        for e in unreadable:
            done(Task(e.id, e.path), failure("not_gradable", e.problem))
        if len(todo) > len(unreadable):
            isolation = _backend(rubric, setup, options, cores, say).run([Task(e.id, e.path) for e in todo if not e.problem], done)
        completed = True
    finally:
        on_disk = Journal(journal.path)  # what finished is what the journal holds: a stop may cut record() short of `latest`
        rows = {e.id: on_disk.latest[e.id] for e in entries if on_disk.current(e.id, contents[e.id], key)}
        write_atomically(out / "grades.csv", grades_csv(rubric, entries, rows))
        write_atomically(out / "grades_by_student.csv", student_grades_csv(rubric, entries, rows))
        write_atomically(out / "canvas.csv", canvas_csv(rubric, entries, rows))
        run = {"started": began, "seconds": round(time.monotonic() - started, 1), "graded": len(finished), "finished": completed}
        write_atomically(out / "summary.json", summary_json(rubric, rows, {**record, "isolation": isolation}, [*runs, run]))
        columns, board = leaderboard_rows(rubric.leaderboard, entries, rows)
        if columns:
            write_atomically(out / "leaderboard.csv", leaderboard_csv(columns, board))
    if columns:
        ranked = sum(line[0] != UNRANKED for line in board)
        say(f"leaderboard by {columns[0]} ({ranked} ranked; all in {out / 'leaderboard.csv'}):")
        for line in board[:LEADERS]:
            say("  " + "  ".join(str(v) for v in line[:2]) + "  " + "  ".join(f"{c}: {v}" for c, v in zip(columns, line[3:]) if v != ""))
    try:
        if finished or not (out / "report.html").exists():  # nothing new: the report stands
            build_report(out, rubric, options.similarity)
        say(f"report: {out / 'report.html'}")
    except ImportError as exc:  # matplotlib and copydetect come with the `batch` extra
        say(f"no report: {exc.name} is not installed (pip install -e '.[batch]' adds it; then autograder report {out})")
    except Exception as exc:  # the grades are written: a report that fails must not take them with it
        traceback.print_exc()
        say(f"no report: it failed ({type(exc).__name__}: {exc}); the grades are complete. `autograder report {out}` tries again")
    for sid, old in sorted(before.items()):
        new = rows.get(sid)
        if new and new["score"] != old.get("score"):
            say(f"changed: {sid}: {old.get('score', 0):g} -> {new['score']:g} ({new['score'] - old.get('score', 0):+g})")
    return {sid: {**row, "submitters": by_id[sid].submitters} for sid, row in rows.items()}


LEADERS = 10  # leaderboard lines printed at the end of a batch


def export_notes(batch: Batch, entries: list[Entry]) -> list[str]:
    """What a TA should know of how the export was read, before anything is graded: the submissions found unlisted,
    and what could not be read that belongs to none."""
    unlisted = [e.id for e in entries if e.note]
    lines = [f"note: {len(unlisted)} submission folder{'s' * (len(unlisted) != 1)} not listed in the export's metadata, graded "
             f"under {'their' if len(unlisted) > 1 else 'its'} folder name{'s' * (len(unlisted) != 1)} with no submitter: "
             + ", ".join(unlisted[:10]) + (f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else "")] if unlisted else []
    return lines + [f"note: part of no submission: {why}" for why in batch.strays]


def _backend(rubric: Rubric, setup: Setup, options: BatchOptions, cores: int, say):
    """What grades: job processes here, or a Ray cluster (its nodes' graders get their own paths and lanes)."""
    if options.backend == "local":
        return Jobs(options.jobs or cores, setup, options.budget, say)
    from .cluster import Cluster  # Ray is an extra: imported only when asked for

    return Cluster(rubric, setup, options.budget, address=options.address, cores=cores, jobs=options.jobs,
                   timing_on=options.timing_on, schedule_timeout=options.schedule_timeout, say=say)


def entry_line(row: dict) -> str:
    status = row["status"]
    score = f"{row['score']:g}/{row['max_score']:g}" if status == "ok" else status
    return f"{row['id']}: {score} ({row['seconds']:.1f} s)" + (f" {row['message']}" if row.get("message") else "")

