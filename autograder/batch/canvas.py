"""canvas.csv in the gradebook Canvas exported for the course (`grade-all --canvas-gradebook FILE --canvas-assignment
"Name (id)"`): Canvas's own header, Points Possible row and students, in its order, each with the score of the
submission matched to them; without an export, gradebook.canvas_csv's default columns, to be matched by hand.

The rules relied on, from Canvas's own code (instructure/canvas-lms: GradebookExporter writes the export,
GradebookImporter reads an import, Assignment.title_and_id splits an assignment's header; method names below are
theirs):
- Text: CSV, comma-separated, or semicolon-separated where the user's settings ask (the importer tells them apart by
  the first three lines: the separator that splits them into the same number of cells, the one with more cells
  winning, `identify_delimiter`); the export may begin with a byte-order mark (`include_bom`).
- Header: the student columns, then custom columns, then one column per assignment headed `Name (id)`, then the
  totals. The student columns are `Student` (or `LastName`, `FirstName`), `ID`, then `SIS User ID`, `SIS Login ID`
  (the login alone where SIS ids are not shown), `Integration ID` and `Root Account` where the course has them, and
  `Section` last; the importer refuses a header whose first cells do not hold Student and ID or whose last student
  column is not Section (`header?`, `update_column_count`). It ignores every column whose header holds Current
  Score, Current Points, Current Grade, Final Score, Final Points, Final Grade or Override Score/Grade/Status
  (`NON_ASSIGNMENT_COLUMN_HEADERS`), and finds an assignment by the id in its header's parentheses, else by the
  whole header as its title, else creates one (`parse_assignments`).
- Rows: a row whose first cell holds "Points Possible" gives the assignments' points (the export's second row, its
  student cells blank; a value that differs from the assignment's changes the assignment's points); a row of only
  blanks, "Muted" or "Manual Posting" (the export's row for assignments whose grades are hidden) is skipped; every
  other row is a student (`check_for_non_student_row`), found by ID (Canvas's user id), then SIS User ID, then SIS
  Login ID, then the name (`process_student`). A blank grade leaves the grade as it was (`no_change_to_value?`).
- The course's test student, "Student, Test", is exported last; its grades are Canvas's to keep.

What this writes from the export: its student columns and the one assignment column, nothing else (another
assignment's column or a total could only change or be ignored); its header and Points Possible row as they are
(the points are Canvas's: a rubric whose maximum differs is said, never written over); its students in its order,
each row's student cells as Canvas wrote them, so that Canvas finds every one by its own ID first. The score is the
submission's matched to the student (RULES: SIS User ID = Gradescope's sid, else SIS Login ID = the email or the
sid, else "email": SIS Login ID = the email's name before the @), blank where there is none or the grade is not
final. Canvas's export holds no email column: a login is the email or its name where a school's logins are either.
Every cell goes through csv_cell (inert.py), which leaves Canvas's ids and the grader's numbers as they are.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from ..rubric import Rubric
from .gradebook import canvas_csv, max_score, points_text
from .inert import csv_cell
from .inputs import Entry

POINTS_POSSIBLE = "Points Possible"
TEST_STUDENT = "Student, Test"  # Canvas's test student, its sortable name
_HIDDEN = re.compile(r"^\s*(Muted|Manual Posting.*)?\s*$", re.IGNORECASE)
_TOTALS = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                     "Override Score|Override Grade|Override Status")
_TITLE_AND_ID = re.compile(r"\A(.*)\s\((\d+)\)\Z", re.DOTALL)
RULES = ("SIS User ID", "SIS Login ID", "email")  # the matching rules, strongest first
HAND = ("canvas.csv: Canvas's default columns with the rubric's name as the assignment; match the column by hand on import "
        "(or give --canvas-gradebook and --canvas-assignment)")


class CanvasError(ValueError):
    """The file given is not a gradebook Canvas exported, or lacks the assignment's column."""


@dataclass(frozen=True)
class CanvasStudent:
    cells: tuple[str, ...]  # the row as Canvas wrote it
    name: str
    canvas_id: str
    sis_user_id: str
    sis_login_id: str
    test: bool  # Canvas's test student


