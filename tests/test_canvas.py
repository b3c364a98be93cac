"""canvas.csv in the gradebook Canvas exported (batch/canvas.py): an export written as Canvas writes it (a byte-order
mark, CRLF, the hidden-grades row, the Points Possible row, names with commas, custom and total columns, the test
student last), read, matched to a batch's submitters and written back; the result checked against Canvas's import
rules as canvas-lms's GradebookImporter applies them (transcribed below, apart from the code under test); a malformed
export and a half-given pair of options refused before anything is graded. No test here starts a process."""
import csv
import io
import json
import re
from pathlib import Path

import pytest

from autograder.batch import BatchOptions, grade_all
from autograder.batch.canvas import HAND, CanvasError, canvas_export, read_gradebook
from autograder.batch.inputs import Entry, Submitter
from autograder.cli import main
from autograder.terminal import USAGE_ERROR

ASSIGNMENT = "Language models, part 1 (2002)"  # a comma in the name: Canvas quotes the header cell
HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes", "Homework 0 (1001)", ASSIGNMENT,
          "Assignments Current Score", "Current Score", "Unposted Current Score", "Final Score", "Unposted Final Score"]
HIDDEN = ["", "", "", "", "", "", "", "Manual Posting", "", "", "", "", ""]
POINTS = ["    Points Possible", "", "", "", "", "(read only)", "10.00", "279.00", *["(read only)"] * 5]
STUDENTS = [  # as Canvas orders them: by sortable name, the test student last
    ["Hopper, Grace", "12", "CANVAS-3", "grace@example.edu", "Section 1", "", "8.00", "", "80", "80", "80", "80", "80"],
    ["Lovelace, Ada", "11", "001", "ada.l", "Section 1", "late twice", "9.00", "", "90", "90", "90", "90", "90"],
    ["Nobody, Ned", "14", "009", "ned@example.edu", "Section 2", "", "", "", "", "", "", "", ""],
    ["Turing, Alan", "13", "X-2", "alan", "Section 1, Section 2", "", "10.00", "", "100", "100", "100", "100", "100"],
    ["Student, Test", "15", "", "", "Section 1", "", "", "", "", "", "", "", ""],
]
PEOPLE = {
    "1001": (Submitter("Ada Lovelace", "001", "ada@example.edu"), Submitter("Alan Turing", "002", "alan@example.edu")),
    "1002": (Submitter("Grace Hopper", "003", "grace@example.edu"),),  # SIS id not Gradescope's sid: matched by login
    "1003": (Submitter("Zed Unlisted", "077", "zed@example.edu"),),  # dropped the course in Canvas
}
OK = {"status": "ok", "score": 30.0, "max_score": 279.0}


def canvas_text(rows: list[list[str]], delimiter: str = ",", bom: bool = True) -> str:
    """A CSV as Canvas's exporter writes it (Ruby's CSV: a cell quoted only when it must be; CRLF; a BOM when asked)."""
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return ("\ufeff" if bom else "") + out.getvalue()


def write_export(tmp_path: Path, rows=None, name: str = "gradebook.csv", **kw) -> Path:
    path = tmp_path / name
    path.write_bytes(canvas_text(rows or [HEADER, HIDDEN, POINTS, *STUDENTS], **kw).encode("utf-8"))
    return path


def entries() -> list[Entry]:
    return [*(Entry(sid, Path("unused"), people) for sid, people in PEOPLE.items()), Entry("alice", Path("unused"))]


GRADED = {"1001": OK, "1002": {**OK, "status": "infra_error", "score": 12.0}, "1003": {**OK, "score": 5.0}, "alice": OK}


# ---- Canvas's import, transcribed from canvas-lms app/models/gradebook_importer.rb (and Assignment.title_and_id) ---------

