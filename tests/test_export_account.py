"""A batch accounts for every submission of an export and finishes whatever one of them holds: a damaged or encrypted
member, a folder listed but missing, a folder present but unlisted (issue 41, item 1), and `grade-all --plan`, which
gives that account before anything is graded."""
import csv
import io
import json
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import SOLUTIONS
from test_batch import METADATA, small_rubric

from autograder.batch.inputs import ExportError, read_batch
from autograder.batch.plan import plan_batch
from autograder.cli import main
from autograder.rubric import load_rubric

NGRAM = (SOLUTIONS / "ngram.py").read_text()


def zipped(files: dict[str, str | bytes]) -> bytearray:
    """A zip as Gradescope's export gives it (deflated), as bytes to damage before `written`."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return bytearray(buf.getvalue())


def flipped(data: bytearray, name: str) -> None:
    """One byte of member `name`'s compressed data inverted, as a bad disk or a broken download leaves it."""
    m = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(name)
    name_len, extra_len = struct.unpack("<HH", data[m.header_offset + 26: m.header_offset + 30])
    data[m.header_offset + 30 + name_len + extra_len + m.compress_size // 2] ^= 0xFF


def encrypted(data: bytearray, name: str) -> None:
    """Member `name` marked encrypted in the central directory, as a zip made with a password reads."""
    at = 0
    while True:
        at = data.index(b"PK\x01\x02", at + 1)
        name_len = struct.unpack("<H", data[at + 28: at + 30])[0]
        if data[at + 46: at + 46 + name_len].decode() == name:
            data[at + 8] |= 1
            return


def written(data: bytearray, path: Path) -> Path:
    path.write_bytes(bytes(data))
    return path


def damaged_export(tmp_path: Path) -> Path:
    """Gradescope's export of four submissions: 1001 whole, 1002 with a byte flipped, 1003 with a member only a
    password opens, 1009 present but not in the metadata; the metadata lists 1004, whose folder is missing."""
    metadata = METADATA + "submission_1003:\n  :submitters:\n  - :name: Cy\n" + "submission_1004:\n  :submitters:\n  - :name: Di\n"
    top = "assignment_5_export/"
    data = zipped({top + "submission_metadata.yml": metadata, top + "submission_1001/ngram.py": NGRAM,
                   top + "submission_1002/ngram.py": NGRAM, top + "submission_1002/notes.txt": "mine\n",
                   top + "submission_1003/ngram.py": NGRAM, top + "submission_1009/README.md": "hello\n",
                   top + "stray.txt": NGRAM[:600]})
    flipped(data, top + "submission_1002/ngram.py")
    encrypted(data, top + "submission_1003/ngram.py")
    flipped(data, top + "stray.txt")
    return written(data, tmp_path / "export.zip")


def test_each_damaged_member_is_its_submissions_problem_and_the_rest_are_read(tmp_path):
    entries, kind, strays = read_batch(damaged_export(tmp_path), tmp_path / "unpacked")
    assert kind == "Gradescope export" and [e.id for e in entries] == ["1001", "1002", "1003", "1004", "1009"]
    by_id = {e.id: e for e in entries}
    assert by_id["1001"].problem == "" and (by_id["1001"].path / "ngram.py").read_text() == NGRAM
    assert by_id["1002"].problem == ("assignment_5_export/submission_1002/ngram.py could not be read from export.zip: its bytes "
                                     "do not match the checksum the zip holds for them (the zip is damaged there)")
    assert not (by_id["1002"].path / "ngram.py").exists() and (by_id["1002"].path / "notes.txt").exists()  # no half file
    assert by_id["1003"].problem.endswith("export.zip: it is encrypted, and only its password opens it")
    assert by_id["1004"].problem == ("submission_metadata.yml lists submission_1004, but the export holds no folder "
                                     "submission_1004/: download the export again")
    assert by_id["1009"].note == "not listed in submission_metadata.yml: graded under its folder's name, with no submitter"
    assert by_id["1009"].submitters == () and by_id["1003"].submitters[0].name == "Cy"
    assert len(strays) == 1 and strays[0].startswith("assignment_5_export/stray.txt could not be read")
    # read again from the unpacked copy, the account is the same
    assert read_batch(tmp_path / "export.zip", tmp_path / "unpacked") == (entries, kind, strays)


def test_a_damaged_metadata_file_refuses_the_export_saying_so(tmp_path):
    data = zipped({"submission_metadata.yml": METADATA * 3, "submission_1001/ngram.py": NGRAM, "submission_1002/ngram.py": NGRAM})
    flipped(data, "submission_metadata.yml")
    with pytest.raises(ExportError, match=r"^submission_metadata.yml could not be read from export.zip: .*: without it "
                                          r"the export cannot be read; download it again$"):
        read_batch(written(data, tmp_path / "export.zip"), tmp_path / "unpacked")


def test_a_zipped_class_folder_keeps_a_submission_whose_only_file_is_damaged(tmp_path):
    data = zipped({"alice.py": NGRAM, "bob.py": NGRAM, "carol/ngram.py": NGRAM, "../evil.py": "x = 1\n"})
    flipped(data, "bob.py")
    entries, kind, strays = read_batch(written(data, tmp_path / "class.zip"), tmp_path / "unpacked")
    assert kind == "folder of submissions" and [(e.id, bool(e.problem)) for e in entries] == [
        ("alice", False), ("bob", True), ("carol", False), ("evil", True)]
    assert entries[1].problem.startswith("bob.py could not be read from class.zip")
    assert entries[3].problem == ("class.zip holds an unsafe path, ../evil.py (it would be written outside the folder it "
                                  "is unpacked to): not unpacked")
    assert not (tmp_path / "unpacked" / "evil.py").exists() and not (tmp_path / "evil.py").exists()


def test_the_plan_accounts_for_every_submission_before_grading(tmp_path, capsys):
    config = small_rubric(tmp_path)
    source, out = damaged_export(tmp_path), tmp_path / "out"
    with zipfile.ZipFile(source, "a") as z:  # a misnamed file, and one of the two components missing
        z.writestr("assignment_5_export/submission_1001/Backprop (1).py", "x = 1\n")
    plan = plan_batch(load_rubric(config), source, out, (), None)
    assert (plan["found"], plan["to_grade"], plan["already_graded"], plan["not_gradable"]) == (5, 1, 0, 4)
    assert plan == json.loads((out / "plan.json").read_text())
    first, *others = plan["submissions"]
    assert first["id"] == "1001" and first["status"] == "to grade" and first["graded_from"] == {"ngram.py": "ngram.py"}
    assert first["submitters"] == ["Ada Lovelace", "Alan Turing"]
    assert first["problems"] == ["Backprop (1).py: misnamed: probably meant as backprop.py; rename `Backprop (1).py` to `backprop.py` "
                                 "to have it graded", next(p for p in first["problems"] if p.startswith("Not graded: backprop.py"))]
    assert [(p["id"], p["status"]) for p in others] == [("1002", "not gradable"), ("1003", "not gradable"),
                                                       ("1004", "not gradable"), ("1009", "not gradable")]
    assert others[3]["reason"].startswith("nothing in the submission can be graded") and "note" in others[3]
    assert not (out / "secret.txt").exists() and not (out / "journal.jsonl").exists()  # a plan grades and makes nothing else

    assert main(["grade-all", str(source), "--out", str(out), "--config", str(config), "--plan"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("5 submissions (Gradescope export ") and printed[0].endswith(
        ": 1 to grade, 0 already graded, 4 not gradable; 1 with a problem")
    assert printed[1] == "graded: every component of grading.yaml, out of 70 points"
    shown = [line.split(":")[0] for line in printed[2:-1] if not line.startswith("  ")]  # a reason's list of files is indented
    assert shown == ["1002", "1003", "1004", "1009", "1001", "1001", "1009", "part of no submission"]
    assert printed[-1] == f"what each submission will be graded from: {out / 'plan.json'}"


@pytest.mark.slow
def test_a_damaged_export_is_graded_whole_and_a_rerun_grades_nothing_twice(tmp_path):
    """The export of the plan, graded: every submission has its row, the damaged and missing ones not gradable with
    their reasons, the unlisted one under its folder's name; run again, nothing is graded."""
    config, source, out = small_rubric(tmp_path), damaged_export(tmp_path), tmp_path / "out"
    args = [sys.executable, "-m", "autograder", "grade-all", str(source), "--out", str(out), "--config", str(config), "--jobs", "1"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "5 submissions (Gradescope export" in first.stderr and "2 to grade with 1 job; 3 not gradable as the export holds them" in first.stderr
    assert "note: 1 submission folder not listed in the export's metadata, graded under its folder name with no submitter: 1009" in first.stderr
    rows = {r["submission_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert {sid: r["status"] for sid, r in rows.items()} == {"1001": "ok", "1002": "not_gradable", "1003": "not_gradable",
                                                            "1004": "not_gradable", "1009": "not_gradable"}
    assert float(rows["1001"]["ngram"]) > 0 and rows["1009"]["name"] == ""
    assert "could not be read from export.zip" in (out / "feedback" / "1002.md").read_text()
    assert "no folder submission_1004/" in (out / "feedback" / "1004.md").read_text()
    again = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "5 already graded with this rubric, grader and secret; 0 to grade" in again.stderr, again.stderr
    assert len((out / "journal.jsonl").read_text().splitlines()) == 5
    only = subprocess.run([*args, "--only", "1002", "--regrade"], capture_output=True, text=True, timeout=120)
    assert only.returncode == 0 and "1 to grade" not in only.stderr and "0 to grade with 1 job; 1 not gradable" in only.stderr, only.stderr
    assert [r["submission_id"] for r in csv.DictReader(open(out / "grades.csv"))] == ["1001", "1002", "1003", "1004", "1009"]