@dataclass(frozen=True)
class Gradebook:
    """What canvas.csv keeps of Canvas's export: the student columns and the assignment's (`kept`, indices into
    its rows), the Points Possible row, the students in Canvas's order, and how the text was written."""
    path: Path
    assignment: str
    header: tuple[str, ...]
    kept: tuple[int, ...]
    points_possible: tuple[str, ...] | None
    students: tuple[CanvasStudent, ...]
    delimiter: str
    bom: bool


def read_gradebook(path: Path, assignment: str) -> Gradebook:
    """Canvas's gradebook export at `path`, for the column headed `assignment`; CanvasError says why it is not one."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise CanvasError(f"{path} is not UTF-8 text, which is what Canvas exports: export the gradebook from Canvas again "
                          "(Grades, then Export) rather than a copy saved by a spreadsheet") from None
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    delimiter = _delimiter(text)
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error as exc:
        raise CanvasError(f"{path} is not a CSV file Canvas could read: {exc}") from None
    header = rows[0] if rows else []
    students_end = _student_columns(header)
    if not students_end:
        raise CanvasError(f"{path} is not a gradebook Canvas exported: its first row must start with Student, ID and the SIS "
                          "columns and end them with Section, as Canvas's export does (Grades, then Export, then Export Entire "
                          f"Gradebook); it starts: {', '.join(header[:6]) or 'nothing'}")
    column = _assignment_column(path, header, students_end, assignment)
    names = header[:students_end]
    login = _index(names, r"SIS\s+Login\s+ID")
    user = _index(names, r"SIS\s+User\s+ID")
    if login is None:
        raise CanvasError(f"{path} has no SIS Login ID column to find students by: export the gradebook as someone who may "
                          "see SIS ids, or leave out --canvas-gradebook and match the students by hand")
    first_last = header[0] == "LastName" and header[1] == "FirstName"
    points, students = None, []
    for row in rows[1:]:
        if row and POINTS_POSSIBLE in row[0]:
            points = points or tuple(row)
        elif not all(_HIDDEN.match(cell) for cell in row):
            cells = [_at(row, i).strip() for i in (0, 1, 2 if first_last else 1, user, login)]
            name = f"{cells[0]}, {cells[1]}" if first_last else cells[0]
            students.append(CanvasStudent(tuple(row), name, *cells[2:], name == TEST_STUDENT))
    return Gradebook(path, header[column], tuple(header), (*range(students_end), column), points, tuple(students), delimiter, bom)


def _delimiter(text: str) -> str:
    """Canvas's importer's choice (identify_delimiter): the separator that splits the first three lines into the same
    number of cells, semicolons where they give more cells than commas."""
    lines = text.splitlines()[:3]
    counts = {}
    for sep in (";", ","):
        sizes = {len(next(csv.reader([line], delimiter=sep), [])) for line in lines}
        counts[sep] = sizes.pop() if len(sizes) == 1 else 0
    return ";" if counts[";"] > counts[","] else ","


def _student_columns(header: list[str]) -> int:
    """How many leading columns Canvas's importer reads as the student's, 0 where it refuses the header (its
    `row_has_student_headers?`, `update_column_count` and `header?`, custom columns aside: they come after Section)."""
    def at(i: int) -> str:
        return _at(header, i)

    first_last = len(header) > 4 and "LastName" in at(0) and "FirstName" in at(1) and "ID" in at(2)
    if not (len(header) > 3 and "Student" in at(0) and "ID" in at(1)) and not first_last:
        return 0
    names = 4 if at(0) == "LastName" and at(1) == "FirstName" else 3  # the name(s), ID and Section
    count = names
    if re.search(r"SIS\s+Login\s+ID", at(names - 1)):
        count += 1
    elif re.search(r"SIS\s+User\s+ID", at(names - 1)) and re.search(r"SIS\s+Login\s+ID", at(names)):
        integration = 1 if re.search(r"Integration\s+ID", at(names + 1)) else 0
        count += 2 + integration + (1 if re.search(r"Root\s+Account", at(names + 1 + integration)) else 0)
    return count if "Section" in at(count - 1) else 0


def _at(row, i: int | None) -> str:
    """The row's i-th cell, blank past its end (Ruby's row[i]: nil)."""
    return row[i] if i is not None and i < len(row) else ""


def _index(names: list[str], pattern: str) -> int | None:
    return next((i for i, name in enumerate(names) if re.search(pattern, name)), None)


def _assignment_column(path: Path, header: list[str], students_end: int, assignment: str) -> int:
    """Where the column headed `assignment` is, after the student columns; CanvasError, listing the export's
    assignment columns, where it is none or one Canvas's import does not read as an assignment."""
    wanted = assignment.strip()
    after = header[students_end:]
    listed = [h for h in after if _TITLE_AND_ID.match(h.strip()) and not _TOTALS.search(h)]
    found = next((i for i, h in enumerate(after) if h.strip() == wanted), None)
    if found is not None and after[found] in listed:
        return students_end + found
    why = ("is a total, which Canvas's import ignores" if found is not None and _TOTALS.search(after[found]) else
           "is not an assignment's: Canvas heads each assignment's column with its name and id, 'Name (id)'" if found is not None
           else "is not in it" + ("" if _TITLE_AND_ID.match(wanted) else " (give it as Canvas heads it, 'Name (id)')"))
    raise CanvasError(f"{path}: the column {wanted!r} {why}; its assignment columns are: "
                      + ("; ".join(listed) if listed else "none"))


