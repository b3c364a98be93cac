"""The parent's own hygiene: undumpable, and the reaper of every process a student leaves behind.

Undumpable (PR_SET_DUMPABLE 0) makes the kernel refuse other processes of the
same uid a look at the grader's memory, environment, open files and working
folder under /proc, and refuse them ptrace. As a child subreaper
(PR_SET_CHILD_SUBREAPER) the grader inherits every orphan of its workers, a
`setsid` grandchild too, instead of init; `sweep` kills them all before any
result is written. At the root tier each worker uid is the grader's alone, so
the sweep also kills whatever still runs as that uid.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
SWEEP_SECONDS = 10.0

_live_workers: set[int] = set()  # pids of workers still in use: the sweep leaves them alone
_starting = threading.Lock()  # a worker's fork and its registration are one step to the sweep (workers start on a thread)


def harden_parent() -> list[str]:
    """Make this process undumpable and a subreaper; the list says what could not be done."""
    libc = ctypes.CDLL(None, use_errno=True)  # here, not on import: the portable tier imports this module on any OS
    missing = []
    for option, what in ((PR_SET_DUMPABLE, "undumpable"), (PR_SET_CHILD_SUBREAPER, "subreaper")):
        value = 0 if option == PR_SET_DUMPABLE else 1
        if libc.prctl(option, value, 0, 0, 0) != 0:
            missing.append(f"could not make the grader {what}: {os.strerror(ctypes.get_errno())}")
    return missing


def start(command: list[str], **popen) -> subprocess.Popen:
    """Start a process of the worker side (a worker, a template) in a session of its own, registered as live from
    its fork on, so that no sweep takes it for a stray."""
    with _starting:
        proc = subprocess.Popen(command, start_new_session=True, **popen)
        _live_workers.add(proc.pid)
    return proc


def stop(proc: subprocess.Popen) -> None:
    """Kill a process `start` started, with its process group, reap it, and forget it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _live_workers.discard(proc.pid)


def worker_started(pid: int) -> None:
    _live_workers.add(pid)


def worker_stopped(pid: int) -> None:
    _live_workers.discard(pid)


def sweep(student_uid: int | None = None) -> None:
    """Kill and reap every child of ours that is not a live worker, and at the root tier every
    process of `student_uid`, until none is left (a fork storm respawns while it is killed)."""
    deadline = time.monotonic() + SWEEP_SECONDS
    while time.monotonic() < deadline:
        with _starting:
            strays = [pid for pid in _children() if pid not in _live_workers]
        owned = student_uid is not None and _kill_uid(student_uid)
        for pid in strays:
            _kill_and_reap(pid)
        if not strays and not owned:
            return
    raise RuntimeError("student processes survived the sweep")


def kill_tree(pid: int, uids: list[int]) -> list[int]:
    """Kill `pid` and every process below it (a grading process of a batch, with its workers) or running as one of
    `uids` (its students' at the root tier). Returns those below it: once `pid` is reaped they are this process's
    children (it is their subreaper), for `reap`."""
    parents = {p: _parent_of(p) for p in map(int, filter(str.isdigit, os.listdir("/proc")))}
    below = [p for p in parents if _descends(p, pid, parents)]
    for p in [pid, *below]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    for uid in uids:
        _kill_uid(uid)
    return below


def reap(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def still(worker: int, depth: int) -> int:
    """Kill what a live worker left running beside it and stop the worker itself (SIGSTOP, which it
    cannot catch), so none of the student's processes or threads run while the reference is timed;
    returns the pid to SIGCONT afterwards. The worker is `depth` generations below the process we
    started (bwrap, its init, then Python: 2), the oldest at each level; everything else below it,
    and every orphan we inherited, is killed."""
    parents = {pid: _parent_of(pid) for pid in map(int, filter(str.isdigit, os.listdir("/proc")))}
    keep, node = {worker}, worker
    for _ in range(depth):
        node = min((p for p, parent in parents.items() if parent == node), key=_start_time, default=node)
        keep.add(node)
    below = [pid for pid in parents if pid not in keep and _descends(pid, worker, parents)]
    with _starting:  # a worker being started, or the sweep's own killer, is no orphan
        strays = [pid for pid in _children() if pid not in _live_workers]
    for pid in below + strays:
        _kill_and_reap(pid)
    os.kill(node, signal.SIGSTOP)
    # Signals land asynchronously: wait until the killed are dead and the worker has stopped.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and (_state(node) not in ("T", "t", "Z", None)
                                           or any(_state(pid) not in ("Z", "X", None) for pid in below)):
        time.sleep(0.0002)
    return node


def _state(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[0].decode() if fields else None


def _descends(pid: int, ancestor: int, parents: dict) -> bool:
    seen = 0
    while pid in parents and seen < 64:
        pid, seen = parents[pid], seen + 1
        if pid == ancestor:
            return True
    return False


def _start_time(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[19]) if fields else 1 << 62


def grader_ids() -> tuple[list[int], list[int]]:
    """This process and every one above it up to init, with their threads (kill() takes a thread id too),
    and their process groups: student code may signal none of them."""
    pids, pid = [], os.getpid()
    while pid is not None and pid > 1:
        pids.append(pid)
        pid = _parent_of(pid)
    pids += [int(t) for p in pids for t in _threads(p) if int(t) != p]
    pgids = set()
    for pid in pids:
        try:
            pgids.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    return pids, sorted(pgids)


def _threads(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _children() -> list[int]:
    me = os.getpid()
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and _parent_of(int(entry)) == me]


def _parent_of(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def _stat(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat from the state on (state, ppid, ...), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: the fields after it start past the last ')'
    return stat[stat.rindex(b")") + 2:].split()


def _kill_and_reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _kill_uid(uid: int) -> bool:
    """kill(-1) as `uid`: every process of that uid dies at once. True when there were any still running (a zombie
    runs nothing: one whose parent is a template reaps when the grader asks it, sandbox/host/template.py)."""
    if not any(_owner(pid) == uid and _state(int(pid)) not in ("Z", "X", None) for pid in os.listdir("/proc") if pid.isdigit()):
        return False
    with _starting:  # no other thread's sweep takes this child for a stray
        child = os.fork()
        if child == 0:  # only system calls here: the fork of a threaded parent
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(child, 0)
    return True


def _owner(pid: str) -> int | None:
    """The real uid, from status: /proc/<pid> itself belongs to root when the process made itself undumpable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(next(line for line in f if line.startswith("Uid:")).split()[1])
    except (OSError, StopIteration, ValueError):
        return None
