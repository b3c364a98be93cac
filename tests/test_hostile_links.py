"""A submission is data, read only inside itself: a link that leaves it (a symbolic link in a folder, a zip entry
with link mode bits) is refused, never followed, and named in the submission's account; a link that stays inside is
read within it. Each test builds its hostile input and checks which defence held and what the person sees."""
import csv
import errno
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest
import yaml
from attacks import grade_cli
from conftest import SOLUTIONS
from test_batch import grade_all, small_rubric

from autograder.batch.inputs import ExportError, read_batch
from autograder.submission import open_submission
from autograder.submission.reading import SubmissionError, read_within

SECRET = "TOP-SECRET 7c1f: the first line of a file only root may read"
OUTSIDE = "is a link to something outside the submission: not followed (submit the files themselves, not links to them)"
TO_A_LINK = "is a link to a link: not followed (a link is followed only to a file of the submission)"


def private_file(tmp_path: Path) -> Path:
    """A root-only file outside every submission, as the grader's host holds them."""
    path = tmp_path / "private" / "staff.txt"
    path.parent.mkdir()
    path.write_text(SECRET + "\ndef ngram(): pass\n")
    path.chmod(0o600)
    return path


def folder_with(tmp_path: Path, files: dict[str, str] = {}, links: dict[str, str | Path] = {}, name: str = "submitted") -> Path:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    for name, target in links.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).symlink_to(target)
    return folder


def account(submission) -> dict[str, str]:
    return {entry.path: f"{entry.action}: {entry.why}" for entry in submission.account}


def nowhere(secret: str, *places: Path) -> None:
    """`secret` is in no file under `places`."""
    for place in places:
        for path in [place] if place.is_file() else place.rglob("*"):
            assert not path.is_file() or secret.encode() not in path.read_bytes(), path


def zip_with(path: Path, files: dict[str, str], links: dict[str, str]) -> Path:
    """A zip as `zip --symlinks` or a Gradescope upload writes links: the target's text as the entry's bytes, with
    S_IFLNK in the Unix mode bits of external_attr."""
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        for name, target in links.items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3  # Unix: unzip restores it as a link
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, target)
    return path


RNN = (SOLUTIONS / "rnn.py").read_text()  # something gradable beside the links, so the submission is not refused whole


# ---- links in a folder -----------------------------------------------------------------------------------------------

def test_a_link_to_a_root_only_file_outside_is_refused_and_never_read(tmp_path):
    secret = private_file(tmp_path)
    sub = open_submission(folder_with(tmp_path, {"rnn.py": RNN}, {"ngram.py": secret, "notes.txt": secret}), tmp_path / "out")
    assert sub.files == {"rnn.py"}
    assert account(sub)["ngram.py"] == f"skipped: ngram.py {OUTSIDE}"
    assert account(sub)["notes.txt"] == f"skipped: notes.txt {OUTSIDE}"
    assert sub.problems["ngram.py"] == f"Not graded: ngram.py {OUTSIDE}."  # every ngram case says so
    nowhere(SECRET, sub.dir)


def test_links_to_the_courses_solutions_earn_nothing(tmp_path):
    up = os.path.relpath(SOLUTIONS / "backprop.py", tmp_path / "submitted")  # ../../..: climbing out of the submission
    folder = folder_with(tmp_path, {}, {"ngram.py": SOLUTIONS / "ngram.py", "backprop.py": up})
    with pytest.raises(SubmissionError) as refused:
        open_submission(folder, tmp_path / "out")
    assert str(refused.value).endswith(f"Found:\n  backprop.py: skipped: backprop.py {OUTSIDE}\n  ngram.py: skipped: ngram.py {OUTSIDE}")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_link_inside_the_submission_is_graded_as_the_file_it_names(tmp_path):
    ngram = (SOLUTIONS / "ngram.py").read_text()
    folder = folder_with(tmp_path, {"work/ngram.py": ngram, "work/lstm.py": "X = 1\n", "work/rnn.py": RNN},
                         {"ngram.py": "work/ngram.py", "lstm.py": "./work/../work/lstm.py",  # `..` that stays inside
                          "rnn.py": "rnn_copy.py", "rnn_copy.py": "work/rnn.py",  # a chain of links
                          "work/self.py": "self.py"})  # a link to itself
    sub = open_submission(folder, tmp_path / "out")
    assert sub.files == {"ngram.py", "lstm.py"} and (sub.dir / "ngram.py").read_text() == ngram
    assert account(sub)["ngram.py"] == account(sub)["lstm.py"] == "graded: "
    assert account(sub)["rnn.py"] == f"skipped: rnn.py {TO_A_LINK}"
    assert account(sub)["work/self.py"] == f"skipped: work/self.py {TO_A_LINK}"


