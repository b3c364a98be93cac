"""A batch's outputs: the gradebooks (grades.csv, one row per submission; grades_by_student.csv, one per student;
canvas.csv, for Canvas's gradebook import), the leaderboard, each submission's results.json and feedback, and
summary.json, each written atomically (a temporary file renamed over the old one), so that a reader never sees half
a file."""
from __future__ import annotations

import json
import math
import os
import tempfile
from collections import Counter
from pathlib import Path

from ..report import PRINTED, failures_first, neighbours, numbered
from ..rubric import Rubric
from .inert import csv_text, md_fence, md_text
from .inputs import Entry, Submitter

STATUSES = {
    "ok": "graded",
    "not_gradable": "nothing readable was submitted (no file the rubric grades, an unreadable zip or notebook), or the export "
                    "holds the submission damaged or not at all",
    "timeout": "grading ran past the batch's budget per submission and was stopped",
    "crashed": "the grading process died while grading it",
    "infra_error": "the grader itself failed, on the whole submission or on some cases (its traceback is in the batch's log); a rerun grades it again",
}
PERSON = ["name", "sid", "email"]
GRADE = ["status", "score", "max_score"]
# Canvas's gradebook import (canvas-lms, GradebookImporter): a header whose first cell holds "Student" and second "ID",
# its last student column "Section" (SIS User ID and SIS Login ID between them), then one column per assignment. Canvas
# finds each row's student by ID (its own user id, which the grader does not know: left blank, as a number there would
# be taken for one), then SIS User ID, then SIS Login ID, then the name; it ignores Section's values and creates an
# assignment for a header it does not know, or lets the importer match it to one.
CANVAS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
UNRANKED = "unranked"  # a leaderboard row's rank where its first column holds no number


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def component_max(component) -> float:
    return sum(k.points for k in component.cases)


def max_score(rubric: Rubric) -> float:
    return sum(component_max(c) for c in rubric.components)


def grades_csv(rubric: Rubric, entries: list[Entry], rows: dict[str, dict]) -> str:
    """One row per submission, in the entries' order (sorted by id); a submission not graded yet has none. A group's
    row lists its members' names, sids and emails, joined by "; " (a very large group's cut at GROUP_CELL: _members)."""
    table = [["submission_id", *PERSON, *_grade_header(rubric)]]
    for entry in (e for e in entries if e.id in rows):
        joined = [_members([getattr(p, f) for p in entry.submitters]) for f in PERSON]
        table.append([entry.id, *joined, *_grade_fields(rubric, rows[entry.id])])
    return csv_text(table)


def student_grades_csv(rubric: Rubric, entries: list[Entry], rows: dict[str, dict]) -> str:
    """One row per student, each member of a group with the group's grade and `group` naming every member; a submission
    with no submitter listed (a folder's) has one row, its person's fields blank. In the entries' order."""
    table = [[*PERSON, "submission_id", "group", *_grade_header(rubric)]]
    for entry in (e for e in entries if e.id in rows):
        group = _members([p.name for p in entry.submitters]) if len(entry.submitters) > 1 else ""
        for person in entry.submitters or (Submitter(),):
            table.append([*(getattr(person, f) for f in PERSON), entry.id, group, *_grade_fields(rubric, rows[entry.id])])
    return csv_text(table)


GROUP_CELL = 2000  # characters of a group's members in one cell: a spreadsheet's cell holds 32,767, a real group needs far fewer


def _members(values: list[str]) -> str:
    """A group's members' names (or sids, or emails) in one cell, joined by "; ", as many as fit in GROUP_CELL characters
    and then how many more: every member still has a row of their own in grades_by_student.csv."""
    shown, length = [], 0
    for i, value in enumerate(values):
        more = len(values) - i - 1
        tail = f"; and {more} more" if more else ""
        if shown and length + 2 + len(value) + len(tail) > GROUP_CELL:
            return "; ".join(shown) + f"; and {len(values) - i} more"
        shown.append(value)
        length += len(value) + 2 * (len(shown) > 1)
    return "; ".join(shown)


def canvas_csv(rubric: Rubric, entries: list[Entry], rows: dict[str, dict]) -> str:
    """The per-student gradebook in the layout Canvas's gradebook import reads (CANVAS), the score under one assignment
    column named for what was graded (the part, when the rubric grades one). Gradescope's sid goes to SIS User ID and the
    email to SIS Login ID; a submission with no submitter listed goes by its id as the name, for the importer to match
    by hand. A score that is not final (infra_error) is left blank, which Canvas reads as no change. Canvas's import
    cannot take it as it is (the column is matched by hand): this is canvas.csv only where grade-all is given no
    gradebook Canvas exported (canvas.py writes it in that one)."""
    parts = _parts(rubric)
    table = [[*CANVAS, parts[0] if len(parts) == 1 else rubric.course]]
    for entry in (e for e in entries if e.id in rows):
        row = rows[entry.id]
        score = points_text(row["score"]) if row["status"] != "infra_error" else ""
        for person in entry.submitters or (Submitter(name=entry.id),):
            table.append([person.name, "", person.sid, person.email, "", score])
    return csv_text(table)


def _parts(rubric: Rubric) -> list[str]:
    return list(dict.fromkeys(c.part for c in rubric.components))


def _grade_header(rubric: Rubric) -> list[str]:
    return [*GRADE, *(c.id for c in rubric.components), *(f"part: {p}" for p in _parts(rubric))]


def _grade_fields(rubric: Rubric, row: dict) -> list[str]:
    """A graded row's status, score and maximum, then its points per component and per part (blank unless graded)."""
    graded = row["status"] == "ok"
    return [row["status"], points_text(row["score"]), points_text(row["max_score"]),
            *(points_text(row["components"].get(c.id, 0.0)) if graded else "" for c in rubric.components),
            *(points_text(row["parts"].get(p, 0.0)) if graded else "" for p in _parts(rubric))]


