"""The worker's walls, raised by the worker itself before any student code runs (sandbox tiers only).

Everything here is Linux's: resource limits (`resource`), a network namespace (unshare), the
parent-death signal and the subreaper (prctl), the student uid, and the seccomp filter
(seccomp.py). The portable runner, which checks a student's own code on their own machine,
never imports this module (worker.py starts it without walls).
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal

import seccomp

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_PDEATHSIG = 1


def isolate(hello: dict) -> dict:
    """Network namespace, the student uid (root tier), limits, then the seccomp filter; says what held."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:  # when memory runs out across processes, the kernel takes students first (before the uid changes: then /proc/self is root's)
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    held = {"network_namespace": hello["in_network_namespace"], "seccomp": None}
    uid = hello["student_id"]
    if not held["network_namespace"]:  # unprivileged, a user namespace is the key to a network namespace
        held["network_namespace"] = libc.unshare(CLONE_NEWNET if uid is not None else CLONE_NEWUSER | CLONE_NEWNET) == 0
    if uid is not None:  # started as root: become the student for good
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the grader; set after the uid change, which clears it
    # Orphans of the student's processes become ours, not the grader's or the template's: everything the student
    # runs stays below the worker, where the grader stops or kills it (the seccomp filter keeps this set).
    libc.prctl(seccomp.PR_SET_CHILD_SUBREAPER, 1)
    if hello["parent"] is not None and os.getppid() != hello["parent"]:  # the grader died before that
        os._exit(1)
    apply_limits(hello["limits"])
    try:
        seccomp.install(hello["protected_pids"], hello["protected_pgids"])
        held["seccomp"] = "loaded"
    except seccomp.SeccompUnavailable as exc:
        held["seccomp"] = f"not loaded: {exc}"
    return held


def apply_limits(limits: dict) -> None:
    # Soft and hard limits are equal so student code cannot raise them again.
    # RLIMIT_AS is left alone: importing torch reserves several GiB of address space.
    for name, value in (
        ("RLIMIT_CPU", limits["cpu_seconds"]),
        ("RLIMIT_DATA", limits["memory_bytes"]),
        ("RLIMIT_FSIZE", limits["file_bytes"]),
        ("RLIMIT_NOFILE", limits["open_files"]),
        ("RLIMIT_CORE", 0),
    ):
        resource.setrlimit(getattr(resource, name), (value, value))
    if os.getuid() != 0:  # root ignores RLIMIT_NPROC; for others it counts every task of the uid
        tasks = _tasks_of(os.getuid()) + limits["processes"]
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))


def _tasks_of(uid: int) -> int:
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                if int(next(line for line in f if line.startswith("Uid:")).split()[1]) == uid:
                    count += len(os.listdir(f"/proc/{pid}/task"))
        except (OSError, StopIteration, ValueError):
            continue
    return count