@dataclass(frozen=True)
class Canvas:
    """canvas.csv's text, what summary.json says of it (its "canvas" entry) and the lines to say."""
    text: str
    record: dict
    lines: list[str]


def canvas_export(rubric: Rubric, entries: list[Entry], rows: dict[str, dict], gradebook: Gradebook | None) -> Canvas:
    """canvas.csv: in Canvas's export `gradebook` (the module's docstring), else in gradebook.canvas_csv's columns."""
    if gradebook is None:
        return Canvas(canvas_csv(rubric, entries, rows), {"gradebook": None, "match": "by hand on import"}, [HAND])
    matches, unmatched = match(gradebook, entries)
    table = [[gradebook.header[i] for i in gradebook.kept]]
    if gradebook.points_possible:
        table.append([_at(gradebook.points_possible, i) for i in gradebook.kept])
    matched, without, not_final = [], [], []
    for n, student in enumerate(gradebook.students):
        score = ""
        if n in matches:
            entry, rule = matches[n]
            row = rows.get(entry.id)
            if row and row["status"] != "infra_error":
                score = points_text(row["score"])
            else:
                not_final.append(entry.id)
            matched.append({"student": student.name, "id": student.canvas_id, "submission_id": entry.id, "matched_by": rule})
        elif not student.test:
            without.append({"student": student.name, "id": student.canvas_id, "sis_user_id": student.sis_user_id,
                            "sis_login_id": student.sis_login_id})
        table.append([*(_at(student.cells, i) for i in gradebook.kept[:-1]), score])
    out = io.StringIO()
    csv.writer(out, delimiter=gradebook.delimiter).writerows([csv_cell(v) for v in row] for row in table)
    by_rule = {rule: sum(m["matched_by"] == rule for m in matched) for rule in RULES}
    points = _at(gradebook.points_possible, gradebook.kept[-1]) if gradebook.points_possible else None
    record = {"gradebook": str(gradebook.path.resolve()), "assignment": gradebook.assignment, "points_possible": points,
              "rubric_max_score": max_score(rubric), "canvas_students": sum(not s.test for s in gradebook.students),
              "matched": len(matched), "matched_by": by_rule, "students": matched, "without_submission": without,
              "unmatched_submissions": unmatched, "not_final": sorted(set(not_final))}
    return Canvas(("\ufeff" if gradebook.bom else "") + out.getvalue(), record, _lines(record))