def leaderboard_rows(board: list[str], entries: list[Entry], rows: dict[str, dict]) -> tuple[list[str], list[list]]:
    """The batch's leaderboard: its columns (`board`, the rubric's in the board's order, less those no submission has a
    value in) and one row per submission with a value in any (rank, id, names, a value per column; results.json carries
    a submission's entries only where its answers were right: report.leaderboard). The first column ranks, in its
    order: ties share a rank (1, 2, 2, 4), and a submission with no number there is UNRANKED, after the ranked ones."""
    boards = {e.id: {b["name"]: b for b in rows[e.id].get("leaderboard", [])} for e in entries if e.id in rows}
    columns = [c for c in board if any(c in b for b in boards.values())]
    if not columns:
        return [], []
    first = columns[0]
    sign = -1 if next(b[first]["order"] for b in boards.values() if first in b) == "desc" else 1

    def number(entry: Entry) -> float | None:
        value = boards[entry.id].get(first, {}).get("value")
        return value if isinstance(value, (int, float)) and math.isfinite(value) else None

    listed = [e for e in entries if boards.get(e.id)]
    ranked = sorted((e for e in listed if number(e) is not None), key=lambda e: sign * number(e))  # stable: ties by id
    ranks: dict[str, int] = {}
    for i, e in enumerate(ranked):
        ranks[e.id] = ranks[ranked[i - 1].id] if i and number(e) == number(ranked[i - 1]) else i + 1
    return columns, [[ranks.get(e.id, UNRANKED), e.id, "; ".join(p.name for p in e.submitters),
                      *(boards[e.id].get(c, {}).get("value", "") for c in columns)]
                     for e in [*ranked, *(e for e in listed if e.id not in ranks)]]


def leaderboard_csv(columns: list[str], table: list[list]) -> str:
    return csv_text([["rank", "submission_id", "name", *columns], *table])


def points_text(x: float) -> str:
    """Points as a gradebook writes them: whole numbers without a decimal point, others to 4 places."""
    return f"{x:.4f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def feedback_md(sid: str, row: dict, results: dict) -> str:
    """What the student may read: results.json's output, which starts with the summary (report.summary_lines), then
    each failed case's name, points and message in the summary's order (hidden cases' messages hold no values),
    neighbours with one message under one heading; a file that does not import (import_failure) has its error said
    once, in the summary, and under its heading only where it happened. Not graded: why, once. Text not the grader's
    own words is fenced (md_fence), or in a heading escaped (md_text), so none of it renders."""
    lines = [f"# Submission {md_text(sid)}", "", f"Score: {points_text(row['score'])} / {points_text(row['max_score'])}", ""]
    if not results.get("tests"):
        return "\n".join(lines + ["Not graded:", "", md_fence(row["message"]), ""])
    lines += [md_fence(results["output"]), ""]
    components = {t["tags"][0] for t in results["tests"]}
    broken = {c: import_failure([t for t in results["tests"] if t["tags"][0] == c]) for c in components}
    for group in neighbours(failures_first(results["tests"]), lambda t: t["output"]):
        hidden = "" if any(t["visibility"] == "visible" for t in group) else f" (hidden case{'s' * (len(group) > 1)})"
        points = f"{points_text(sum(t['score'] for t in group))} / {points_text(sum(t['max_score'] for t in group))}"
        lines += [f"## {md_text(numbered(group))}{hidden}: {points}", ""]
        said, failure = group[0]["output"], broken[group[0]["tags"][0]]
        first, _, rest = said.partition("\n")
        if failure and first == failure[1] and failure[1] in results["output"]:  # the summary named the error: once is enough
            lines += ["Its file does not import (the error is in the summary above), so none of these cases could run.", ""]
            said = rest
        if said:
            lines += [md_fence(said), ""]
    return "\n".join(lines)


IMPORT_ERRORS = ("SyntaxError", "IndentationError", "TabError", "ImportError", "ModuleNotFoundError")
RAISED = "Your code raised "


def import_failure(tests: list[dict]) -> tuple[str, str] | None:
    """Why a component's cases failed, when it is that its file does not import: every case raised one error, a
    SyntaxError or ImportError (or their kin), or any error at the top level of a file (`in <module>`). Returns the
    error's name and the line that says it; None otherwise. A case built on a failing part says so before the error
    (runner._causes_first): the error is read from where it starts."""
    said = {t.get("output", "").split(PRINTED)[0] for t in tests}
    said = {s[s.find(RAISED):] if RAISED in s else s for s in said}
    if len(said) != 1 or any(t.get("extra_data", {}).get("outcome") != "raised" for t in tests):
        return None
    first, _, where = said.pop().partition("\n")
    error = first.removeprefix(RAISED).split(":", 1)[0]
    return (error, first) if first.startswith(RAISED) and (error in IMPORT_ERRORS or ", in <module>" in where) else None


def summary_json(rubric: Rubric, rows: dict[str, dict], record: dict, runs: list[dict]) -> str:
    """The batch in figures. `runs`: every run into its folder, this one last (when it started, its seconds, how many
    it graded, whether it finished: false when stopped or failed); wall_seconds is their total."""
    counts = Counter(row["status"] for row in rows.values())
    return json.dumps({
        "submissions": len(rows),
        "statuses": {status: counts.get(status, 0) for status in STATUSES},
        "max_score": max_score(rubric),
        "component_max": {c.id: component_max(c) for c in rubric.components},
        **record,
        "runs": runs,
        "wall_seconds": round(sum(run["seconds"] for run in runs), 1),
    }, indent=2)
