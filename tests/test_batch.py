"""`autograder grade-all`: reading a Gradescope export or a folder, the journal, the gradebook, its progress, and a
whole batch killed with `kill -9`, interrupted, stopped with SIGTERM and resumed."""
import csv
import dataclasses
import io
import json
import os
import re
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
from rich.console import Console

from autograder.commands import report as report_command
from autograder.batch.gradebook import CANVAS, GROUP_CELL, canvas_csv, grades_csv, student_grades_csv
from autograder.batch.inputs import Entry, ExportError, read_batch
from autograder.batch.journal import Journal
from autograder.batch.regrade import kept_components
from autograder.cli import main
from autograder.commands.grade_all import batch_progress
from autograder.terminal import INTERRUPTED, SIGNALLED, Terminal
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
    entries, kind, _ = read_batch(root, tmp_path / "unpacked")
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
    entries, _, _ = read_batch(archive, tmp_path / "unpacked")
    assert [(e.id, sorted(p.name for p in e.path.iterdir())) for e in entries] == [("1001", ["ngram.py"]), ("1002", ["backprop.py"])]


@pytest.mark.parametrize("metadata, message", [
    ("submission_1001: [\n", "not valid YAML"),
    ("- a list\n", "expected a mapping"),
    ("notes.txt: {}\n", "is not a submission folder name"),
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
    entries, kind, _ = read_batch(tmp_path / "class", tmp_path / "unpacked")
    assert kind == "folder of submissions" and [e.id for e in entries] == ["alice", "bob", "carol"]
    (tmp_path / "class" / "alice.py").write_text("")
    with pytest.raises(ExportError, match="would both be submission 'alice'"):
        read_batch(tmp_path / "class", tmp_path / "unpacked")


def test_the_journal_resumes_past_a_line_cut_by_a_kill(tmp_path):
    path = tmp_path / "journal.jsonl"
    keys = {"ngram": "k1", "backprop": "k2"}
    Journal(path).record({"id": "1", "content": "c", "keys": keys, "score": 3.0})
    with open(path, "a") as f:
        f.write('{"id": "2", "content": "c", "ke')  # killed while writing
    journal = Journal(path)
    assert journal.current("1", "c", keys)["score"] == 3.0 and journal.stale("1", "c", keys) == []
    assert journal.current("2", "c", keys) is None and journal.stale("2", "c", keys) == ["ngram", "backprop"]
    assert journal.stale("1", "changed content", keys) == ["ngram", "backprop"]


def test_a_changed_key_regrades_that_component_only_and_an_older_line_everything(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.record({"id": "1", "content": "c", "keys": {"ngram": "k1", "backprop": "k2"}, "status": "ok"})
    journal.record({"id": "2", "content": "c", "key": "one key for all", "status": "ok"})  # a grader before per-component keys
    assert journal.stale("1", "c", {"ngram": "k1 fixed", "backprop": "k2"}) == ["ngram"]
    assert journal.current("1", "c", {"ngram": "k1 fixed", "backprop": "k2"}) is None
    assert journal.current("1", "c", {"ngram": "k1"})["status"] == "ok"  # a batch of one part: its components' keys
    assert journal.stale("2", "c", {"ngram": "k1"}) == ["ngram"]
    journal.record({"id": "3", "content": "c", "keys": {"ngram": "k1", "backprop": "k2"}, "status": "timeout"})
    assert journal.stale("3", "c", {"ngram": "k1", "backprop": "k2"}) == []  # stopped: done, as before
    assert journal.stale("3", "c", {"ngram": "k1 fixed", "backprop": "k2"}) == ["ngram", "backprop"]  # no backprop results to keep


def test_a_regrade_keeps_the_other_components_results_only_of_the_same_files_graded_whole():
    latest = {"content": "c", "keys": {"ngram": "k1", "rnn": "k3"}, "status": "ok"}
    old, ran = {"tests": [{"name": "[ngram] a"}]}, {"run": object()}
    assert kept_components(latest, "c", old, {"ngram"}, ran) == {"rnn"}  # a part regraded: the other part's results stay
    assert kept_components(latest, "resubmitted", old, {"ngram"}, ran) == set()  # other files: nothing of before is theirs
    assert kept_components(latest, "c", {"tests": []}, {"ngram"}, ran) == set()  # stopped before: nothing to keep
    assert kept_components(latest, "c", old, {"ngram"}, {"status": "timeout", "results": {}}) == set()  # stopped now
    assert kept_components(None, "c", None, {"ngram"}, ran) == set()


def test_a_grading_the_grader_failed_is_in_the_gradebook_and_graded_again_on_resume(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    keys = {"ngram": "k"}
    journal.record({"id": "1", "content": "c", "keys": keys, "status": "infra_error", "score": 3.0})
    assert journal.current("1", "c", keys)["status"] == "infra_error"  # its row stays in grades.csv, saying so
    assert journal.stale("1", "c", keys) == ["ngram"]  # and a rerun grades it again


def test_the_gradebook_has_a_row_per_submission_even_one_not_graded(tmp_path):
    rubric = load_rubric(ROOT / "grading.yaml")
    root = export(tmp_path, {"submission_1001": {}, "submission_1002": {}})
    entries, _, _ = read_batch(root, tmp_path / "unpacked")
    ok = {"status": "ok", "score": 30.0, "max_score": 196.0, "components": {"ngram": 30.0}, "parts": {"Part 1: counting and backprop": 30.0}}
    lost = {"status": "timeout", "score": 0.0, "max_score": 196.0, "components": {}, "parts": {}}
    rows = list(csv.DictReader(io.StringIO(grades_csv(rubric, entries, {"1001": ok, "1002": lost}))))
    assert [(r["submission_id"], r["status"], r["score"]) for r in rows] == [("1001", "ok", "30"), ("1002", "timeout", "0")]
    assert rows[0]["name"] == "Ada Lovelace; Alan Turing" and rows[0]["ngram"] == "30" and rows[0]["backprop"] == "0"
    assert rows[1]["ngram"] == "" and rows[0]["part: Part 1: counting and backprop"] == "30"


def test_each_member_of_a_group_has_the_groups_grade_in_the_per_student_gradebooks(tmp_path, rubric):
    root = export(tmp_path, {"submission_1001": {}, "submission_1002": {}})
    entries, _, _ = read_batch(root, tmp_path / "unpacked")
    entries.append(Entry("alice", tmp_path / "alice"))  # a folder's submission: no submitter listed
    ok = {"status": "ok", "score": 30.0, "max_score": 196.0, "components": {"ngram": 30.0}, "parts": {}}
    rerun = {"status": "infra_error", "score": 12.0, "max_score": 196.0, "components": {"ngram": 12.0}, "parts": {}}
    graded = {"1001": ok, "1002": rerun, "alice": ok}
    rows = list(csv.DictReader(io.StringIO(student_grades_csv(rubric, entries, graded))))
    fields = ("name", "sid", "email", "submission_id", "group", "status", "score", "ngram")
    assert [tuple(r[f] for f in fields) for r in rows] == [
        ("Ada Lovelace", "001", "ada@example.edu", "1001", "Ada Lovelace; Alan Turing", "ok", "30", "30"),
        ("Alan Turing", "002", "alan@example.edu", "1001", "Ada Lovelace; Alan Turing", "ok", "30", "30"),
        ("Grace Hopper", "003", "grace@example.edu", "1002", "", "infra_error", "12", ""),
        ("", "", "", "alice", "", "ok", "30", "30")]

    header, *body = csv.reader(io.StringIO(canvas_csv(rubric, entries, graded)))
    assert canvas_student_columns(header) == len(CANVAS) and header[len(CANVAS):] == [rubric.course]  # one assignment
    assert body == [["Ada Lovelace", "", "001", "ada@example.edu", "", "30"],
                    ["Alan Turing", "", "002", "alan@example.edu", "", "30"],
                    ["Grace Hopper", "", "003", "grace@example.edu", "", ""],  # not final: blank, no change in Canvas
                    ["alice", "", "", "", "", "30"]]  # by its id, for Canvas's import page to match by hand
    one_part = dataclasses.replace(rubric, components=[c for c in rubric.components if c.part == rubric.components[0].part])
    assert next(csv.reader(io.StringIO(canvas_csv(one_part, entries, graded))))[-1] == "Part 1: counting and backprop"


def canvas_student_columns(header: list[str]) -> int:
    """How many leading columns Canvas's gradebook import reads as the student's, 0 where it refuses the header
    (canvas-lms, app/models/gradebook_importer.rb: `header?` and `update_column_count`, transcribed)."""
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]):
        return 0
    count = 3  # Student, ID, Section
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        count += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        integration = 1 if re.search(r"Integration\s+ID", header[4]) else 0
        count += 2 + integration + (1 if re.search(r"Root\s+Account", header[4 + integration]) else 0)
    return count if "Section" in header[count - 1] else 0


def test_on_a_terminal_the_bar_shows_its_total_from_the_start_and_each_score_above_it():
    err = io.StringIO()
    ui = Terminal(Console(file=io.StringIO()), Console(file=err, force_terminal=True, width=120), 0)
    with batch_progress(ui) as progress:
        progress(2, 6, None)  # before grading: 2 graded before, of 6
    assert "2/6" in err.getvalue() and "/?" not in err.getvalue()  # not 0/? until the first submission ends
    with batch_progress(ui) as progress:
        progress(2, 6, None)
        progress(3, 6, {"id": "1003", "status": "ok", "score": 30, "max_score": 40, "seconds": 12.0})
    assert "1003: 30/40 (12.0 s)" in err.getvalue() and "3/6" in err.getvalue()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_a_command_as_ctrl_c_does(monkeypatch, capsys, signum):
    """The handler a stopped batch relies on (the batch test below sends SIGTERM): the signal is a KeyboardInterrupt in
    the command, during which a second one is ignored; the status is the shell's; the handler before is back."""
    during = []

    def command(args, ui):
        try:
            signal.raise_signal(signum)
        finally:
            during.append(signal.getsignal(signum))

    def not_handled(signum, frame):
        pytest.fail(f"the command did not handle {signal.Signals(signum).name}")

    monkeypatch.setattr(report_command, "run", command)
    before = signal.signal(signum, not_handled)
    try:
        assert main(["report", "batch"]) == SIGNALLED + signum
    finally:
        after = signal.signal(signum, before)
    assert during == [signal.SIG_IGN] and after is not_handled
    assert capsys.readouterr().err == f"stopped by {signal.Signals(signum).name}\n"


def test_a_sighup_ignored_when_the_command_starts_stays_ignored(monkeypatch):
    """As under nohup: the batch goes on when the terminal closes."""
    monkeypatch.setattr(report_command, "run", lambda args, ui: signal.raise_signal(signal.SIGHUP) or 0)
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert main(["report", "batch"]) == 0
    finally:
        signal.signal(signal.SIGHUP, before)


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
def test_a_batch_killed_interrupted_or_terminated_resumes_and_matches_grading_each_alone(tmp_path):
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
    killed = journal.read_text().count("\n")
    assert killed < 6, "the batch finished before it could be killed"
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
    interrupted = [json.loads(line) for line in journal.read_text().splitlines()]  # every line whole
    assert len(interrupted) < 6, "the batch finished before it could be interrupted"

    # SIGTERM, as `timeout` or a scheduler sends it to the batch's process group (its jobs, which leave stopping to the
    # batch, too): it ends as Ctrl-C does, with the shell's status for it and a gradebook of exactly what finished.
    third = grade_all(*args)
    below = _until_grading(third)
    os.killpg(third.pid, signal.SIGTERM)
    output, _ = third.communicate(timeout=60)
    assert third.returncode == SIGNALLED + signal.SIGTERM and "stopped by SIGTERM" in output, output
    _until_dead(below)
    finished = {entry["id"]: entry for entry in map(json.loads, journal.read_text().splitlines())}  # every line whole
    assert len(finished) < 6, "the batch finished before it could be stopped"
    gradebook = {r["submission_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert {sid: r["status"] for sid, r in gradebook.items()} == {sid: e["status"] for sid, e in finished.items()}
    assert {sid: float(r["score"]) for sid, r in gradebook.items()} == pytest.approx({sid: e["score"] for sid, e in finished.items()})
    runs = json.loads((out / "summary.json").read_text())["runs"]  # the run killed outright wrote none
    assert [r["finished"] for r in runs] == [False, False] and sum(r["graded"] for r in runs) == len(finished) - killed
    assert f"`autograder report {out}` writes the report" in output
    assert main(["report", str(out)]) == 0  # the report of what finished, as the stopped batch said

    fourth = grade_all(*args)
    output, _ = fourth.communicate(timeout=300)
    assert fourth.returncode == 0, output
    assert f"{len(finished)} already graded" in output
    graded_now = re.findall(r"^\[\d/6\] (\d+): ", output, re.MULTILINE)
    assert sorted(graded_now) == sorted({f"100{i}" for i in range(1, 7)} - set(finished))  # the rest, each once
    lines = [line for line in journal.read_text().splitlines()]
    assert len(lines) == 6 and len({line.split('"id": ')[1][:6] for line in lines}) == 6  # nothing graded twice

    rows = {r["submission_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert list(rows) == ["1001", "1002", "1003", "1004", "1005", "1006"]
    assert rows["1001"]["name"] == "Ada Lovelace; Alan Turing" and rows["1001"]["sid"] == "001; 002"
    assert rows["1004"]["status"] == "not_gradable" and rows["1004"]["score"] == "0"
    told = (out / "feedback" / "1004.md").read_text()  # why, once, and not in the export's folder names
    assert told.count("nothing in the submission can be graded") == 1 and "submission_1004" not in told, told
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
    # Part 1 has no timing case: the n-gram staff test's perplexity ranks the two right n-gram models, tied (the same
    # value); the broken and the hanging one never rank.
    board = list(csv.DictReader(open(out / "leaderboard.csv")))
    assert [(r["rank"], r["submission_id"], r["held-out perplexity"] != "") for r in board] == [("1", "1001", True), ("1", "1002", True)]
    assert "leaderboard by held-out perplexity (2 ranked" in output
    # The per-student gradebooks: a row for each member of the group 1001, with its grade; one for everyone else.
    students = list(csv.DictReader(open(out / "grades_by_student.csv")))
    assert [(r["sid"], r["submission_id"]) for r in students] == [("001", "1001"), ("002", "1001"), ("003", "1002"),
                                                                  *((sid, sid) for sid in ("1003", "1004", "1005", "1006"))]
    assert all(r["score"] == rows[r["submission_id"]]["score"] for r in students)
    assert {r["group"] for r in students if r["submission_id"] == "1001"} == {"Ada Lovelace; Alan Turing"}
    canvas = [(r["Student"], r["SIS User ID"], r["SIS Login ID"], r["Part 1: counting and backprop"])
              for r in csv.DictReader(open(out / "canvas.csv"))]
    assert canvas == [(r["name"], r["sid"], r["email"], r["score"]) for r in students]

    started = time.monotonic()
    again = grade_all(*args)
    output, _ = again.communicate(timeout=60)
    assert "6 already graded" in output and time.monotonic() - started < 10
    summary = json.loads((out / "summary.json").read_text())  # each run's time, the one with nothing to do too, and the total
    assert [(r["graded"], r["finished"]) for r in summary["runs"][2:]] == [(6 - len(finished), True), (0, True)]
    assert summary["wall_seconds"] == pytest.approx(sum(r["seconds"] for r in summary["runs"]), abs=0.05)


def test_names_keep_the_joiners_their_scripts_spell_with_and_a_huge_group_fits_a_cell(tmp_path, rubric):
    """Issue 41: a zero-width non-joiner in a Persian name and a joiner after an Indic virama are how those names are
    spelled, so the gradebooks keep them; a joiner that joins nothing, or a bidi override, is still shown escaped. A group
    of 500 lists as many members as fit GROUP_CELL characters (a spreadsheet's cell holds 32,767) and how many more."""
    names = ["مهر\u200cناز", "क्\u200dषमा", "\u200cAda", "Bob\u202eEve"]
    members = "".join(f"  - :name: {json.dumps(name)}\n    :sid: '{i}'\n    :email: s{i}@example.edu\n" for i, name in enumerate(names))
    members += "".join(f"  - :name: Student Number {i:04d}\n    :sid: '{i}'\n    :email: s{i}@example.edu\n" for i in range(4, 500))
    metadata = f"submission_1:\n  :submitters:\n{members}submission_2:\n  :submitters:\n{members[:members.index('  - :name: Student')]}"
    entries, _, _ = read_batch(export(tmp_path, {"submission_1": {}, "submission_2": {}}, metadata), tmp_path / "unpacked")
    assert [p.name for p in entries[1].submitters] == ["مهر\u200cناز", "क्\u200dषमा", "\\u200cAda", "Bob\\u202eEve"]
    ok = {"status": "ok", "score": 30.0, "max_score": 196.0, "components": {"ngram": 30.0}, "parts": {}}
    graded = {"1": ok, "2": ok}
    by_submission = list(csv.DictReader(io.StringIO(grades_csv(rubric, entries, graded))))
    assert by_submission[1]["name"] == "مهر\u200cناز; क्\u200dषमा; \\u200cAda; Bob\\u202eEve"
    group = by_submission[0]["name"]
    assert len(group) <= GROUP_CELL and re.search(r"; and (\d+) more$", group)
    shown = group.count("; ")  # the names shown, each followed by "; " (the last by "; and N more")
    assert shown + int(re.search(r"(\d+) more$", group)[1]) == 500
    by_student = student_grades_csv(rubric, entries, graded)
    rows = list(csv.DictReader(io.StringIO(by_student)))
    assert len(rows) == 504 and all(len(r["group"]) <= GROUP_CELL for r in rows) and len(by_student) < 2_000_000
