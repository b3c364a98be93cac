"""What a worker looks like from the inside, asked through the same proxy the checks use.

A submission's code sees exactly this: no secret in its environment or argv, no descriptors
but its two pipes and /dev/null, hard resource limits, and at the root tier a uid of its own.
"""
from __future__ import annotations

import os
import resource

import pytest
from attacks import SOLUTIONS, tier

from autograder.sandbox.host.process import Deadline, Forbidden, Forked, Limits, Started, WorkerWontStart, start_template, worker_env
from autograder.sandbox.host.proxy import Slot
from autograder.sandbox.host.tiers import STUDENT_ID_BASE

pytestmark = pytest.mark.slow  # every test here grades or starts a process


@pytest.fixture(scope="module", params=["started", "forked"])
def slot(request):
    """A worker started from nothing, and one forked from a template (sandbox/host/template.py)."""
    os.environ["AUTOGRADER_SECRET"] = "must-not-reach-the-worker"
    template = start_template(tier()) if request.param == "forked" else None
    slot = Slot(SOLUTIONS, Forbidden(), Limits(), tier(), template=template)
    try:
        slot.start()
        assert type(slot.worker.process) is (Forked if template else Started)
        yield slot
    finally:
        slot.stop()
        if template:
            template.close()
        del os.environ["AUTOGRADER_SECRET"]


def proxy(slot: Slot):
    return slot.proxy(Deadline.after(60))


def test_environment_and_argv_hold_no_secret(slot):
    worker = proxy(slot)
    env = worker.os.environ.copy()
    fixed = {"HOME", "OMP_NUM_THREADS", "LC_ALL", "GLIBC_TUNABLES", "USER"}
    cuda = set(worker_env()) - fixed  # what CUDA needs of the grader's environment, where it has any (test_gpu.py)
    assert fixed <= set(env) <= fixed | cuda | {"PWD"}, env  # bwrap sets PWD
    assert not any("must-not-reach" in value for value in env.values())
    argv = worker.value(worker.sys.argv)
    assert argv[1:] and all(arg.isdigit() for arg in argv[1:]), argv  # only the two descriptor numbers


def test_only_the_protocol_descriptors_are_open(slot):
    worker = proxy(slot)
    argv = worker.value(worker.sys.argv)
    extra = set(worker.os.listdir("/proc/self/fd")) - {"0", "1", "2", argv[1], argv[2]}
    assert len(extra) <= 1, extra  # the folder being listed is open while it is listed
    assert {worker.os.readlink(f"/proc/self/fd/{fd}") for fd in ("0", "1", "2")} == {"/dev/null"}


def test_limits_are_hard(slot):
    worker = proxy(slot)
    limits = Limits()
    for name, value in (("RLIMIT_DATA", limits.memory_bytes), ("RLIMIT_FSIZE", limits.file_bytes),
                        ("RLIMIT_NOFILE", limits.open_files), ("RLIMIT_CORE", 0), ("RLIMIT_CPU", limits.cpu_seconds)):
        assert worker.resource.getrlimit(getattr(resource, name)) == (value, value), name
    if worker.os.getuid() != 0:
        soft, hard = worker.resource.getrlimit(resource.RLIMIT_NPROC)
        assert soft == hard != resource.RLIM_INFINITY


def test_the_worker_walls_itself_in(slot):
    slot.start()
    worker, here = proxy(slot), slot.tier
    if here.name == "root":
        assert worker.os.getuid() >= STUDENT_ID_BASE and worker.os.getgroups() == []
    if slot.held.get("seccomp") != "loaded":
        pytest.skip(f"seccomp did not load here: {slot.held.get('seccomp')}")
    with pytest.raises(Exception, match="Permission denied|PermissionError"):
        worker.socket.socket(2, 1)  # AF_INET, SOCK_STREAM


@pytest.mark.parametrize("forked", [False, True])
def test_a_worker_that_cannot_start_leaves_nothing_open(forked):
    """A worker that dies while starting (here: its guard cannot find what it must forbid) takes its pipes with it,
    and the failure is the grader's (no student code had run)."""
    template = start_template(tier()) if forked else None
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        slot = Slot(SOLUTIONS, Forbidden(calls=("no_such_module.call",)), Limits(), tier(), template=template)
        with pytest.raises(WorkerWontStart, match=r"could not start \(the worker process exited with status 1; tier"):
            slot.start()
    assert sorted(os.listdir("/proc/self/fd")) == before
    if template:
        template.close()
