"""Submissions arrive as a folder, a zip (nested folder included) or a single file."""
import zipfile

import pytest
from conftest import SOLUTIONS

from autograder.submission import SubmissionError, open_submission


def test_folder_zip_nested_and_single_file(tmp_path):
    assert open_submission(SOLUTIONS, tmp_path / "a").files == {p.name for p in SOLUTIONS.glob("*.py")}
    archive = tmp_path / "hw.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(SOLUTIONS / "ngram.py", "hw1/ngram.py")
        z.write(SOLUTIONS / "backprop.py", "hw1/backprop.py")
        z.writestr("__MACOSX/hw1/._ngram.py", "junk")
        z.writestr("hw1/helpers.py", "X = 1\n")
    sub = open_submission(archive, tmp_path / "b")
    assert sub.files == {"ngram.py", "backprop.py"}
    assert (sub.dir / "helpers.py").read_text() == "X = 1\n"
    assert open_submission(SOLUTIONS / "ngram.py", tmp_path / "c").files == {"ngram.py"}


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "absent", "does not exist"),
    (lambda p: (p / "notes.txt").write_text("hi") and p / "notes.txt", "expected a folder, a .zip or a .py file"),
    (lambda p: (p / "mine.py").write_text("x = 1") and p / "mine.py", "a single file must be one of"),
    (lambda p: (p / "bad.zip").write_bytes(b"not a zip") and p / "bad.zip", "not a readable zip"),
])
def test_unreadable_submissions_say_why(tmp_path, make, message):
    with pytest.raises(SubmissionError, match=message):
        open_submission(make(tmp_path), tmp_path / "out")


def test_zip_with_escaping_path_is_refused(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../../ngram.py", "x = 1")
    with pytest.raises(SubmissionError, match="unsafe path"):
        open_submission(archive, tmp_path / "out")
