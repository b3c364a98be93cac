"""Submissions arrive as a folder, a zip (nested folder included) or a single file; every file found is accounted for."""
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, SOLUTIONS, isolation, with_staff_tests

from autograder.rubric import load_rubric
from autograder.release.notebooks import Handout, render_notebook
from autograder.runner import grade
from autograder.submission import open_submission, untouched_starter
from autograder.submission.names import FILE_ORDER
from autograder.submission.reading import MAX_FILE_BYTES, SubmissionError


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


# Every file accounted for: what the grader did with each file, and why, in words students and TAs read.

def lines(submission) -> list[str]:
    return [str(entry) for entry in submission.account]


def folder_with(tmp_path, files: dict[str, bytes]):
    folder = tmp_path / "submitted"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def notebook_of(source: Path) -> bytes:
    """The notebook the release generates for `source`, as a student saves it."""
    return nbformat.writes(render_notebook(source.name, source.read_text(), [Handout(source.stem, source.stem, "# Handout")])).encode()


@pytest.mark.parametrize("name, expected", [
    ("NGram.py", "ngram.py"), ("rnn.PY", "rnn.py"), ("backprop.py.txt", "backprop.py"), ("attention (1).py", "attention.py"),
    ("attention(2).py", "attention.py"), ("attention-1.py", "attention.py"), ("lstm_solution.py", "lstm.py"),
    ("transformer-final.py", "transformer.py"), ("NGram (1).ipynb", "ngram.ipynb"), ("ngram - Copy.py", "ngram.py"),
    ("ngram copy 2.py", "ngram.py"), ("Copy of ngram.ipynb", "ngram.ipynb"),
])
def test_misnamed_file_is_reported_with_the_rename_and_not_graded(tmp_path, name, expected):
    module = expected.replace(".ipynb", ".py")
    data = notebook_of(SOLUTIONS / module) if expected.endswith(".ipynb") else (SOLUTIONS / module).read_bytes()
    other = "rnn.py" if module != "rnn.py" else "lstm.py"  # something gradable, so that the submission is not refused
    sub = open_submission(folder_with(tmp_path, {name: data, other: (SOLUTIONS / other).read_bytes()}), tmp_path / "out")
    assert sub.files == {other}
    assert f"{name}: misnamed: probably meant as {module}; rename `{name}` to `{expected}` to have it graded" in lines(sub)
    assert sub.problems[module] == (f"Not graded: {module} is not in the submission, but {name} looks like it: rename `{name}` to "
                                    f"`{expected}`, and submit again (files are graded only under their expected names).")


@pytest.mark.slow
def test_every_case_of_a_misnamed_component_says_which_rename_to_make(rubric, tmp_path):
    folder = folder_with(tmp_path, {"NGram.py": (SOLUTIONS / "ngram.py").read_bytes(), "rnn.py": (SOLUTIONS / "rnn.py").read_bytes()})
    run = graded_ngram(rubric, open_submission(folder, tmp_path / "out"))
    assert run.results and {r.output for r in run.results} == {
        "Not graded: ngram.py is not in the submission, but NGram.py looks like it: rename `NGram.py` to `ngram.py`, and submit "
        "again (files are graded only under their expected names)."}


def test_misnamed_files_are_graded_when_the_rubric_accepts_them(tmp_path):
    rubric_file = tmp_path / "grading.yaml"
    rubric_file.write_text((ROOT / "grading.yaml").read_text().replace("accept_misnamed: false", "accept_misnamed: true")
                           .replace("solutions: solutions", f"solutions: {SOLUTIONS}"))
    with_staff_tests(tmp_path)
    assert load_rubric(rubric_file).accept_misnamed and not load_rubric(ROOT / "grading.yaml").accept_misnamed
    folder = folder_with(tmp_path, {"NGram.py": (SOLUTIONS / "ngram.py").read_bytes(), "rnn.PY": (SOLUTIONS / "rnn.py").read_bytes()})
    sub = open_submission(folder, tmp_path / "out", accept_misnamed=True)
    assert sub.files == {"ngram.py", "rnn.py"} and not sub.problems
    assert (sub.dir / "ngram.py").read_bytes() == (SOLUTIONS / "ngram.py").read_bytes()
    assert lines(sub) == ["NGram.py: graded: as ngram.py, though misnamed: rename `NGram.py` to `ngram.py`",
                          "rnn.PY: graded: as rnn.py, though misnamed: rename `rnn.PY` to `rnn.py`"]