@pytest.mark.parametrize("links, why", [
    ({"ngram.py": "gone.py"}, "ngram.py is a link to nothing in the submission: not followed (a link is followed only to a file of the submission)"),
    ({"ngram.py": "a.py", "a.py": "ngram.py"}, f"ngram.py {TO_A_LINK}"),  # a loop
    ({"ngram.py": "hw"}, "ngram.py is a link to a folder: not followed (a link is followed only to a file of the submission)"),
])
def test_a_dangling_looping_or_folder_link_is_named_not_followed(tmp_path, links, why):
    sub = open_submission(folder_with(tmp_path, {"rnn.py": RNN, "hw/notes.md": "# notes"}, links), tmp_path / "out")
    assert sub.files == {"rnn.py"} and account(sub)["ngram.py"] == f"skipped: {why}"
    assert sub.problems["ngram.py"] == f"Not graded: {why}."


def test_a_linked_folder_is_not_walked_into(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ngram.py").write_text((SOLUTIONS / "ngram.py").read_text())
    (elsewhere / "rnn.py").write_text(RNN)
    with pytest.raises(SubmissionError) as refused:
        open_submission(folder_with(tmp_path, {}, {"hw": elsewhere}), tmp_path / "out")
    assert str(refused.value).endswith(f"Found:\n  hw: skipped: hw {OUTSIDE}")
    inside = open_submission(folder_with(tmp_path, {"hw/rnn.py": RNN}, {"copy": "hw"}, name="inside"), tmp_path / "out2")
    assert inside.files == {"rnn.py"} and account(inside)["copy"].startswith("skipped: copy is a link to a folder: not followed")


def test_a_notebook_linked_from_outside_is_refused(tmp_path):
    notebook = tmp_path / "private.ipynb"
    notebook.write_text(json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": f"# {SECRET}"}]}))
    sub = open_submission(folder_with(tmp_path, {"rnn.py": RNN}, {"nb/ngram.ipynb": notebook}), tmp_path / "out")
    assert sub.files == {"rnn.py"} and account(sub)["nb/ngram.ipynb"] == f"skipped: nb/ngram.ipynb {OUTSIDE}"
    nowhere(SECRET, sub.dir)


def test_a_file_swapped_for_a_link_after_listing_is_not_read(tmp_path):
    """The defence against a race: every name below the submission is opened with O_NOFOLLOW, folders too."""
    secret = private_file(tmp_path)
    folder = folder_with(tmp_path, {}, {"ngram.py": secret, "hw": secret.parent})
    for rel in ("ngram.py", "hw/staff.txt"):
        with pytest.raises(OSError) as refused:
            read_within(folder, rel)
        assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)  # the link itself, never what it names


@pytest.mark.parametrize("name", ["ngram.py", "hw.zip"])
def test_a_submission_that_is_itself_a_link_is_refused(tmp_path, name):
    target = SOLUTIONS / "ngram.py" if name.endswith(".py") else zip_with(tmp_path / "real.zip", {"ngram.py": "x = 1"}, {})
    (tmp_path / name).symlink_to(target)
    with pytest.raises(SubmissionError, match=f"^{name} is a link, which the grader does not follow to a submission"):
        open_submission(tmp_path / name, tmp_path / "out")


# ---- links in a zip ------------------------------------------------------------------------------------------------

def test_zip_link_entries_pointing_outside_are_refused(tmp_path):
    secret = private_file(tmp_path)
    archive = zip_with(tmp_path / "hw.zip", {"hw/rnn.py": RNN},
                       {"hw/ngram.py": "../../private/staff.txt", "hw/backprop.py": "/etc/passwd", "hw/notes.txt": str(secret)})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"rnn.py"}
    for rel in ("hw/ngram.py", "hw/backprop.py", "hw/notes.txt"):
        assert account(sub)[rel] == f"skipped: {rel} {OUTSIDE}"
    for target in ("/etc/passwd", "private/staff.txt"):  # neither what a link names, nor its text taken as code
        nowhere(target, sub.dir)


def test_a_zip_link_entry_to_another_entry_reads_that_entry(tmp_path):
    ngram = (SOLUTIONS / "ngram.py").read_text()
    archive = zip_with(tmp_path / "hw.zip", {"hw/work/ngram.py": ngram}, {"hw/ngram.py": "work/ngram.py", "hw/rnn.py": "rnn.py"})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"ngram.py"} and (sub.dir / "ngram.py").read_text() == ngram
    assert account(sub)["hw/ngram.py"] == "graded: " and account(sub)["hw/rnn.py"] == f"skipped: hw/rnn.py {TO_A_LINK}"