def match(gradebook: Gradebook, entries: list[Entry]) -> tuple[dict[int, tuple[Entry, str]], list[dict]]:
    """Each Canvas student (by index) matched to the submission of the submitter they are, with the rule that matched,
    rule by rule over all students (a strong match is never taken by a weaker one of an earlier row); and every
    submitter no student matched. A key two submissions' submitters share matches neither (ambiguous)."""
    people = [(entry, person) for entry in entries for person in entry.submitters]
    keys = {
        "SIS User ID": lambda s: [s.sis_user_id],
        "SIS Login ID": lambda s: [s.sis_login_id],
        "email": lambda s: [s.sis_login_id] if "@" not in s.sis_login_id else [],
    }
    known = {
        "SIS User ID": lambda p: [p.sid],
        "SIS Login ID": lambda p: [p.email, p.sid],
        "email": lambda p: [p.email.rpartition("@")[0]] if "@" in p.email else [],
    }
    matches: dict[int, tuple[Entry, str]] = {}
    taken: set[int] = set()  # people matched, by their index in `people`
    for rule in RULES:
        index: dict[str, set[int]] = {}
        for k, (_, person) in enumerate(people):
            for key in known[rule](person):
                if key.strip():
                    index.setdefault(key.strip().casefold(), set()).add(k)
        for n, student in enumerate(gradebook.students):
            if n in matches or student.test:
                continue
            for key in keys[rule](student):
                found = index.get(key.strip().casefold(), set()) - taken if key.strip() else set()
                if len({people[k][0].id for k in found}) == 1:
                    matches[n] = (people[min(found)][0], rule)
                    taken |= found
                    break
    unmatched = [{"submission_id": entry.id, "name": person.name, "sid": person.sid, "email": person.email}
                 for k, (entry, person) in enumerate(people) if k not in taken]
    unmatched += [{"submission_id": e.id, **dict.fromkeys(("name", "sid", "email"), "")} for e in entries if not e.submitters]
    return matches, unmatched


def _lines(record: dict) -> list[str]:
    """What a TA reads of canvas.csv: how many of Canvas's students were matched and how, who was not, and what to know
    before importing it."""
    ids = sorted(dict.fromkeys(u["submission_id"] for u in record["unmatched_submissions"]))
    without = record["without_submission"]
    rules = ", ".join(f"{rule}: {n}" for rule, n in record["matched_by"].items())
    lines = [f"canvas.csv: {record['matched']} of {record['canvas_students']} Canvas students matched (by {rules}); "
             f"{_count(len(without), 'student')} without a submission; "
             f"{_count(len(ids), 'submission')} matched to no Canvas student" + (f": {', '.join(ids)}" if ids else "")]
    if without:
        lines.append("canvas.csv: left blank (no change in Canvas), no submission matched: "
                     + "; ".join(s["student"] + (f" (SIS User ID {s['sis_user_id']})" if s["sis_user_id"] else "")
                                 for s in without))
    if record["not_final"]:
        lines.append("canvas.csv: left blank, the grade not final (not graded yet, or infra_error): "
                     + ", ".join(record["not_final"]))
    if record["points_possible"] is None:
        lines.append(f"canvas.csv: {record['gradebook']} has no Points Possible row: Canvas keeps the assignment's points")
    elif _points(record["points_possible"]) != round(record["rubric_max_score"], 2):
        lines.append(f"canvas.csv: Canvas's {record['assignment']} is worth {record['points_possible']} points, the rubric's "
                     f"maximum is {points_text(record['rubric_max_score'])}: the scores are the rubric's points, and Canvas's points "
                     "are kept as they are (change them in Canvas if they should be the rubric's)")
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _points(text: str) -> float | None:
    """A Points Possible cell as Canvas's importer reads it (its decimal_comma_to_period: the last , or . is the
    decimal point, any before it group digits); None where it is no number (a hidden assignment's, say)."""
    text = text.strip()
    if not re.fullmatch(r"-?[0-9.,]+", text):
        return None
    *whole, last = re.split(r"[,.]", text)
    try:
        return round(float(f"{''.join(whole)}.{last}" if whole else last), 2)
    except ValueError:
        return None

