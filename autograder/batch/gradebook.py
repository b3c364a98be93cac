"""A batch's outputs: grades.csv, each submission's results.json and feedback, and summary.json, each written
atomically (a temporary file renamed over the old one), so that a reader never sees half a file."""
from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from ..rubric import Rubric
from .inert import csv_text, md_fence, md_text
from .inputs import Entry

STATUSES = {
    "ok": "graded",
    "not_gradable": "nothing readable was submitted (no file the rubric grades, an unreadable zip or notebook)",
    "timeout": "grading ran past the batch's budget per submission and was stopped",
    "crashed": "the grading process died while grading it",
    "infra_error": "the grader itself failed, on the whole submission or on some cases (its traceback is in the batch's log); a rerun grades it again",
}
FIXED = ["submission_id", "name", "sid", "email", "status", "score", "max_score"]


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def points(rubric: Rubric, results: dict) -> tuple[dict[str, float], dict[str, float]]:
    """Points per component and per part from results.json's tests (each tagged with its component)."""
    per_component = {c.id: 0.0 for c in rubric.components}
    for test in results.get("tests", []):
        if test.get("tags") and test["tags"][0] in per_component:
            per_component[test["tags"][0]] += float(test.get("score", 0.0))
    per_part: dict[str, float] = {}
    for c in rubric.components:
        per_part[c.part] = per_part.get(c.part, 0.0) + per_component[c.id]
    return per_component, per_part


def component_max(component) -> float:
    return sum(k.points for k in component.cases)


def max_score(rubric: Rubric) -> float:
    return sum(component_max(c) for c in rubric.components)


def grades_csv(rubric: Rubric, entries: list[Entry], rows: dict[str, dict]) -> str:
    """One row per submission, in the entries' order (sorted by id); a submission not graded yet has none."""
    parts = list(dict.fromkeys(c.part for c in rubric.components))
    table = [FIXED + [c.id for c in rubric.components] + [f"part: {p}" for p in parts]]
    for entry in entries:
        row = rows.get(entry.id)
        if row is None:
            continue
        people = entry.submitters
        fields = [entry.id, "; ".join(p.name for p in people), "; ".join(p.sid for p in people),
                  "; ".join(p.email for p in people), row["status"], _number(row["score"]), _number(row["max_score"])]
        graded = row["status"] == "ok"
        fields += [_number(row["components"].get(c.id, 0.0)) if graded else "" for c in rubric.components]
        fields += [_number(row["parts"].get(p, 0.0)) if graded else "" for p in parts]
        table.append(fields)
    return csv_text(table)


def leaderboard_rows(entries: list[Entry], rows: dict[str, dict]) -> tuple[list[str], list[list]]:
    """The batch's leaderboard: its columns (each leaderboard name, in the order first met), and one row per submission
    that ranks anywhere (rank, id, names, a value per column), ranked by the first column in its order (results.json
    carries a submission's entries only where its answers were right: report.leaderboard)."""
    boards = {e.id: {b["name"]: b for b in rows[e.id].get("leaderboard", [])} for e in entries if e.id in rows}
    columns = list(dict.fromkeys(name for board in boards.values() for name in board))
    if not columns:
        return [], []
    first = columns[0]
    order = next(board[first]["order"] for board in boards.values() if first in board)

    def key(entry: Entry):
        value = boards[entry.id].get(first, {}).get("value")
        if not isinstance(value, (int, float)):  # no value, or a text one: after every number
            return (1, 0.0, entry.id)
        return (0, -value if order == "desc" else value, entry.id)

    ranked = sorted((e for e in entries if boards.get(e.id)), key=key)
    table = [[i, e.id, "; ".join(p.name for p in e.submitters), *(boards[e.id].get(c, {}).get("value", "") for c in columns)]
             for i, e in enumerate(ranked, start=1)]
    return columns, table


def leaderboard_csv(columns: list[str], table: list[list]) -> str:
    return csv_text([["rank", "submission_id", "name", *columns], *table])


def _number(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def feedback_md(sid: str, row: dict, results: dict) -> str:
    """What the student may read: each case's name, points and message (hidden cases' messages hold no values).
    Text not the grader's own words is fenced (md_fence), or in a heading escaped (md_text), so none of it renders."""
    lines = [f"# Submission {md_text(sid)}", "", f"Score: {_number(row['score'])} / {_number(row['max_score'])}", ""]
    if row["status"] != "ok":
        lines += ["Not graded:", "", md_fence(row["message"]), ""]
    if results.get("output"):
        lines += [md_fence(results["output"]), ""]
    for test in results.get("tests", []):
        hidden = "" if test.get("visibility", "visible") == "visible" else " (hidden case)"
        name = md_text(f"{test['number']} {test['name']}")
        lines += [f"## {name}{hidden}: {_number(test['score'])} / {_number(test['max_score'])}", ""]
        if test.get("output"):
            lines += [md_fence(test["output"]), ""]
    return "\n".join(lines)


def summary_json(rubric: Rubric, rows: dict[str, dict], record: dict, seconds: float) -> str:
    counts = Counter(row["status"] for row in rows.values())
    return json.dumps({
        "submissions": len(rows),
        "statuses": {status: counts.get(status, 0) for status in STATUSES},
        "max_score": max_score(rubric),
        "component_max": {c.id: component_max(c) for c in rubric.components},
        **record,
        "wall_seconds": round(seconds, 1),
    }, indent=2)
