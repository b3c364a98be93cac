"""Issue 41: nothing of a student's stays behind. However `grade-all` ends (Ctrl-C, SIGTERM, SIGHUP, one of its jobs
killed) it leaves no copy of a submission under the temporary folder: no batch folder, no template's, no worker's.
What an owner could not remove (it was killed outright) the next process that grades removes, and nothing of a process
still alive (another batch on the same machine).

Each batch runs with a TMPDIR of its own, so that what is left there is its own. The four batches start at once and
are stopped as soon as a submission's copy is in their TMPDIR, that is while it is being graded."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SOLUTIONS, default_sigint, with_staff_tests

from autograder.sandbox.host import scratch

COPIES = "autograder-"  # the batch's, templates' and workers' folders, and a grade's
KILL_JOB = "kill a job"


@dataclass
class Ended:
    status: int
    output: str
    left: list[str]  # what is left in its TMPDIR
    graded: int  # submissions in its journal: fewer than it was given, or it was stopped too late
    stale_gone_at_start: bool  # the dead process's folder was gone once the batch's job had made its first


def batch(base: Path, name: str, *extra: str) -> tuple[subprocess.Popen, Path]:
    tmp = base / name / "tmp"
    tmp.mkdir(parents=True)
    command = [sys.executable, "-m", "autograder", "grade-all", base / "class", "--out", base / name / "out", "--jobs", "1",
               "--config", base / "rubric" / "grading.yaml", "--secret-file", base / "secret.txt", *extra]
    proc = subprocess.Popen(list(map(str, command)), env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=default_sigint)
    return proc, tmp


def job_of(batch_pid: int) -> int:
    """The batch's job process (multiprocessing's spawned child; not its resource tracker)."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == batch_pid and b"--multiprocessing-fork" in cmdline:
            return int(entry)
    raise AssertionError("the batch has no job process")


@pytest.fixture(scope="class")
def ended(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("leftovers")
    spec = yaml.safe_load((ROOT / "grading.yaml").read_text())  # one component, n-grams, with 3-second cases
    spec["solutions"], spec["defaults"]["timeout"] = str(SOLUTIONS), 3
    spec["parts"] = [{**spec["parts"][0], "components": ["ngram"]}]
    spec["components"] = {"ngram": spec["components"]["ngram"]}
    (base / "rubric").mkdir()
    (base / "rubric" / "grading.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with_staff_tests(base / "rubric")
    for student in ("alice", "bob"):
        (base / "class" / student).mkdir(parents=True)
        (base / "class" / student / "ngram.py").write_text((SOLUTIONS / "ngram.py").read_text())
    (base / "secret.txt").write_text("leftovers\n")

    gone = subprocess.Popen(["true"])  # its pid, once it has ended, is a dead owner's
    gone.wait()
    dead = gone.pid
    runs = {signum: batch(base, signal.Signals(signum).name) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    runs[KILL_JOB] = batch(base, "killjob", "--only", "alice")
    # Left, as a batch killed outright leaves them, in the TMPDIR of the SIGTERM batch: one of a process that has ended,
    # one of this live one.
    tmp = runs[signal.SIGTERM][1]
    stale, live = tmp / f"autograder-batch-pid{dead}-stale", tmp / f"autograder-batch-pid{os.getpid()}-live"
    for folder in (stale, live):
        (folder / "submission").mkdir(parents=True)
        (folder / "submission" / "ngram.py").write_text("x = 1\n")

    seen: dict = {}
    deadline = time.monotonic() + 90
    try:
        while len(seen) < len(runs):
            for key, (proc, tmp) in runs.items():
                if key in seen:
                    continue
                if proc.poll() is not None:
                    raise AssertionError(f"{key}: the batch ended before it graded anything: {proc.communicate()[0]}")
                if any(p.name.startswith("autograder-batch-") and p.name not in (stale.name, live.name) for p in tmp.iterdir()):
                    seen[key] = not stale.exists()
                    if key == KILL_JOB:
                        os.kill(job_of(proc.pid), signal.SIGKILL)
                    else:
                        os.killpg(proc.pid, key)  # as a terminal sends Ctrl-C, and SIGHUP when it closes
            assert time.monotonic() < deadline, f"no submission was being graded in 90 s: {sorted(set(runs) - set(seen))}"
            time.sleep(0.05)
    except BaseException:
        for proc, _ in runs.values():
            proc.kill()
            proc.communicate()
        raise

    results = {}
    for key, (proc, tmp) in runs.items():
        output, _ = proc.communicate(timeout=60)
        journal = tmp.parent / "out" / "journal.jsonl"
        results[key] = Ended(proc.returncode, output, sorted(p.name for p in tmp.iterdir() if p.name != live.name),
                             journal.read_text().count("\n") if journal.exists() else 0, seen[key])
    results["live kept"] = live.is_dir() and (live / "submission" / "ngram.py").is_file()
    return results


@pytest.mark.slow
class TestNothingOfAStudentStaysBehind:
    @pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
    def test_a_batch_stopped_while_grading_leaves_no_copy(self, ended, signum):
        run = ended[signum]
        assert run.status == 128 + signum, run.output
        assert run.graded < 2, "the batch finished before it could be stopped"
        assert [name for name in run.left if name.startswith(COPIES)] == [], (run.left, run.output)

    def test_a_job_killed_while_grading_leaves_no_copy(self, ended):
        run = ended[KILL_JOB]
        assert run.status == 0 and "crashed" in run.output, run.output  # the kill landed while the job graded
        assert [name for name in run.left if name.startswith(COPIES)] == [], (run.left, run.output)

    def test_the_next_start_removes_a_dead_processs_folders_and_keeps_a_live_ones(self, ended):
        assert ended[signal.SIGTERM].stale_gone_at_start
        assert ended["live kept"]


def test_a_sweep_removes_only_dead_owners_folders_even_a_student_uids(tmp_path, monkeypatch):
    """At the root tier a worker's folder belongs to its student uid: root sweeps it all the same. A live owner's
    folder, one not named for an owner, and a link named like one stay (rmtree never follows the link)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = 9999999  # above any pid_max (at most 2**22): no process has it
    names = {"dead": f"autograder-batch-pid{dead}-a1", "student": f"autograder-worker-pid{dead}-b2",
             "live": f"autograder-batch-pid{os.getpid()}-c3", "unnamed": "autograder-batch-d4"}
    for name in names.values():
        (tmp_path / name / "submission").mkdir(parents=True)
        (tmp_path / name / "submission" / "ngram.py").write_text("x = 1\n")
    if os.geteuid() == 0:
        for path in (tmp_path / names["student"], *(tmp_path / names["student"]).rglob("*")):
            os.chown(path, 61000, 61000)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "kept.txt").write_text("")
    (tmp_path / f"autograder-batch-pid{dead}-e5").symlink_to(target)
    scratch.sweep()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names["live"], names["unnamed"], "elsewhere",
                                                                 f"autograder-batch-pid{dead}-e5"])
    assert (target / "kept.txt").exists() and (tmp_path / names["live"] / "submission" / "ngram.py").exists()
