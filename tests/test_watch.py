"""`check --watch` (autograder/commands/watch.py): which saves start a run and what it checks, without a process; then the
command itself, on a copy of the reference's ngram.py broken while it watches, and stopped by Ctrl-C."""
from __future__ import annotations

import io
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from argparse import Namespace
from pathlib import Path

import pytest
from rich.console import Console

from autograder.commands import watch
from autograder.sandbox.host import tiers
from autograder.terminal import Terminal
from autograder.commands.watch import Watcher, changes, selected, snapshot, trigger_line

ROOT = Path(__file__).resolve().parents[1]
BROKEN = ("[BOS] * (n - 1)", "[BOS] * n")  # a plausible mistake in pad_sentence: one BOS too many


class Idle(Exception):
    """The fake clock ran out of scripted writes: a Watcher still waiting has seen nothing more to run."""


def scripted(*steps):
    """A `sleep` for Watcher that, at each call, makes the next write of `steps` (None: nothing changes then)."""
    todo = list(steps)

    def sleep(seconds: float) -> None:
        if not todo:
            raise Idle
        step = todo.pop(0)
        if step:
            step()
    return sleep


def save(path: Path, text: str, at_ns: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(at_ns, at_ns))  # mtimes apart, as saves are, however fast the test writes


def test_snapshot_holds_what_open_submission_reads(tmp_path):
    for rel in ("ngram.py", "sub/helper.py", "ngram.ipynb", "notes.txt", ".git/hook.py", "__pycache__/ngram.py",
                "venv/pyvenv.cfg", "venv/lib/site.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert sorted(snapshot(tmp_path)) == ["ngram.ipynb", "ngram.py", "sub/helper.py"]
    assert sorted(snapshot(tmp_path / "ngram.py")) == ["ngram.py"]  # a single file given: that file
    assert snapshot(tmp_path / "missing.py") == {}


def test_a_burst_of_writes_is_one_run(tmp_path):
    code = tmp_path / "ngram.py"
    save(code, "old", 1_000_000_000)
    # an editor's save: truncate, then write; seen between the two, run once both are done
    truncated, written = lambda: save(code, "", 2_000_000_000), lambda: save(code, "new", 2_000_000_001)
    watcher = Watcher(tmp_path, scripted(None, truncated, written, None))
    assert watcher.wait() == {"ngram.py": "changed"}
    with pytest.raises(Idle):  # nothing more was written: no second run
        watcher.wait()


def test_each_later_save_is_the_next_run(tmp_path):
    code = tmp_path / "ngram.py"
    save(code, "one", 1_000_000_000)
    watcher = Watcher(tmp_path, scripted(lambda: save(code, "two", 2_000_000_000), None,
                                         lambda: (tmp_path / "helper.py").write_text("h"), None))
    assert watcher.wait() == {"ngram.py": "changed"}
    assert watcher.wait() == {"helper.py": "added"}


def test_a_burst_that_puts_the_file_back_is_no_run(tmp_path):
    code = tmp_path / "ngram.py"
    save(code, "same", 1_000_000_000)
    watcher = Watcher(tmp_path, scripted(lambda: save(code, "", 2_000_000_000), lambda: save(code, "same", 1_000_000_000), None))
    with pytest.raises(Idle):
        watcher.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's; elsewhere the folder is polled")
def test_a_save_wakes_the_watcher_at_once_on_linux(tmp_path):
    """inotify says when to look: a save in a subfolder ends a pause of 30 s (the next look, without it, would be
    at the next poll), and the look finds what changed."""
    code = tmp_path / "sub" / "ngram.py"
    code.parent.mkdir()
    save(code, "one", 1_000_000_000)
    with Watcher(tmp_path) as watcher:
        assert watcher.events is not None and watcher.events.pause(0.05) is False  # nothing written yet
        threading.Timer(0.2, save, (code, "two", 2_000_000_000)).start()
        assert watcher.events.pause(30) is True
        assert watcher.wait() == {"sub/ngram.py": "changed"}


def test_changes_say_how():
    before = {"a.py": (1, 1, 1), "b.py": (1, 1, 2)}
    after = {"a.py": (2, 1, 1), "c.py": (1, 1, 3)}
    assert changes(before, after) == {"a.py": "changed", "b.py": "removed", "c.py": "added"}


def test_a_change_checks_the_components_it_may_reach(rubric):
    ngram, attention, causal = (rubric.component(c) for c in ("ngram", "attention", "causal_mask"))
    requested = [ngram, attention, causal]
    assert selected(["ngram.py"], requested) == [ngram]
    assert selected(["attention.py"], requested) == [attention, causal]  # two components of one file
    assert selected(["sub/attention.ipynb"], requested) == [attention, causal]
    assert selected(["ngram.py", "attention.py"], requested) == requested
    assert selected(["helpers.py"], requested) == requested  # any of them may import it
    assert selected(["rnn.py"], [ngram]) == [ngram]  # another component's file: may be imported too


def test_the_trigger_is_said(rubric):
    assert trigger_line({"ngram.py": "changed"}, [rubric.component("ngram")]) == "ngram.py changed: checking ngram"
    many = {f"h{i}.py": "added" for i in range(5)}
    assert trigger_line(many, [rubric.component("ngram")]).startswith("h0.py added, h1.py added, h2.py added and 2 more files:")


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)  # the command ended


