"""The template: a process that has imported numpy and torch once, and forks each worker of a submission.

Started by the grader (sandbox/host/template.py) the way a worker is, inside the run's isolation tier with an
empty environment, as `python -I template.py CONTROL_FD`, in a folder that will hold the scratch folder of every
worker it forks. It imports what every worker would import first, then only forks: a worker forked from it
starts in milliseconds instead of a second. No student code ever runs in the template, and none can reach it:
a forked worker closes the control socket before anything else, and the template is undumpable (below the root
tier it shares the workers' uid, and /proc/PID/fd of an undumpable process is closed to them).

Messages on the control socket (SOCK_SEQPACKET, one JSON object each):
- the grader's hello {"preload": modules, "parent": the grader's pid or None}; the reply {"pid": the template's
  own pid, as its workers see it};
- {"op": "fork", "workdir": folder} with a worker's request and reply pipes attached: fork a worker that serves
  them from `workdir` (worker.main); the reply {"pid": the worker's pid} carries a pidfd of it;
- {"op": "wait", "pid": pid, "seconds": s}: reap that worker if it dies within s seconds; the reply
  {"status": its wait status, or None}. Orphans left to the template (its subreaper) are killed and reaped then.
The template ends when the grader closes the socket; its workers die with it (their parent-death signal).
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seccomp  # noqa: E402  (-I keeps this folder off sys.path; it is removed again below)
import walls  # noqa: E402
import worker  # noqa: E402

del sys.path[0]

PR_SET_DUMPABLE = 4
MESSAGE_BYTES = 1 << 16
POLL_SECONDS = 0.005


def main(control_fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0)
    libc.prctl(walls.PR_SET_PDEATHSIG, signal.SIGKILL)
    libc.prctl(seccomp.PR_SET_CHILD_SUBREAPER, 1)  # what a dead worker left running comes here, to be killed
    control = socket.socket(fileno=control_fd)
    hello = json.loads(control.recv(MESSAGE_BYTES))
    if hello["parent"] is not None and os.getppid() != hello["parent"]:  # the grader died before the signal was set
        os._exit(1)
    for name in hello["preload"]:
        importlib.import_module(name)
    control.send(json.dumps({"pid": os.getpid()}).encode())
    workers: set[int] = set()
    while True:
        message, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 2)
        if not message:
            return
        request = json.loads(message)
        if request["op"] == "fork":
            pid = fork_worker(control, request["workdir"], *fds)
            workers.add(pid)
            pidfd = os.pidfd_open(pid)
            socket.send_fds(control, [json.dumps({"pid": pid}).encode()], [pidfd])
            os.close(pidfd)
        elif request["op"] == "wait":
            status = reap(request["pid"], request["seconds"])
            if status is not None:
                workers.discard(request["pid"])
            kill_strays(workers)
            control.send(json.dumps({"status": status}).encode())


def fork_worker(control: socket.socket, workdir: str, request_fd: int, reply_fd: int) -> int:
    pid = os.fork()
    if pid:
        os.close(request_fd)
        os.close(reply_fd)
        return pid
    try:
        control.close()  # first of all: student code must never be able to ask for a fork
        os.setsid()  # a process group of its own, for the grader to kill
        os.chdir(workdir)
        os.environ["HOME"] = workdir
        if "PWD" in os.environ:  # bubblewrap sets it
            os.environ["PWD"] = workdir
        keep = sorted({0, 1, 2, request_fd, reply_fd})  # no other descriptor of the template's reaches student code
        for low, high in zip(keep, keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
            os.closerange(low + 1, high)
        sys.argv = [sys.argv[0], str(request_fd), str(reply_fd)]
        worker.main(request_fd, reply_fd)
    except BaseException:
        os._exit(1)
    os._exit(0)


def reap(pid: int, seconds: float) -> int | None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done or time.monotonic() >= deadline:
            return status if done else None
        time.sleep(POLL_SECONDS)


def kill_strays(workers: set[int]) -> None:
    me = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                parent = f.read().rsplit(b")", 1)[1].split()[1].decode()
        except (OSError, IndexError):
            continue
        if parent == me and int(pid) not in workers:
            try:
                os.kill(int(pid), signal.SIGKILL)
                os.waitpid(int(pid), 0)
            except (ProcessLookupError, ChildProcessError):
                pass


if __name__ == "__main__":
    main(int(sys.argv[1]))