def imported(text: str) -> dict:
    """What Canvas's import reads of a file: its delimiter, student columns, assignments (title, id, points) and each
    student row's identifiers and grades; AssertionError where it would refuse the file ("Invalid header row")."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines()[:3]
    counts = {}
    for sep in (";", ","):  # identify_delimiter
        sizes = {len(next(csv.reader([line], delimiter=sep))) for line in lines}
        counts[sep] = sizes.pop() if len(sizes) == 1 else 0
    sep = ";" if counts[";"] > counts[","] else ","
    rows = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=sep) if r and not re.fullmatch(r"[;, ]+", sep.join(r))]
    header = rows[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1], header  # row_has_student_headers?
    count = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        count += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        integration = 1 if len(header) > 4 and re.search(r"Integration\s+ID", header[4]) else 0
        count += 2 + integration
    assert "Section" in header[count - 1], header  # header?
    totals = "Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|Override Score"
    assignments = [(i, h) for i, h in enumerate(header) if i >= count and not re.search(totals, h)]
    points = next((r for r in rows[1:] if "Points Possible" in r[0]), None)
    hidden = re.compile(r"\s*(Muted|Manual Posting.*)?\s*", re.I)
    students = [r for r in rows[1:] if "Points Possible" not in r[0] and not all(hidden.fullmatch(c) for c in r)]
    title_and_id = [re.fullmatch(r"(.*)\s\((\d+)\)", h, re.DOTALL) for _, h in assignments]
    return {"delimiter": sep, "header": header, "rows": rows, "student_columns": count,
            "assignments": [(*(m.groups() if m else (h, None)), points[i] if points else None)
                            for m, (i, h) in zip(title_and_id, assignments)],
            "students": [{"ID": r[1], "SIS User ID": r[2], "SIS Login ID": r[3], "grades": [r[i] for i, _ in assignments]}
                         for r in students]}


# ---- reading and writing ---------------------------------------------------------------------------------------------

def test_canvas_csv_keeps_canvass_header_points_row_and_students_in_its_order(tmp_path, rubric):
    gradebook = read_gradebook(write_export(tmp_path), ASSIGNMENT)
    canvas = canvas_export(rubric, entries(), GRADED, gradebook)
    assert canvas.text.startswith("\ufeff")  # as Canvas wrote it: a spreadsheet opens it as UTF-8
    header, *rows = csv.reader(io.StringIO(canvas.text.removeprefix("\ufeff"), newline=""))
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]  # the assignment, as Canvas heads it
    assert rows[0] == ["    Points Possible", "", "", "", "", "279.00"]  # Canvas's points, its blanks; the hidden row is left out
    assert rows[1:] == [
        ["Hopper, Grace", "12", "CANVAS-3", "grace@example.edu", "Section 1", ""],  # matched by login, grade not final: blank
        ["Lovelace, Ada", "11", "001", "ada.l", "Section 1", "30"],  # by SIS User ID
        ["Nobody, Ned", "14", "009", "ned@example.edu", "Section 2", ""],  # no submission: blank, no change in Canvas
        ["Turing, Alan", "13", "X-2", "alan", "Section 1, Section 2", "30"],  # by the email's name: the group's grade
        ["Student, Test", "15", "", "", "Section 1", ""],  # Canvas's test student: kept, never matched
    ]
    assert "\r\n" in canvas.text


def test_each_match_says_its_rule_and_every_student_and_submission_left_over_is_listed(tmp_path, rubric):
    canvas = canvas_export(rubric, entries(), GRADED, read_gradebook(write_export(tmp_path), ASSIGNMENT))
    record = canvas.record
    assert [(s["student"], s["id"], s["submission_id"], s["matched_by"]) for s in record["students"]] == [
        ("Hopper, Grace", "12", "1002", "SIS Login ID"), ("Lovelace, Ada", "11", "1001", "SIS User ID"),
        ("Turing, Alan", "13", "1001", "email")]
    assert record["matched_by"] == {"SIS User ID": 1, "SIS Login ID": 1, "email": 1}
    assert record["canvas_students"] == 4 and record["matched"] == 3  # the test student is not counted
    assert [s["student"] for s in record["without_submission"]] == ["Nobody, Ned"]
    assert [(u["submission_id"], u["name"]) for u in record["unmatched_submissions"]] == [("1003", "Zed Unlisted"), ("alice", "")]
    assert record["not_final"] == ["1002"] and record["points_possible"] == "279.00" and record["assignment"] == ASSIGNMENT
    assert canvas.lines[0] == ("canvas.csv: 3 of 4 Canvas students matched (by SIS User ID: 1, SIS Login ID: 1, email: 1); "
                               "1 student without a submission; 2 submissions matched to no Canvas student: 1003, alice")
    assert "Nobody, Ned (SIS User ID 009)" in canvas.lines[1] and "1002" in canvas.lines[2]
    assert not any("worth" in line for line in canvas.lines)  # Canvas's points are the rubric's maximum
    json.dumps(record)  # it goes into summary.json


def test_a_stronger_rule_wins_over_a_weaker_match_of_an_earlier_row(tmp_path, rubric):
    """Row by row, Ada's login (her email) would give her submission to the first row; rule by rule, the row whose SIS
    User ID is her sid has her, and the first row, whose SIS User ID no submitter has, none."""
    rows = [HEADER, POINTS, ["Lovelace, A.", "21", "OTHER", "ada@example.edu", "S", *[""] * 8],
            ["Lovelace, Ada", "11", "001", "ada.l", "S", *[""] * 8]]
    canvas = canvas_export(rubric, entries(), GRADED, read_gradebook(write_export(tmp_path, rows), ASSIGNMENT))
    assert [(s["student"], s["matched_by"]) for s in canvas.record["students"]] == [("Lovelace, Ada", "SIS User ID")]
    assert [s["student"] for s in canvas.record["without_submission"]] == ["Lovelace, A."]


def test_points_that_differ_from_the_rubrics_are_said_and_kept(tmp_path, rubric):
    points = [*POINTS[:7], "100.00", *POINTS[8:]]
    gradebook = read_gradebook(write_export(tmp_path, [HEADER, points, *STUDENTS]), ASSIGNMENT)
    canvas = canvas_export(rubric, entries(), GRADED, gradebook)
    assert next(csv.reader(io.StringIO(canvas.text.splitlines()[1])))[-1] == "100.00"
    assert any(f"Canvas's {ASSIGNMENT} is worth 100.00 points, the rubric's maximum is 279" in line for line in canvas.lines)


def test_a_semicolon_export_with_decimal_commas_is_read_and_written_back_with_semicolons(tmp_path, rubric):
    points = [*POINTS[:7], "279,00", *POINTS[8:]]
    path = write_export(tmp_path, [HEADER, points, *STUDENTS], delimiter=";", bom=False)
    canvas = canvas_export(rubric, entries(), GRADED, read_gradebook(path, ASSIGNMENT))
    assert not canvas.text.startswith("\ufeff") and not any("worth" in line for line in canvas.lines)  # 279,00 is 279
    read = imported(canvas.text)
    assert read["delimiter"] == ";" and read["assignments"] == [("Language models, part 1", "2002", "279,00")]
    assert [s["grades"] for s in read["students"]] == [[""], ["30"], [""], ["30"], [""]]


def test_without_an_export_canvas_csv_is_the_default_columns_said_to_need_matching_by_hand(rubric):
    canvas = canvas_export(rubric, entries(), GRADED, None)
    assert canvas.lines == [HAND] and canvas.record["gradebook"] is None
    assert next(csv.reader(io.StringIO(canvas.text)))[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


# ---- against Canvas's import rules -------------------------------------------------------------------------------

def test_what_is_written_is_what_canvass_import_reads_as_this_assignments_grades(tmp_path, rubric):
    gradebook = read_gradebook(write_export(tmp_path), ASSIGNMENT)
    text = canvas_export(rubric, entries(), GRADED, gradebook).text
    read = imported(text)
    assert all(len(row) == len(read["header"]) for row in read["rows"])  # every row as wide as the header
    assert read["header"][-1] == ASSIGNMENT and read["student_columns"] == 5
    assert read["assignments"] == [("Language models, part 1", "2002", "279.00")]  # found by its id, Canvas's points
    exported = [r for r in csv.reader(io.StringIO(write_export(tmp_path).read_text(encoding="utf-8-sig"), newline=""))][3:]
    assert [(s["ID"], s["SIS User ID"], s["SIS Login ID"]) for s in read["students"]] == [tuple(r[1:4]) for r in exported]
    assert [s["grades"] for s in read["students"]] == [[""], ["30"], [""], ["30"], [""]]  # blank: Canvas keeps its grade


def test_an_export_with_integration_ids_and_names_needing_quotes_keeps_its_student_columns(tmp_path, rubric):
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section", ASSIGNMENT, "Current Score"]
    rows = [header, ["    Points Possible", "", "", "", "", "", "279", "(read only)"],
            ['O"Hara, "Scarlett"', "31", "001", "ada.l", "int-1", "S", "", "12"]]
    text = canvas_export(rubric, entries(), GRADED, read_gradebook(write_export(tmp_path, rows, bom=False), ASSIGNMENT)).text
    read = imported(text)
    assert read["header"] == header[:-1] and read["student_columns"] == 6
    assert read["rows"][2] == ['O"Hara, "Scarlett"', "31", "001", "ada.l", "int-1", "S", "30"]


def test_a_canvas_name_that_starts_a_formula_reaches_the_ta_behind_a_quote_and_canvas_still_finds_the_row_by_id(tmp_path, rubric):
    rows = [HEADER, POINTS, ['=HYPERLINK("http://127.0.0.1:9/x","click")', "11", "001", "ada.l", "S", *[""] * 8]]
    text = canvas_export(rubric, entries(), GRADED, read_gradebook(write_export(tmp_path, rows), ASSIGNMENT)).text
    student = imported(text)["rows"][2]
    assert student[0] == "'=HYPERLINK(\"http://127.0.0.1:9/x\",\"click\")" and student[1:] == ["11", "001", "ada.l", "S", "30"]


# ---- refused -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, message", [
    ([["submission_id", "name", "sid", "email", "status", "score"], ["1001", "Ada", "001", "a@x", "ok", "3"]],
     "is not a gradebook Canvas exported: .* it starts: submission_id, name, sid"),
    ([["Student", "ID", "SIS User ID", "SIS Login ID", ASSIGNMENT], ["Ada", "11", "001", "ada", "3"]],
     "not a gradebook Canvas exported"),  # no Section
    ([["Student", "ID", "Section", ASSIGNMENT], ["Ada", "11", "S", "3"]], "no SIS Login ID column"),
    ([], "it starts: nothing"),
])
def test_a_file_that_is_not_canvass_gradebook_is_refused_saying_why(tmp_path, rows, message):
    with pytest.raises(CanvasError, match=message):
        read_gradebook(write_export(tmp_path, rows or [[]]), ASSIGNMENT)


@pytest.mark.parametrize("assignment, message", [
    ("Language models, part 1", r"is not in it \(give it as Canvas heads it, 'Name \(id\)'\)"),
    ("Homework 9 (9999)", "is not in it; its assignment columns are: Homework 0 \\(1001\\); Language models, part 1 \\(2002\\)$"),
    ("Current Score", "is a total, which Canvas's import ignores"),
    ("Notes", "is not an assignment's"),
])
def test_an_assignment_the_export_has_no_column_for_is_refused_listing_those_it_has(tmp_path, assignment, message):
    with pytest.raises(CanvasError, match=message):
        read_gradebook(write_export(tmp_path), assignment)


def test_a_gradebook_a_spreadsheet_saved_in_another_encoding_is_refused(tmp_path):
    path = tmp_path / "gradebook.csv"
    path.write_bytes(canvas_text([HEADER, POINTS, ["Müller, Jörg", *STUDENTS[0][1:]]], bom=False).encode("latin-1"))
    with pytest.raises(CanvasError, match="is not UTF-8 text"):
        read_gradebook(path, ASSIGNMENT)


@pytest.mark.parametrize("given", [["--canvas-gradebook", "gradebook.csv"], ["--canvas-assignment", ASSIGNMENT]])
def test_grade_all_wants_both_canvas_options_or_neither(tmp_path, capsys, given):
    assert main(["grade-all", str(tmp_path / "none"), "--out", str(tmp_path / "out"), *given]) == USAGE_ERROR
    assert "--canvas-gradebook and --canvas-assignment go together" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing graded, nothing written


def test_grade_all_refuses_a_malformed_gradebook_before_grading(tmp_path, capsys):
    path = write_export(tmp_path, [["Name", "SID", "Email"], ["Ada", "001", "a@x"]])
    assert main(["grade-all", str(tmp_path / "none"), "--out", str(tmp_path / "out"), "--canvas-gradebook", str(path),
                 "--canvas-assignment", ASSIGNMENT]) == USAGE_ERROR
    assert "is not a gradebook Canvas exported" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_grade_all_writes_canvas_csv_in_the_export_and_says_so_in_its_output_and_summary(tmp_path, rubric):
    """The batch's one writer of canvas.csv, given the gradebook through BatchOptions: a Gradescope export whose every
    submission is missing from it is not gradable (a 0 each), so that nothing is graded and no process starts."""
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(
        "submission_1001:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '001'\n    :email: ada@example.edu\n"
        "submission_1003:\n  :submitters:\n  - :name: Zed Unlisted\n    :sid: '077'\n    :email: zed@example.edu\n")
    options = BatchOptions(1, None, "same-user", False, (), 60.0, canvas=read_gradebook(write_export(tmp_path), ASSIGNMENT))
    said: list[str] = []
    grade_all(rubric, export, tmp_path / "out", options, said.append, lambda *a: None)
    rows = list(csv.reader(io.StringIO((tmp_path / "out" / "canvas.csv").read_text(encoding="utf-8-sig"), newline="")))
    assert rows[0][-1] == ASSIGNMENT and [r[-1] for r in rows[2:]] == ["", "0", "", "", ""]  # Ada's not gradable: 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["canvas"]["matched_by"] == {"SIS User ID": 1, "SIS Login ID": 0, "email": 0}
    assert any(line.startswith("canvas.csv: 1 of 4 Canvas students matched") and line.endswith("no Canvas student: 1003")
               for line in said)
