"""`autograder grade-all`: reading a Gradescope export or a folder, the journal, the gradebook, and a whole batch
killed with `kill -9` and resumed."""
import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import ROOT, SOLUTIONS, default_sigint, with_staff_tests
from nbformat.v4 import new_code_cell, new_notebook

from autograder.batch.gradebook import grades_csv
from autograder.batch.inputs import ExportError, read_batch
from autograder.batch.journal import Journal
from autograder.cli import INTERRUPTED, main
from autograder.rubric import load_rubric

METADATA = """\
submission_1001:
  :submitters:
  - :name: Ada Lovelace
    :sid: '001'
    :email: ada@example.edu
  - :name: Alan Turing
    :sid: '002'
    :email: alan@example.edu
  :created_at: 2026-11-20 10:00:00.000000000 -08:00
  :score: 0.0
  :results: {}
  :history: []
submission_1002:
  :submitters:
  - :name: Grace Hopper
    :sid: '003'
    :email: grace@example.edu
  :created_at: 2026-11-20 11:00:00.000000000 -08:00
  :score: 0.0
"""


def export(tmp_path: Path, folders: dict[str, dict[str, str]], metadata: str = METADATA, wrap: str | None = None) -> Path:
    root = tmp_path / "export"
    base = root / wrap if wrap else root
    for name, files in folders.items():
        (base / name).mkdir(parents=True)
        for file, text in files.items():
            (base / name / file).parent.mkdir(parents=True, exist_ok=True)
            (base / name / file).write_text(text)
    (base / "submission_metadata.yml").write_text(metadata)
    return root


def test_a_gradescope_export_gives_each_submission_with_its_submitters(tmp_path):
    root = export(tmp_path, {"submission_1001": {"ngram.py": "x = 1\n"}, "submission_1002": {}}, wrap="assignment_77_export")
    entries, kind = read_batch(root, tmp_path / "unpacked")
    assert kind == "Gradescope export"
    assert [e.id for e in entries] == ["1001", "1002"]
    assert [p.name for p in entries[0].submitters] == ["Ada Lovelace", "Alan Turing"]
    assert entries[0].submitters[1].sid == "002" and entries[1].submitters[0].email == "grace@example.edu"


def test_a_zipped_export_is_read_like_the_folder(tmp_path):
    root = export(tmp_path, {"submission_1001": {"ngram.py": "x = 1\n"}, "submission_1002": {"backprop.py": "y = 2\n"}})
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in root.rglob("*"):
            z.write(path, Path("assignment_77_export") / path.relative_to(root))
    entries, _ = read_batch(archive, tmp_path / "unpacked")
    assert [(e.id, sorted(p.name for p in e.path.iterdir())) for e in entries] == [("1001", ["ngram.py"]), ("1002", ["backprop.py"])]


@pytest.mark.parametrize("metadata, message", [
    ("submission_1001: [\n", "not valid YAML"),
    ("- a list\n", "expected a mapping"),
    ("notes.txt: {}\n", "is not a submission folder name"),
    ("submission_1001: {}\nsubmission_1002: {}\nsubmission_9: {}\n", "folders are not in the export: submission_9"),
])
def test_a_malformed_export_is_refused_with_what_is_wrong(tmp_path, metadata, message):
    root = export(tmp_path, {"submission_1001": {}, "submission_1002": {}}, metadata=metadata)
    with pytest.raises(ExportError, match=message):
        read_batch(root, tmp_path / "unpacked")


def test_a_folder_of_submissions_takes_each_entrys_name_as_its_id(tmp_path):
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "class" / "bob.zip").write_bytes(b"")
    (tmp_path / "class" / "carol.ipynb").write_text("{}")
    (tmp_path / "class" / "roster.csv").write_text("name\n")
    entries, kind = read_batch(tmp_path / "class", tmp_path / "unpacked")
    assert kind == "folder of submissions" and [e.id for e in entries] == ["alice", "bob", "carol"]
    (tmp_path / "class" / "alice.py").write_text("")
    with pytest.raises(ExportError, match="would both be submission 'alice'"):
        read_batch(tmp_path / "class", tmp_path / "unpacked")


def test_the_journal_resumes_past_a_line_cut_by_a_kill(tmp_path):
    path = tmp_path / "journal.jsonl"
    Journal(path).record({"id": "1", "content": "c", "key": "k", "score": 3.0})
    with open(path, "a") as f:
        f.write('{"id": "2", "content": "c", "ke')  # killed while writing
    journal = Journal(path)
    assert journal.current("1", "c", "k")["score"] == 3.0 and journal.done("1", "c", "k")
    assert journal.current("2", "c", "k") is None and not journal.done("2", "c", "k")
    assert not journal.done("1", "changed content", "k") and not journal.done("1", "c", "another rubric")