# ---- batches -------------------------------------------------------------------------------------------------------

def test_a_linked_entry_of_a_class_folder_is_refused_alone(tmp_path):
    secret = private_file(tmp_path)
    ngram = (SOLUTIONS / "ngram.py").read_text()
    classroom = tmp_path / "class"
    (classroom / "alice").mkdir(parents=True)
    (classroom / "alice" / "ngram.py").write_text(ngram)
    (classroom / "alice" / "staff.py").symlink_to(secret)
    (classroom / "mallory").symlink_to(SOLUTIONS)
    (classroom / "eve.py").symlink_to(secret)
    entries, kind, _ = read_batch(classroom, tmp_path / "unpacked")
    assert kind == "folder of submissions" and [e.id for e in entries] == ["alice", "eve", "mallory"]
    digests = {e.id: e.digest() for e in entries}
    secret.write_text("changed")  # were any of them hashing what a link names, its digest would change
    assert {e.id: e.digest() for e in entries} == digests
    assert open_submission(entries[0].path, tmp_path / "a").files == {"ngram.py"}
    for entry in entries[1:]:
        with pytest.raises(SubmissionError, match=f"^{entry.path.name} is a link, which the grader does not follow"):
            open_submission(entry.path, tmp_path / entry.id)


def test_a_submission_shipped_to_a_ray_node_keeps_its_links_as_links(tmp_path):
    """grade-all --backend ray reads each submission on the driver and lays it out again on a node (cluster.Shipped):
    the defence is that links travel as links, never read through, so the node's open_submission refuses the same
    ones a grade here would (c70f8b1 read every link's target on the driver and shipped it as a plain file)."""
    from autograder.batch.cluster import Shipped

    secret = private_file(tmp_path)
    folder = folder_with(tmp_path, {"work/rnn.py": RNN}, {"ngram.py": secret, "rnn.py": "work/rnn.py"})
    (tmp_path / "linked").symlink_to(folder)
    shipped = [Shipped.read(folder), Shipped.read(tmp_path / "linked")]
    assert SECRET.encode() not in b"".join(shipped[0].files.values()) and shipped[0].links == {"ngram.py": str(secret), "rnn.py": "work/rnn.py"}
    node = tmp_path / "node"
    node.mkdir()
    laid = [s.write(node) for s in shipped]
    submission = open_submission(laid[0], tmp_path / "graded")
    assert account(submission)["ngram.py"] == f"skipped: ngram.py {OUTSIDE}" and submission.files == {"rnn.py"}
    with pytest.raises(SubmissionError, match="^linked is a link, which the grader does not follow"):
        open_submission(laid[1], tmp_path / "graded-link")


