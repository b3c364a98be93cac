"""What a worker looks like from the inside, asked through the same proxy the checks use.

A submission's code sees exactly this: no secret in its environment or argv, no descriptors
but its two pipes and /dev/null, hard resource limits, and at the root tier a uid of its own.
"""
from __future__ import annotations

import os
import resource

import pytest
from attacks import SOLUTIONS, tier

from autograder.sandbox.host.process import Limits, WorkerFailure
from autograder.sandbox.host.proxy import Student
from autograder.sandbox.host.tiers import STUDENT_ID_BASE


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    os.environ["AUTOGRADER_SECRET"] = "must-not-reach-the-worker"
    student = Student(SOLUTIONS, [], [], Limits(), tier())
    try:
        yield student
    finally:
        student.stop()
        del os.environ["AUTOGRADER_SECRET"]


def test_environment_and_argv_hold_no_secret(worker):
    env = worker.os.environ.copy()
    fixed = {"HOME", "OMP_NUM_THREADS", "LC_ALL", "GLIBC_TUNABLES"}
    assert fixed <= set(env) <= fixed | {"PWD"}, env  # bwrap sets PWD
    assert not any("must-not-reach" in value for value in env.values())
    argv = worker.value(worker.sys.argv)
    assert argv[1:] and all(arg.isdigit() for arg in argv[1:]), argv  # only the two descriptor numbers


def test_only_the_protocol_descriptors_are_open(worker):
    argv = worker.value(worker.sys.argv)
    extra = set(worker.os.listdir("/proc/self/fd")) - {"0", "1", "2", argv[1], argv[2]}
    assert len(extra) <= 1, extra  # the folder being listed is open while it is listed
    assert {worker.os.readlink(f"/proc/self/fd/{fd}") for fd in ("0", "1", "2")} == {"/dev/null"}


def test_limits_are_hard(worker):
    limits = Limits()
    for name, value in (("RLIMIT_DATA", limits.memory_bytes), ("RLIMIT_FSIZE", limits.file_bytes),
                        ("RLIMIT_NOFILE", limits.open_files), ("RLIMIT_CORE", 0), ("RLIMIT_CPU", limits.cpu_seconds)):
        assert worker.resource.getrlimit(getattr(resource, name)) == (value, value), name
    if worker.os.getuid() != 0:
        soft, hard = worker.resource.getrlimit(resource.RLIMIT_NPROC)
        assert soft == hard != resource.RLIM_INFINITY


def test_the_worker_walls_itself_in(worker):
    worker.start()
    here = worker.tier
    if here.name == "root":
        assert worker.os.getuid() >= STUDENT_ID_BASE and worker.os.getgroups() == []
    if worker.held.get("seccomp") != "loaded":
        pytest.skip(f"seccomp did not load here: {worker.held.get('seccomp')}")
    with pytest.raises(Exception, match="Permission denied|PermissionError"):
        worker.socket.socket(2, 1)  # AF_INET, SOCK_STREAM


def test_a_worker_that_cannot_start_leaves_nothing_open():
    """A worker that dies while starting (here: its guard cannot find what it must forbid) takes its pipes with it."""
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        student = Student(SOLUTIONS, [], ["no_such_module.call"], Limits(), tier())
        with pytest.raises(WorkerFailure):
            student.start()
    assert sorted(os.listdir("/proc/self/fd")) == before