def test_a_close_name_beside_the_exact_one_is_left_alone(tmp_path):
    folder = folder_with(tmp_path, {"ngram.py": (SOLUTIONS / "ngram.py").read_bytes(), "ngram (1).py": b"X = 1\n",
                                    "ngram-old.ipynb": notebook_of(SOLUTIONS / "ngram.py")})
    sub = open_submission(folder, tmp_path / "out", accept_misnamed=True)
    assert sub.files == {"ngram.py"} and (sub.dir / "ngram (1).py").read_bytes() == b"X = 1\n"
    assert lines(sub) == ["ngram (1).py: copied: not a component file; your graded files may import it",
                          "ngram-old.ipynb: ignored: named like ngram.py, which is graded from ngram.py",
                          "ngram.py: graded"]


def test_finished_notebook_wins_over_the_untouched_starter(tmp_path):
    folder = folder_with(tmp_path, {"attention.ipynb": notebook_of(SOLUTIONS / "attention.py"),
                                    "attention.py": (ROOT / "starter" / "attention.py").read_bytes()})
    sub = open_submission(folder, tmp_path / "out")
    assert sub.files == {"attention.py"} and not untouched_starter((sub.dir / "attention.py").read_bytes())
    assert "# cell " in (sub.dir / "attention.py").read_text()  # the notebook's code cells
    assert lines(sub) == [
        "attention.ipynb: graded: its code cells, as attention.py",
        "attention.py: ignored: the untouched starter (its functions only raise NotImplementedError); attention.ipynb is graded instead"]
    assert not sub.caveats  # the starter held no work of the student's


@pytest.mark.slow
def test_when_both_are_worked_on_the_py_wins_and_every_case_says_so(rubric, tmp_path):
    started = (SOLUTIONS / "ngram.py").read_text().replace('return [BOS] * (n - 1) + list(tokens) + [EOS]', 'raise NotImplementedError')
    assert started != (SOLUTIONS / "ngram.py").read_text()
    folder = folder_with(tmp_path, {"ngram.py": started.encode(), "ngram.ipynb": notebook_of(SOLUTIONS / "ngram.py")})
    sub = open_submission(folder, tmp_path / "out")
    assert (sub.dir / "ngram.py").read_text() == started
    assert lines(sub) == ["ngram.ipynb: ignored: ngram.py is graded instead: both are worked on, and a .py wins over a notebook",
                          "ngram.py: graded"]
    run = graded_ngram(rubric, sub)
    caveat = "Graded ngram.py, not ngram.ipynb: both are worked on, and a .py wins over a notebook."
    assert run.results and all(r.output.endswith(caveat) for r in run.results)


@pytest.mark.slow
def test_zip_of_the_working_folder_grades_the_nested_notebook(rubric, tmp_path):
    archive = tmp_path / "hw.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for starter in sorted((ROOT / "starter").glob("*.py")):
            z.write(starter, f"work/{starter.name}")
            z.writestr(f"work/notebooks/{starter.stem}.ipynb", notebook_of(SOLUTIONS / "ngram.py" if starter.stem == "ngram" else starter))
        z.writestr("work/notebooks/.ipynb_checkpoints/ngram-checkpoint.ipynb", notebook_of(ROOT / "starter" / "ngram.py"))
        z.writestr("__MACOSX/work/notebooks/._ngram.ipynb", "junk")
        z.writestr("work/README.md", "# Part 1")
        z.writestr("work/autograder/cases/ngram.py", "")
        z.writestr("work/autograder/run.py", "")
    sub = open_submission(archive, tmp_path / "out")
    account = lines(sub)
    assert "work/notebooks/ngram.ipynb: graded: its code cells, as ngram.py" in account
    assert ("work/ngram.py: ignored: the untouched starter (its functions only raise NotImplementedError); "
            "work/notebooks/ngram.ipynb is graded instead") in account
    assert "work/notebooks/rnn.ipynb: ignored: work/rnn.py is graded instead (both are the untouched starter)" in account
    assert "work/rnn.py: graded" in account
    assert "work/README.md: ignored: not a component file or a notebook named like one" in account
    assert ("work/autograder/ (2 files): ignored: not in work/, where the grader looks for component files (notebooks named like "
            "them are looked for in every folder)") in account
    assert "work/notebooks/.ipynb_checkpoints/ (1 file): ignored: hidden files or macOS metadata" in account
    assert "__MACOSX/ (1 file): ignored: hidden files or macOS metadata" in account
    run = graded_ngram(rubric, sub)
    assert run.results and all(r.passed for r in run.results), [r.output for r in run.results if not r.passed]