def test_an_export_zip_keeps_its_link_entries_as_links_and_writes_nothing_through_them(tmp_path):
    """An exported zip is unpacked before grading (inputs._unpacked): a link entry becomes a link, judged like any
    other, and no entry is written through a link (`d` -> a folder outside, then `d/x.py`, stays inside; a file named
    like a link before it), nor anything outside the unpacked folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    meta = yaml.safe_dump({"submission_1": {":submitters:": [{":name:": "S1"}]}})
    export = tmp_path / "export.zip"
    with zipfile.ZipFile(export, "w") as z:
        z.writestr("submission_metadata.yml", meta)
        z.writestr("submission_1\\rnn.py", RNN)  # a Windows zip's separator
        for name, target in [("submission_1/d", str(outside)), ("submission_1/ngram.py", str(private_file(tmp_path)))]:
            info = zipfile.ZipInfo(name)
            info.create_system, info.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, target)
        z.writestr("submission_1/d/x.py", "written through a link")
        z.writestr("submission_1/ngram.py", "# the same name again")
    entries, kind, _ = read_batch(export, tmp_path / "unpacked")
    assert kind == "Gradescope export" and list(outside.iterdir()) == []
    folder = entries[0].path
    assert (folder / "d" / "x.py").is_file() and (folder / "ngram.py").is_symlink() and (folder / "rnn.py").is_file()
    submission = open_submission(folder, tmp_path / "graded")
    assert submission.files == {"rnn.py"} and account(submission)["ngram.py"] == f"skipped: ngram.py {OUTSIDE}"


def export_with(tmp_path: Path, ids: list[int]) -> Path:
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(yaml.safe_dump({f"submission_{i}": {":submitters:": [{":name:": f"S{i}"}]}
                                                                   for i in ids}))
    return export


def test_a_gradescope_export_whose_submission_folder_is_a_link(tmp_path):
    export = export_with(tmp_path, [1, 2])
    (export / "submission_1").symlink_to(SOLUTIONS)
    (export / "submission_2").symlink_to(tmp_path / "nowhere")  # dangling: still this submission's, not the batch's failure
    entries, kind, _ = read_batch(export, tmp_path / "unpacked")
    assert kind == "Gradescope export" and [e.id for e in entries] == ["1", "2"]
    assert all(e.digest() for e in entries)
    for entry in entries:
        with pytest.raises(SubmissionError, match=f"^submission_{entry.id} is a link"):
            open_submission(entry.path, tmp_path / entry.id)


def test_a_gradescope_metadata_file_that_is_a_link_is_refused(tmp_path):
    secret = private_file(tmp_path)
    export = tmp_path / "export"
    (export / "submission_1").mkdir(parents=True)
    (export / "submission_metadata.yml").symlink_to(secret)
    with pytest.raises(ExportError, match="submission_metadata.yml cannot be read: it is a link, which the grader does not follow") as refused:
        read_batch(export, tmp_path / "unpacked")
    assert SECRET not in str(refused.value)


def test_an_entrys_digest_hashes_its_links_not_what_they_name(tmp_path):
    secret = private_file(tmp_path)
    folder = folder_with(tmp_path, {"ngram.py": "x = 1"}, {"staff.py": secret, "hw": secret.parent})
    entries, _, _ = read_batch(tmp_path, tmp_path / "unpacked")
    entry = next(e for e in entries if e.id == "submitted")
    before = entry.digest()
    secret.write_text("changed")
    (secret.parent / "more.py").write_text("y = 2")
    assert entry.digest() == before
    (folder / "staff.py").unlink()
    (folder / "staff.py").symlink_to(SOLUTIONS / "ngram.py")  # a link changed is a submission changed: graded again
    assert entry.digest() != before


# ---- what the person sees: real grades -----------------------------------------------------------------------------

@pytest.mark.slow
def test_grade_refuses_the_links_and_says_so_in_every_case_and_the_account(tmp_path):
    secret = private_file(tmp_path)
    folder = folder_with(tmp_path, {"work/backprop.py": (SOLUTIONS / "backprop.py").read_text()},
                         {"ngram.py": SOLUTIONS / "ngram.py", "backprop.py": "work/backprop.py", "notes.py": secret})
    graded = grade_cli(folder, tmp_path, ["ngram", "backprop"])
    assert graded.returncode == 0, graded.output
    scores = graded.scores()
    assert scores["ngram"][0] == 0 and scores["backprop"][0] == scores["backprop"][1] > 0
    ngram_cases = [t["output"] for t in graded.results["tests"] if t["tags"][0] == "ngram"]
    assert ngram_cases and all(f"ngram.py {OUTSIDE}" in out for out in ngram_cases)
    files = {f["path"]: f for f in graded.results["extra_data"]["files"]}
    assert files["ngram.py"]["action"] == files["notes.py"]["action"] == "skipped" and files["backprop.py"]["action"] == "graded"
    assert f"ngram.py: skipped: ngram.py {OUTSIDE}" in graded.results["output"]
    assert f"ngram.py: skipped: ngram.py {OUTSIDE}" in " ".join(graded.output.split())  # the terminal, its lines rewrapped
    assert SECRET not in json.dumps(graded.results) and SECRET not in graded.output


@pytest.mark.slow
def test_grade_all_grades_the_class_and_refuses_a_linked_submission(tmp_path):
    secret = private_file(tmp_path)
    classroom = tmp_path / "class"
    (classroom / "alice").mkdir(parents=True)
    for file in ("ngram.py", "backprop.py"):
        (classroom / "alice" / file).write_text((SOLUTIONS / file).read_text())
    (classroom / "mallory").symlink_to(SOLUTIONS)
    (classroom / "eve.py").symlink_to(secret)
    out = tmp_path / "out"
    batch = grade_all(classroom, "--out", out, "--config", small_rubric(tmp_path), "--jobs", 1)
    printed, _ = batch.communicate(timeout=300)
    assert batch.returncode == 0, printed
    rows = {r["submission_id"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert rows["alice"]["status"] == "ok" and float(rows["alice"]["score"]) > 0
    for sid, name in (("mallory", "mallory"), ("eve", "eve.py")):
        assert (rows[sid]["status"], rows[sid]["score"]) == ("not_gradable", "0")
        results = (out / "results" / sid / "results.json").read_text()
        assert f"{name} is a link, which the grader does not follow to a submission" in results
        assert f"{name} is a link" in (out / "feedback" / f"{sid}.md").read_text()
    nowhere(SECRET, out)
    assert "def ngram_counts" not in (out / "feedback" / "mallory.md").read_text()
