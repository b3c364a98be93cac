"""The class report: what course staff learn from a finished batch, as `report.html` (one self-contained page: the
class at a glance, whom to look at, what to re-teach, similarity, and a page per submission) and `report.json` (the
same figures as data). Built from the batch folder alone: grades.csv, each submission's results.json, summary.json,
and the submissions themselves for the similarity section; the grades its last regrade changed where summary.json
holds them. figures.py computes, similarity.py compares code, plots.py draws, page.py writes the page."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from ...rubric import Rubric
from ..gradebook import write_atomically
from ..inert import read_csv
from . import figures
from .page import Page
from .similarity import DEFAULT_THRESHOLD, similarity

__all__ = ["DEFAULT_THRESHOLD", "build_report"]


def build_report(out: Path, rubric: Rubric, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """Write out/report.json and out/report.html from the finished batch in `out`; returns the report's data."""
    rows = read_csv(out / "grades.csv")  # the values as graded, the quotes that kept them inert in a spreadsheet gone
    results = {r["submission_id"]: figures.read_results(out, r["submission_id"]) for r in rows}
    summary = json.loads((out / "summary.json").read_text())
    people = figures.students(rubric, rows, results)
    generated = figures.when(datetime.now(timezone.utc))
    data = {
        "header": figures.header(rubric, summary, people, generated),
        "students": people,
        "scores": figures.scores(rubric, people),
        "cases": figures.cases(rubric, people, results),
        "mistakes": figures.mistakes(rubric, people, results),
        "failure_groups": figures.failure_groups(people),
        "timing": figures.timing(rubric, people),
        "ran_badly": figures.ran_badly(people),
        "does_not_import": figures.does_not_import(people),
        "changes": figures.changes(summary),
        "operations": figures.operations(people, results),
        "similarity": similarity(rubric, summary, out, threshold),
    }
    sim = data["similarity"]
    as_data = {**data, "similarity": {**sim, "pairs": [{k: v for k, v in p.items() if k != "views"} for p in sim["pairs"]]}}
    write_atomically(out / "report.json", json.dumps(as_data, separators=(",", ":")))  # compact: 300 submissions' pairs run to MBs
    write_atomically(out / "report.html", Page(data).render())
    return data
