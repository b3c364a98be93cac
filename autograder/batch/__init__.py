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
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..report import merged_results, results_json, write_results
from ..rubric import Rubric
from .canvas import Gradebook, canvas_export
from .gradebook import (UNRANKED, feedback_md, grades_csv, leaderboard_csv, leaderboard_rows, student_grades_csv, summary_json,
                        write_atomically)
from .inputs import Batch, Entry, ExportError, read_batch
from .jobs import Jobs, Setup, Task, failure
from .journal import Journal, batch_secret, component_keys, tree_digest
from .plan import graded_part
from .regrade import CHANGES, case_changes, changes_csv, component_points, graded_row, kept_components
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
    parts: tuple[str, ...] = ()  # grade these parts only, out of their points (none: the part every submission holds, else all)
    canvas: Gradebook | None = None  # the gradebook Canvas exported, which canvas.csv is written in (canvas.py); None: by hand


def grade_all(rubric: Rubric, source: Path, out: Path, options: BatchOptions, say, progress) -> dict:
    """Grade what `source` holds into `out`; returns the rows of the gradebook (submission id -> row).
    `say(text)` prints a note; `progress(done, total, row)` is called once before grading (row None: `done` were
    graded before), then as each submission ends. Stopped (a KeyboardInterrupt), it still writes the gradebook of what
    finished, and summary.json's runs say that this one did not finish."""
    started, began = time.monotonic(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    out.mkdir(parents=True, exist_ok=True)
    earlier = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    batch = read_batch(source, out / "unpacked")
    entries = batch.selected(options.only, source)
    secret, secret_file = batch_secret(out, options.secret_file, say)
    rubric, part_line = graded_part(rubric, entries, options.parts)
    if part_line:
        say(part_line)
    keys = component_keys(rubric, secret)
    journal = Journal(out / "journal.jsonl")
    contents = {e.id: e.digest() for e in batch.entries}
    stale = {e.id: list(keys) if options.regrade else journal.stale(e.id, contents[e.id], keys) for e in entries}
    todo = [e for e in entries if stale[e.id]]
    # the gradebooks hold the whole class, --only or not: the rows of those not graded now are the journal's
    book = _Book(rubric, out, batch.entries, keys, journal, contents, lambda finished, row: progress(
        len(entries) - len(todo) + finished, len(entries), row))
    cores = len(os.sched_getaffinity(0))
    for line in _announced(batch, source, entries, todo, stale, keys, options, cores):
        say(line)
    progress(len(entries) - len(todo), len(entries), None)
    setup = Setup(rubric, secret, (out.resolve(), source.resolve(), *([secret_file] if secret_file else [])),
                  options.require_tier, out / ".timing.lock", max(1, cores // (options.jobs or cores)), os.getpid())
    isolation: dict = {}  # what the jobs' walls were, as their first one reported (none started: nothing to grade)
    completed = False  # whether this run got through its list (not stopped, no error)
    try:
        for e in (e for e in todo if e.problem):
            book.done(Task(e.id, e.path), failure("not_gradable", e.problem))
        tasks = [Task(e.id, e.path, components=None if len(stale[e.id]) == len(keys) else tuple(stale[e.id]))
                 for e in todo if not e.problem]
        if tasks:
            isolation = _backend(rubric, setup, options, cores, say).run(tasks, book.done)
        completed = True
    finally:
        record = {"grader_version": __version__, "rubric": {"path": str(rubric.path), "sha256": rubric.digest},
                  "components": [c.id for c in rubric.components], "solutions_sha256": tree_digest(rubric.solutions_dir),
                  "source": str(source.resolve()), "isolation": isolation}
        run = {"started": began, "seconds": round(time.monotonic() - started, 1), "graded": len(book.finished), "finished": completed}
        rows = book.written(record, earlier, run, options.canvas, say)
    _ended(rubric, out, batch.entries, rows, book, options.similarity, say)
    return {sid: {**row, "submitters": book.by_id[sid].submitters} for sid, row in rows.items()}


def _announced(batch: Batch, source: Path, entries: list[Entry], todo: list[Entry], stale: dict[str, list[str]],
               keys: dict[str, str], options: BatchOptions, cores: int) -> list[str]:
    """What a run says before it grades: how many submissions, how many to grade, what of them, and how the export was
    read."""
    jobs = options.jobs or cores
    unreadable = sum(bool(e.problem) for e in todo)
    partly = Counter(c for e in todo if len(stale[e.id]) < len(keys) for c in stale[e.id])
    lines = [f"{len(entries)} submissions ({batch.kind} {source}); {len(entries) - len(todo)} already graded with this rubric, "
             f"grader and secret; {len(todo) - unreadable} to grade"
             + (f" with {jobs} job{'s' * (jobs != 1)}" if options.backend == "local" else "")
             + (f"; {unreadable} not gradable as the export holds them (`grade-all --plan` lists why)" if unreadable else "")]
    if partly:
        lines.append("of those, only what changed is graded again, the rest kept: "
                     + ", ".join(f"{c} in {n}" for c, n in sorted(partly.items())))
    return lines + export_notes(batch, entries)


class _Book:
    """A run's record of what it graded: each submission's results, feedback and journal line as it ends (`done`, called
    by the backend), the grades that changed, and at the end the gradebooks of what the journal holds (`written`)."""

    def __init__(self, rubric: Rubric, out: Path, entries: list[Entry], keys: dict[str, str], journal: Journal,
                 contents: dict[str, str], progress):
        self.rubric, self.out, self.entries, self.keys, self.journal, self.contents = rubric, out, entries, keys, journal, contents
        self.progress = progress  # progress(finished, row): one more submission finished
        self.by_id = {e.id: e for e in entries}
        self.order = [c.id for c in rubric.components]
        self.boards = {k.leaderboard.name: c.id for c in rubric.components for k in c.cases if k.leaderboard}
        self.changes: list[dict] = []
        self.finished: list[str] = []

    def done(self, task: Task, reply: dict) -> None:
        sid, latest = task.id, self.journal.latest.get(task.id)
        path = self.out / "results" / sid / "results.json"
        old = json.loads(path.read_text()) if path.exists() else None
        results = reply["results"] if "results" in reply else results_json(reply["run"], reply["account"])
        graded = set(task.components or self.keys)
        kept = kept_components(latest, self.contents[sid], old, graded, reply)
        if kept:
            results = merged_results(old, results, kept, self.order, self.boards)
        write_results(path, results)
        status, message = reply["status"], reply.get("message", "")
        if "run" in reply and reply["run"].grader_failed:  # graded, but not all of it: the grader's failure, to grade again
            status, message = "infra_error", reply["run"].grader_failure_line()
        keys = {**{c: latest["keys"][c] for c in kept}, **{c: self.keys[c] for c in graded}}
        row = {"id": sid, "content": self.contents[sid], "keys": keys, "status": status, "message": message,
               "score": float(results.get("score", 0.0)), "components": component_points(results),
               "leaderboard": results.get("leaderboard", []), "seconds": round(reply.get("seconds", 0.0), 2), "graded_at": time.time()}
        shown = graded_row(self.rubric, row)
        was = graded_row(self.rubric, latest)["score"] if latest else shown["score"]
        if was != shown["score"]:
            self.changes.append({"id": sid, "names": "; ".join(p.name for p in self.by_id[sid].submitters), "old": was,
                                 "new": shown["score"], "delta": shown["score"] - was, "cases": case_changes(old, results)})
        write_atomically(self.out / "feedback" / f"{sid}.md", feedback_md(sid, shown, results))
        self.journal.record(row)  # last: until this line is on disk, the submission is not done
        self.finished.append(sid)
        self.progress(len(self.finished), shown)

    def written(self, record: dict, earlier: dict, run: dict, canvas: Gradebook | None, say) -> dict[str, dict]:
        """The gradebooks, changes.csv, summary.json and the leaderboard of what the journal holds (a stop may cut
        done() short of `latest`); returns their rows."""
        out, rubric, entries = self.out, self.rubric, self.entries
        on_disk = Journal(self.journal.path)
        current = [e.id for e in entries if on_disk.current(e.id, self.contents[e.id], self.keys)]
        rows = {sid: graded_row(rubric, on_disk.latest[sid]) for sid in current}
        write_atomically(out / "grades.csv", grades_csv(rubric, entries, rows))
        write_atomically(out / "grades_by_student.csv", student_grades_csv(rubric, entries, rows))
        exported = canvas_export(rubric, entries, rows, canvas)
        write_atomically(out / "canvas.csv", exported.text)
        for line in exported.lines:
            say(line)
        if self.changes:  # a run that changes no grade leaves the last changes.csv as it was
            write_atomically(out / CHANGES, changes_csv(self.changes))
        told = {"run": run["started"], "submissions": self.changes} if self.changes else earlier.get("changes")
        record = {**record, **({"changes": told} if told else {}), "canvas": exported.record}
        write_atomically(out / "summary.json", summary_json(rubric, rows, record, [*earlier.get("runs", []), run]))
        columns, board = leaderboard_rows(rubric.leaderboard, entries, rows)
        if columns:
            write_atomically(out / "leaderboard.csv", leaderboard_csv(columns, board))
        return rows


def _ended(rubric: Rubric, out: Path, entries: list[Entry], rows: dict[str, dict], book: _Book, similarity: float, say) -> None:
    """What a run says once its outputs are written: the leaderboard's top, the report, and each grade that changed."""
    columns, board = leaderboard_rows(rubric.leaderboard, entries, rows)
    if columns:
        ranked = sum(line[0] != UNRANKED for line in board)
        say(f"leaderboard by {columns[0]} ({ranked} ranked; all in {out / 'leaderboard.csv'}):")
        for line in board[:LEADERS]:
            say("  " + "  ".join(str(v) for v in line[:2]) + "  " + "  ".join(f"{c}: {v}" for c, v in zip(columns, line[3:]) if v != ""))
    try:
        if book.finished or not (out / "report.html").exists():  # nothing new: the report stands
            build_report(out, rubric, similarity)
        say(f"report: {out / 'report.html'}")
    except ImportError as exc:  # matplotlib and copydetect come with the `batch` extra
        say(f"no report: {exc.name} is not installed (pip install -e '.[batch]' adds it; then autograder report {out})")
    except Exception as exc:  # the grades are written: a report that fails must not take them with it
        traceback.print_exc()
        say(f"no report: it failed ({type(exc).__name__}: {exc}); the grades are complete. `autograder report {out}` tries again")
    for c in book.changes:
        cases = "; ".join(c["cases"][:3]) + (f"; and {len(c['cases']) - 3} more cases" if len(c["cases"]) > 3 else "")
        say(f"changed: {c['id']}: {c['old']:g} -> {c['new']:g} ({c['delta']:+g})" + (f": {cases}" if cases else ""))
    if book.changes:
        say(f"{len(book.changes)} grade{'s' * (len(book.changes) != 1)} changed: each with the cases that changed in {out / CHANGES}")


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