def _until(lines: queue.Queue, pattern: str, seconds: float, seen: list[str]) -> re.Match:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        if match := re.search(pattern, line):
            return match
    raise AssertionError(f"no line matched {pattern!r} (within {seconds} s, before the command ended); printed:\n{''.join(seen)}")


def _ours_running(marker: str) -> list[str]:
    """Processes whose command line or working folder lies under `marker` (the run's own temporary folder)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if marker in cmdline or cwd.startswith(marker):
            found.append(f"{pid}: {cmdline[:200]}")
    return found


@pytest.mark.slow
def test_watch_checks_each_save_and_leaves_nothing_behind(tmp_path):
    folder, temp = tmp_path / "work", tmp_path / "tmp"
    folder.mkdir()
    temp.mkdir()
    shutil.copy(ROOT / "solutions" / "ngram.py", folder / "ngram.py")
    env = {**os.environ, "TMPDIR": str(temp), "COLUMNS": "200"}
    # From the repository: `python -m` puts its folder on sys.path, and tmp_path's parents are closed to the workers' uid.
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "check", "--watch", "ngram", "--dir", str(folder),
                             "--config", str(ROOT / "grading.yaml")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # Ctrl-C, even from a background job
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    try:
        _until(lines, r"^ngram: 24 / 24", 90, seen)
        code = folder / "ngram.py"
        code.write_text(code.read_text().replace(*BROKEN))
        _until(lines, r"ngram\.py changed: checking ngram", 30, seen)
        score = _until(lines, r"^ngram: (\d+) / 24", 30, seen)
        assert int(score[1]) < 24 and any("pad_sentence" in line and "FAIL" in line for line in seen)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not [p for p in temp.iterdir() if re.fullmatch(rf"autograder-[a-z-]+-pid{proc.pid}-\w+", p.name)]
    deadline = time.monotonic() + 5  # a forked worker dies of its template's death, an instant after it
    while (left := _ours_running(str(temp))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left


@pytest.mark.slow
def test_portable_tier_spawns_each_run_and_keeps_watching(tmp_path, monkeypatch):
    """Where the sandbox cannot run (macOS, Windows), each run spawns its workers as check does; a save that leaves
    nothing to grade is said, and the next save checked."""
    folder = tmp_path / "work"
    folder.mkdir()
    code = folder / "ngram.py"
    shutil.copy(ROOT / "solutions" / "ngram.py", code)
    monkeypatch.setattr(tiers, "sandbox_missing", lambda: "the sandbox needs Linux, and this is a test")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    def broken() -> None:
        (folder / "notes.txt").rename(code)
        code.write_text(code.read_text().replace(*BROKEN))
    saves = [lambda: code.rename(folder / "notes.txt"), broken]  # nothing gradable left, then a mistake

    def wait(self) -> dict[str, str]:
        if not saves:
            raise KeyboardInterrupt
        saves.pop(0)()
        return {"ngram.py": "changed"}
    monkeypatch.setattr(Watcher, "wait", wait)
    out, err = io.StringIO(), io.StringIO()
    ui = Terminal(Console(file=out, width=200), Console(file=err, width=200), 0)
    args = Namespace(component=["ngram"], dir=str(folder), config=str(ROOT / "grading.yaml"), require_tier="portable",
                     quiet=0, verbose=0)
    with pytest.raises(KeyboardInterrupt):
        watch.run(args, ui)
    said, errors = out.getvalue(), err.getvalue()
    assert "No sandbox here" in errors and "nothing in the submission can be graded" in errors
    assert said.count("ngram.py changed: checking ngram") == 2
    first, second = (int(score) for score in re.findall(r"^ngram: (\d+) / 24", said, re.M))
    assert first == 24 and second < 24
    assert "isolation: portable" in said
    assert not list((tmp_path / "tmp").iterdir())
