"""What a regrade keeps, and what it says changed.

A submission whose files are unchanged is graded again only in the components whose key changed (journal.component_keys:
a case fixed, a solution corrected, the secret changed); the results of its other components are kept
(report.merged_results). Every submission whose score a run changes is a line of changes.csv, with the cases whose
points changed, and of summary.json's "changes".
"""
from __future__ import annotations

from ..rubric import Rubric
from .gradebook import max_score
from .inert import csv_text

CHANGES = "changes.csv"


def graded_row(rubric: Rubric, row: dict) -> dict:
    """A journal line's row as the rubric grades it: its score, maximum and parts over the rubric's components only (a
    batch of one part keeps the others' points it graded before, and counts only its own)."""
    if row.get("status") != "ok":
        return {**row, "max_score": max_score(rubric)}
    points = {c.id: float(row["components"].get(c.id, 0.0)) for c in rubric.components}
    parts: dict[str, float] = {}
    for c in rubric.components:
        parts[c.part] = parts.get(c.part, 0.0) + points[c.id]
    return {**row, "score": sum(points.values()), "max_score": max_score(rubric), "components": points, "parts": parts}


def kept_components(latest: dict | None, content: str, old: dict | None, graded: set[str], reply: dict) -> set[str]:
    """The components whose results a grading keeps from the grading before (`latest`, its journal line; `old`, its
    results.json): those it graded and this one does not, where it graded the same files, holds their results (it was
    no failure) and this one graded too. A resubmission keeps nothing: its results are all this grading's."""
    if not (latest and latest.get("content") == content and old and old.get("tests") and "run" in reply):
        return set()
    return set(latest.get("keys", {})) - graded


def component_points(results: dict) -> dict[str, float]:
    """results.json's points per component (each test tagged with its component first)."""
    points: dict[str, float] = {}
    for test in results.get("tests", []):
        points[test["tags"][0]] = points.get(test["tags"][0], 0.0) + float(test["score"])
    return points


def case_changes(old: dict | None, new: dict) -> list[str]:
    """The cases whose points differ between two results.json, each as "[ngram] name: 3 -> 5" (a case only one has:
    "none" on the other side), in the new results' order."""
    if not old:
        return []
    before = {t["name"]: t["score"] for t in old.get("tests", [])}
    after = {t["name"]: t["score"] for t in new.get("tests", [])}
    names = [*after, *(n for n in before if n not in after)]
    return [f"{n}: {_points(before.get(n))} -> {_points(after.get(n))}" for n in names if before.get(n) != after.get(n)]


def _points(x: float | None) -> str:
    return "none" if x is None else f"{x:g}"


def changes_csv(changes: list[dict]) -> str:
    """changes.csv: a row per submission whose score changed (the same lines as summary.json's "changes"); a delta is
    written without its "+", which a spreadsheet would take for a formula."""
    return csv_text([["submission_id", "names", "old_score", "new_score", "delta", "cases_changed"],
                     *([c["id"], c["names"], f"{c['old']:g}", f"{c['new']:g}", f"{c['delta']:g}", "; ".join(c["cases"])]
                       for c in changes)])
