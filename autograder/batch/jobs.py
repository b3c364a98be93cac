"""Grading a batch's submissions in parallel: job processes, each grading one submission at a time.

A job process enters its isolation once, then grades whatever it is sent, exactly as `autograder grade` would,
and sends back the run with the submission's account of its files. Its timing cases share a lock file with the
other jobs (floor.Floor), so that a timing case runs with nothing else of the batch running. The batch
(`Jobs`) watches each job: one that dies or overruns the per-submission budget is killed with everything it
started, its submission gets a row saying so, and a fresh job takes its place. On a cluster (cluster.py) each
node's grader holds such a job in the same way.
"""
from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from ..report import failure_json
from ..rubric import Rubric
from ..runner import grade, reference_worker
from ..sandbox.host.floor import Floor
from ..sandbox.host import reaper, scratch
from ..sandbox.host.tiers import STUDENT_IDS, isolation_for, weakened_warning
from ..submission import open_submission
from ..submission.reading import SubmissionError
from ..terminal import STOPS
from ..timing import kept_started

PR_SET_PDEATHSIG = 1

@dataclass(frozen=True)
class Task:
    """A submission to grade: all of it (timing None), or only its timing cases (True) or only the others (False); of
    all its components, or of some."""

    id: str
    path: Path
    timing: bool | None = None
    components: tuple[str, ...] | None = None  # these only (a regrade of what changed); None: every one


@dataclass(frozen=True)
class Setup:
    """What every job needs, sent once when it starts."""

    rubric: Rubric
    secret: str
    hidden: tuple[Path, ...]  # what students must not read besides the grader's files: the batch's output, the secret
    require_tier: str
    timing_lock: Path
    lanes: int
    parent: int  # the batch's pid


def job_main(conn: Connection, setup: Setup) -> None:
    """A job process: grade each task received until told to stop (None); reply with a dict per task."""
    for signum in (signal.SIGINT, *STOPS):  # the batch's to handle, even sent to its process group: it stops the jobs
        signal.signal(signum, signal.SIG_IGN)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a batch killed outright takes its jobs with it
    if os.getppid() != setup.parent:
        return
    rubric = setup.rubric
    try:
        isolation = isolation_for(rubric.path.parent, rubric.solutions_dir, list(setup.hidden), setup.require_tier).__enter__()
    except Exception as exc:
        conn.send({"fatal": f"{type(exc).__name__}: {exc}"})
        return
    conn.send({"ready": isolation.record(), "uids": [isolation.tier.with_id(k).student_id for k in range(STUDENT_IDS)]})
    reference = reference_worker(rubric, isolation.tier)  # one for the job's submissions: a start saved on each
    floor = Floor(setup.timing_lock)
    try:
        while (task := conn.recv()) is not None:
            if task.timing is not False:
                kept_started(reference, floor)
            conn.send(_grade_one(rubric, isolation, setup, task, reference))
    finally:
        reference.stop()


def _grade_one(rubric, isolation, setup: Setup, task: Task, reference) -> dict:
    """A task's reply: for a graded submission the run and the account of its files (results.json is written from
    both, once a cluster's parts are merged); otherwise its status, why, and results.json saying so."""
    with scratch.folder("batch") as copies:
        try:
            submission = open_submission(task.path, copies / "submission", accept_misnamed=rubric.accept_misnamed,
                                         graded=rubric.files)
        except SubmissionError as exc:
            return failure("not_gradable", str(exc))
        try:
            run = grade(rubric, submission, secret=setup.secret, isolation=isolation, lanes=setup.lanes,
                        machine=setup.timing_lock, timing=task.timing, reference=reference,
                        component_ids=list(task.components) if task.components else None)
        except Exception as exc:  # the grader's own failure: no points, and the row says so
            traceback.print_exc()
            return failure("infra_error", f"internal error ({type(exc).__name__}); course staff have been told")
        return {"status": "ok", "message": "", "run": run, "account": submission.account, "seconds": run.seconds}


def failure(status: str, message: str) -> dict:
    """The reply for a submission not graded: its status, why, and results.json with no points and the reason."""
    return {"status": status, "message": message, "results": failure_json(message)}