@pytest.mark.slow
def test_every_case_of_a_file_too_large_says_so(rubric, tmp_path):
    folder = folder_with(tmp_path, {"ngram.py": b"#" * (50 << 20), "rnn.py": (SOLUTIONS / "rnn.py").read_bytes()})
    sub = open_submission(folder, tmp_path / "out")
    assert "ngram.py: skipped: ngram.py is 50.0 MiB, more than the 1024 KiB the grader reads" in lines(sub)
    run = graded_ngram(rubric, sub)
    assert run.results and {r.output for r in run.results} == {"Not graded: ngram.py is 50.0 MiB, more than the 1024 KiB the grader reads."}


def test_unreadable_notebook_beside_the_starter_is_named_in_the_failures(rubric, tmp_path):
    folder = folder_with(tmp_path, {"ngram.ipynb": b"{not json", "ngram.py": (ROOT / "starter" / "ngram.py").read_bytes()})
    sub = open_submission(folder, tmp_path / "out")
    assert lines(sub)[0].startswith("ngram.ipynb: skipped: ngram.ipynb could not be read as a Jupyter notebook: it is not valid JSON")
    assert sub.caveats["ngram.py"].startswith("Graded ngram.py; ngram.ipynb could not be read as a Jupyter notebook")


@pytest.mark.parametrize("files, message", [
    ({}, f"nothing in the submission can be graded: expected {', '.join(FILE_ORDER[:-1])} or {FILE_ORDER[-1]}, or a "
         "notebook named like one (ngram.ipynb), at the top level or in one folder. It is empty."),
    ({"NGram.py": b"X = 1\n", "notes.txt": b"hi"},
     "at the top level or in one folder. Found:\n  NGram.py: misnamed: probably meant as ngram.py; rename `NGram.py` to `ngram.py` to "
     "have it graded\n  notes.txt: ignored: not a component file or a notebook named like one"),
    ({"ngram.py": b"#" * (MAX_FILE_BYTES + 1)}, "Found:\n  ngram.py: skipped: ngram.py is 1.0 MiB, more than the 1024 KiB the grader reads"),
])
def test_nothing_usable_is_one_error_listing_what_was_found(tmp_path, files, message):
    folder = folder_with(tmp_path, files)
    folder.mkdir(exist_ok=True)
    with pytest.raises(SubmissionError) as caught:
        open_submission(folder, tmp_path / "out")
    assert message in str(caught.value)


def test_a_single_misnamed_or_unusable_file_says_why(tmp_path):
    (tmp_path / "NGram.py").write_bytes((SOLUTIONS / "ngram.py").read_bytes())
    (tmp_path / "rnn.ipynb").write_text("{not json")
    with pytest.raises(SubmissionError, match=r"NGram.py cannot be graded: expected .*\(ngram.ipynb\)\. Found:\n  NGram.py: "
                                              r"misnamed: probably meant as ngram.py; rename `NGram.py` to `ngram.py` to have it graded$"):
        open_submission(tmp_path / "NGram.py", tmp_path / "a")
    assert open_submission(tmp_path / "NGram.py", tmp_path / "b", accept_misnamed=True).files == {"ngram.py"}
    with pytest.raises(SubmissionError, match="Found:\n  rnn.ipynb: skipped: rnn.ipynb could not be read as a Jupyter notebook"):
        open_submission(tmp_path / "rnn.ipynb", tmp_path / "c")


def test_untouched_starter_is_told_from_work():
    assert all(untouched_starter(p.read_bytes()) for p in (ROOT / "starter").glob("*.py"))
    assert not any(untouched_starter(p.read_bytes()) for p in SOLUTIONS.glob("*.py"))
    assert not untouched_starter(b"def f():\n    return 1\n") and not untouched_starter(b"X = 1\n")
    assert not untouched_starter(b"def f(:\n")


def graded_ngram(rubric, submission):
    with isolation(rubric) as entered:
        return grade(rubric, submission, secret="t", isolation=entered, component_ids=["ngram"])