def test_a_grading_the_grader_failed_is_in_the_gradebook_and_graded_again_on_resume(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.record({"id": "1", "content": "c", "key": "k", "status": "infra_error", "score": 3.0})
    assert journal.current("1", "c", "k")["status"] == "infra_error"  # its row stays in grades.csv, saying so
    assert not journal.done("1", "c", "k")  # and a rerun grades it again


def test_the_gradebook_has_a_row_per_submission_even_one_not_graded(tmp_path):
    rubric = load_rubric(ROOT / "grading.yaml")
    root = export(tmp_path, {"submission_1001": {}, "submission_1002": {}})
    entries, _ = read_batch(root, tmp_path / "unpacked")
    ok = {"status": "ok", "score": 30.0, "max_score": 196.0, "components": {"ngram": 30.0}, "parts": {"Part 1: counting and backprop": 30.0}}
    lost = {"status": "timeout", "score": 0.0, "max_score": 196.0, "components": {}, "parts": {}}
    rows = list(csv.DictReader(io.StringIO(grades_csv(rubric, entries, {"1001": ok, "1002": lost}))))
    assert [(r["submission_id"], r["status"], r["score"]) for r in rows] == [("1001", "ok", "30"), ("1002", "timeout", "0")]
    assert rows[0]["name"] == "Ada Lovelace; Alan Turing" and rows[0]["ngram"] == "30" and rows[0]["backprop"] == "0"
    assert rows[1]["ngram"] == "" and rows[0]["part: Part 1: counting and backprop"] == "30"


# ---- a whole batch -------------------------------------------------------------------------------------------------

HANGING_SAMPLE = "        words = []\n        while len(words) < max_len:"


def small_rubric(tmp_path: Path) -> Path:
    """grading.yaml cut down to part 1 (n-grams and backprop), with 3-second case limits."""
    spec = yaml.safe_load((ROOT / "grading.yaml").read_text())
    spec["solutions"] = str(SOLUTIONS)
    spec["defaults"]["timeout"] = 3
    spec["parts"] = spec["parts"][:1]
    spec["components"] = {cid: spec["components"][cid] for cid in spec["parts"][0]["components"]}
    path = tmp_path / "rubric" / "grading.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with_staff_tests(path.parent)
    return path


def class_export(tmp_path: Path) -> Path:
    ngram, backprop = (SOLUTIONS / "ngram.py").read_text(), (SOLUTIONS / "backprop.py").read_text()
    folders = {
        "submission_1001": {"ngram.py": ngram, "backprop.py": backprop},  # a group, correct
        "submission_1002": {"ngram.ipynb": nbformat.writes(new_notebook(cells=[new_code_cell(ngram)]))},
        "submission_1003": {"hw/backprop.py": backprop.replace("z.max(axis=-1, keepdims=True)", "z.max()")},  # in a folder
        "submission_1004": {},  # empty
        "submission_1005": {"ngram.py": ngram.replace("def pad_sentence(", "def pad_sentence(:")},
        "submission_1006": {"ngram.py": ngram.replace(HANGING_SAMPLE, "        while True:\n            pass\n" + HANGING_SAMPLE)},
    }
    metadata = METADATA + "".join(f"submission_{i}:\n  :submitters:\n  - :name: Student {i}\n    :sid: '{i}'\n    :email: s{i}@example.edu\n"
                                  for i in range(1003, 1007))
    root = export(tmp_path, folders, metadata, wrap="assignment_5_export")
    archive = tmp_path / "export.zip"  # as Gradescope's "Export Submissions" gives it
    with zipfile.ZipFile(archive, "w") as z:
        for path in root.rglob("*"):
            z.write(path, path.relative_to(root))
    return archive


def grade_all(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", "grade-all", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=default_sigint)


def descendants(pid: int) -> set[int]:
    """Every process below `pid` now (its jobs and their workers, bubblewrap's too)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _until_lines(journal: Path, count: int, batch: subprocess.Popen) -> None:
    """Wait until the journal records `count` submissions (or the batch has ended)."""
    deadline = time.monotonic() + 120
    while not (journal.exists() and journal.read_text().count("\n") >= count) and batch.poll() is None:
        assert time.monotonic() < deadline, f"{count} submissions not graded in 120 s"
        time.sleep(0.1)


def _until_grading(batch: subprocess.Popen) -> set[int]:
    """Wait until a process runs below the batch's two jobs (a submission is being graded); returns all below it."""
    deadline = time.monotonic() + 60
    while len(below := descendants(batch.pid)) <= 2:
        assert batch.poll() is None and time.monotonic() < deadline, "the resumed batch graded nothing"
        time.sleep(0.05)
    return below


def _until_dead(pids: set[int]) -> None:
    """Every one of `pids` ends within 10 s (a killed process takes a moment to go)."""
    deadline = time.monotonic() + 10
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pids), {pid: Path(f"/proc/{pid}/status").read_text().splitlines()[:3] for pid in alive(pids)}


def alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if _state(pid) not in (None, "Z")}


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@pytest.mark.slow
def test_a_batch_killed_outright_or_interrupted_resumes_and_matches_grading_each_alone(tmp_path):
    config, source, out = small_rubric(tmp_path), class_export(tmp_path), tmp_path / "out"
    secret = tmp_path / "secret.txt"
    secret.write_text("batch-test\n")
    args = [source, "--out", out, "--jobs", "2", "--config", config, "--secret-file", secret]

    first = grade_all(*args)
    journal = out / "journal.jsonl"
    _until_lines(journal, 2, first)
    below = descendants(first.pid)
    assert len(below) > 2  # its jobs and at least one worker
    os.kill(first.pid, signal.SIGKILL)  # the whole batch, at once: no handler runs
    first.wait()
    done_before = journal.read_text().count("\n")
    assert done_before < 6, "the batch finished before it could be killed"
    _until_dead(below)  # its jobs and their workers died with it

    # Ctrl-C, as a terminal sends it to the batch's process group, while it grades: it stops cleanly, between journal
    # lines. Sent once a process runs below its jobs, not after a further line: the hanging submission may be all
    # that is left, and it would be done by then.
    second = grade_all(*args)
    below = _until_grading(second)
    os.killpg(second.pid, signal.SIGINT)
    output, _ = second.communicate(timeout=60)
    assert second.returncode == INTERRUPTED and "interrupted" in output, output
    _until_dead(below)  # no job, template or worker left behind
    done_before = len([json.loads(line) for line in journal.read_text().splitlines()])  # every line whole
    assert done_before < 6, "the batch finished before it could be interrupted"

    third = grade_all(*args)
    output, _ = third.communicate(timeout=300)
    assert third.returncode == 0, output
    assert f"{done_before} already graded" in output
    lines = [line for line in journal.read_text().splitlines()]
    assert len(lines) == 6 and len({line.split('"id": ')[1][:6] for line in lines}) == 6  # nothing graded twice

    rows = {r["submission_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert list(rows) == ["1001", "1002", "1003", "1004", "1005", "1006"]
    assert rows["1001"]["name"] == "Ada Lovelace; Alan Turing" and rows["1001"]["sid"] == "001; 002"
    assert rows["1004"]["status"] == "not_gradable" and rows["1004"]["score"] == "0"
    for sid in ("1001", "1002", "1003", "1005", "1006"):
        assert rows[sid]["status"] == "ok", rows[sid]
        alone = tmp_path / f"alone-{sid}.json"
        status = main(["grade", str(tmp_path / "export" / "assignment_5_export" / f"submission_{sid}"), "--config", str(config),
                       "--secret-file", str(secret), "--results", str(alone), "-q"])
        assert status == 0
        assert float(rows[sid]["score"]) == pytest.approx(yaml.safe_load(alone.read_text())["score"]), sid
        assert (out / "results" / sid / "results.json").exists() and (out / "feedback" / f"{sid}.md").exists()
    assert rows["1001"]["score"] == rows["1001"]["max_score"] and float(rows["1005"]["ngram"]) == 0
    assert "Timed out" in (out / "feedback" / "1006.md").read_text()
    # The n-gram staff test's perplexity ranks the two right n-gram models; the broken and the hanging one never rank.
    board = list(csv.DictReader(open(out / "leaderboard.csv")))
    assert [(r["rank"], r["submission_id"], r["held-out perplexity"] != "") for r in board] == [("1", "1001", True), ("2", "1002", True)]
    assert "leaderboard (2 ranked" in output

    started = time.monotonic()
    again = grade_all(*args)
    output, _ = again.communicate(timeout=60)
    assert "6 already graded" in output and time.monotonic() - started < 10