class _Job:
    def __init__(self, context, setup: Setup):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=job_main, args=(child, setup), name="autograder-job", daemon=True)
        self.process.start()
        child.close()
        reaper.worker_started(self.process.pid)  # a job is no stray for a sweep of this process's children
        self.uids: list[int | None] = []
        self.task: Task | None = None
        self.since = 0.0

    def kill(self) -> None:
        """The job and every process it started (its workers, and at the root tier whatever runs as its uids), and the
        copies of submissions it left (scratch.py: killed, it removes none of them)."""
        below = []
        if self.process.exitcode is None:  # not yet reaped, so its pid is still its own
            below = reaper.kill_tree(self.process.pid, [u for u in dict.fromkeys(self.uids) if u is not None])
        self.process.join()
        reaper.reap(below)
        reaper.worker_stopped(self.process.pid)
        self.conn.close()
        scratch.sweep()


class Jobs:
    """`count` job processes; `run(tasks, on_done)` grades each task, calling on_done(task, reply) as each ends."""

    def __init__(self, count: int, setup: Setup, budget: float, say=None):
        reaper.harden_parent()  # a killed job's workers become this process's orphans, to be reaped
        self.context = multiprocessing.get_context("spawn")
        self.count, self.setup, self.budget, self.say = count, setup, budget, say
        self.jobs: list[_Job] = []

    def run(self, tasks: list[Task], on_done) -> dict:
        """Grade every task, then stop the jobs; returns the isolation they graded under, as the first reported it."""
        try:
            return self.grade(tasks, on_done)
        finally:
            self.stop()

    def grade(self, tasks: list[Task], on_done) -> dict:
        """Grade every task, starting jobs as needed and keeping them for the next call; returns the isolation of the
        first job started (none started: {})."""
        queue, record = list(tasks), {}
        while queue or any(j.task for j in self.jobs):
            while len(self.jobs) < min(self.count, len(queue) + sum(1 for j in self.jobs if j.task)):
                started = self.start()
                if not record and self.say and weakened_warning(started):  # said as the first job starts, before any grade
                    self.say(f"warning: {weakened_warning(started)}")
                record = record or started
            for job in self.jobs:
                if job.task is None and queue:
                    job.task, job.since = queue.pop(0), time.monotonic()
                    job.conn.send(job.task)
            busy = [j for j in self.jobs if j.task]
            ready = wait([j.conn for j in busy] + [j.process.sentinel for j in busy], timeout=1.0)
            for job in busy:
                reply = None
                if job.conn in ready:
                    with contextlib.suppress(EOFError, OSError):  # a job that died mid-reply: its sentinel says so
                        reply = job.conn.recv()
                if reply is not None:
                    task, job.task = job.task, None
                    on_done(task, reply)
                elif job.process.sentinel in ready or not job.process.is_alive():
                    self._replace(job, on_done, "crashed", "the grading process died while grading this submission")
                elif time.monotonic() - job.since > self.budget:
                    self._replace(job, on_done, "timeout", f"grading took longer than the batch's budget of {self.budget:g} s "
                                  "per submission, so it was stopped")
        return record

    def start(self) -> dict:
        """Start one more job; returns the isolation it reported. RuntimeError when it cannot start."""
        job = _Job(self.context, self.setup)
        try:
            hello = job.conn.recv() if job.conn.poll(120) else {"fatal": "the grading process did not start within 120 s"}
            if "fatal" in hello:
                raise RuntimeError(f"a grading process could not start: {hello['fatal']}")
        except BaseException:  # it failed, or the batch was stopped while it started: it is not one of self.jobs yet
            job.kill()
            raise
        job.uids = hello["uids"]
        self.jobs.append(job)
        return hello["ready"]

    def _replace(self, job: _Job, on_done, status: str, message: str) -> None:
        task = job.task
        job.kill()
        self.jobs.remove(job)
        on_done(task, failure(status, message))

    def stop(self) -> None:
        for job in self.jobs:
            if job.task is None and job.process.is_alive():
                try:
                    job.conn.send(None)
                except OSError:
                    pass
                job.process.join(10)
            job.kill()
        self.jobs = []
