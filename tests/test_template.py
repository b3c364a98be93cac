"""Workers forked from a template (sandbox/host/template.py): the template stays out of their reach, what they
leave running stays below them, and grading goes on without it when it is gone."""
from __future__ import annotations

import errno
import os
import signal
import textwrap
import time

import pytest
from attacks import SOLUTIONS, tier

from autograder.sandbox.host.process import Deadline, Forbidden, Forked, Limits, Started, WorkerDied, forkable, start_template, template_modules
from autograder.sandbox.host.proxy import RefusedAtRunTime, Slot, StudentRaised
from autograder.sandbox.host.tiers import Tier

pytestmark = pytest.mark.slow  # every test here starts processes

# A submission that leaves an orphan: a grandchild in a session of its own, whose parent has exited.
ORPHANS = textwrap.dedent('''
    import ctypes, os, time

    PR_SET_CHILD_SUBREAPER = 36

    def orphan():
        """The orphan's pid and its parent's, as this worker sees them, and this worker's pid."""
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # no other program may run in a worker: forked copies of it
            os.setsid()
            if os.fork() == 0:
                os.write(write, str(os.getpid()).encode())
                time.sleep(600)
            os._exit(0)
        os.close(write)
        pid = int(os.read(read, 32))
        os.waitpid(child, 0)
        time.sleep(0.1)  # the middle process has exited: the grandchild is an orphan now
        with open(f"/proc/{pid}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
        return pid, parent, os.getpid()

    def leave_the_tree():
        """Give up being the subreaper of what this worker runs: errno, or 0 when the kernel let it."""
        libc = ctypes.CDLL(None, use_errno=True)
        return 0 if libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) == 0 else ctypes.get_errno()

    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False
''')


@pytest.fixture
def orphans(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "orphans.py").write_text(ORPHANS)
    return folder


def forked_slot(folder, template, here) -> Slot:
    slot = Slot(folder, Forbidden(), Limits(), here, template=template)
    slot.start()
    assert type(slot.worker.process) is Forked
    return slot


def test_the_template_cannot_be_signalled_by_its_workers():
    """Threat: a worker killing the template that forks its component's workers.
    Defence: the seccomp filter refuses signals to the template's pid and process group (EPERM). Shown at the
    same-user tier, where the uid would let the signal through."""
    here = Tier("same-user")
    template = start_template(here)
    slot = forked_slot(SOLUTIONS, template, here)
    try:
        worker = slot.proxy(Deadline.after(60))
        assert worker.os.getppid() == template.pid
        if slot.held.get("seccomp") != "loaded":
            pytest.skip(f"seccomp did not load here: {slot.held.get('seccomp')}")
        for target in (template.pid, -template.pid):
            with pytest.raises(StudentRaised, match=os.strerror(errno.EPERM)):
                worker.os.kill(target, int(signal.SIGKILL))
        assert template.proc.poll() is None
    finally:
        slot.stop()
        template.close()


def test_the_templates_descriptors_are_out_of_its_workers_reach():
    """Threat: a worker taking the template's control socket from /proc/PID/fd, to ask for forks of its own.
    Defences: at the root tier the template is root and the worker is not (EACCES); at the bubblewrap tier they
    share a uid, and the template is undumpable, so the kernel refuses its descriptors to any other process."""
    here = tier()
    if here.name == "same-user":
        pytest.skip("at the same-user tier a worker has the grader's uid and reaches what the grader does (SECURITY.md)")
    template = start_template(here)
    slot = forked_slot(SOLUTIONS, template, here)
    try:
        worker = slot.proxy(Deadline.after(60))
        assert worker.os.getppid() == template.pid
        owner = worker.os.stat(f"/proc/{template.pid}").st_uid
        assert (worker.os.getuid() != owner) if here.name == "root" else (worker.os.getuid() == os.getuid())
        with pytest.raises(StudentRaised, match=os.strerror(errno.EACCES)):
            worker.os.listdir(f"/proc/{template.pid}/fd")
    finally:
        slot.stop()
        template.close()


def test_what_a_forked_worker_leaves_running_stays_below_it(orphans):
    """Threat: a process that outlives its worker's pause or death (a setsid grandchild whose parent exited).
    Defences: the worker is its processes' subreaper, so the orphan's parent is the worker; the audit hook refuses the
    ctypes that would undo that (and behind it the seccomp filter: test_seccomp.py); and pausing the worker for a
    timing case kills everything below it."""
    here = tier()
    template = start_template(here)
    slot = forked_slot(orphans, template, here)
    try:
        worker = slot.proxy(Deadline.after(60))
        pid, parent, itself = worker.orphans.orphan()
        assert parent == itself
        with pytest.raises(RefusedAtRunTime, match="ctypes.dlopen"):
            worker.orphans.leave_the_tree()
        with slot.paused():
            pass
        assert worker.orphans.alive(pid) is False
    finally:
        slot.stop()
        template.close()


def test_a_forked_worker_that_dies_is_explained():
    here = tier()
    template = start_template(here)
    try:
        for exit_code, reason in (("os._exit(3)", "exited with status 3"), ("os.kill(os.getpid(), 9)", "killed by SIGKILL")):
            slot = forked_slot(SOLUTIONS, template, here)
            worker = slot.proxy(Deadline.after(60))
            with pytest.raises(WorkerDied, match=reason):
                worker.builtins.exec(f"import os; {exit_code}")
            assert slot.worker is None
    finally:
        template.close()


def test_without_its_template_a_worker_starts_from_nothing():
    """A template that died takes its workers with it; the next worker starts the slow way and grading goes on."""
    here = tier()
    template = start_template(here)
    before = forked_slot(SOLUTIONS, template, here)
    os.killpg(template.proc.pid, signal.SIGKILL)
    template.proc.wait()
    with pytest.raises(WorkerDied):
        for _ in range(100):  # its parent-death signal lands a moment later
            before.proxy(Deadline.after(60)).math.sqrt(4.0)
            time.sleep(0.05)
    after = Slot(SOLUTIONS, Forbidden(), Limits(), here, template=template)
    try:
        assert after.proxy(Deadline.after(60)).math.sqrt(4.0) == 2.0
        assert type(after.worker.process) is Started
    finally:
        after.stop()
        template.close()


def test_a_component_that_forbids_torch_is_not_forked():
    """The template has imported numpy, torch and what torch imports on a first backward: a worker that must not
    hold one of them is started without them."""
    assert not forkable(["torch", "jax"]) and not forkable(["numpy.linalg"]) and forkable(["jax"])
    assert not forkable(["torch.fx"]) and not forkable(["torch._dynamo"], template_modules(("torch._dynamo",)))
    template = start_template(tier())
    slot = Slot(SOLUTIONS, Forbidden(modules=("torch",)), Limits(), tier(), template=template)
    try:
        worker = slot.proxy(Deadline.after(60))
        loaded = worker.builtins.sorted(worker.sys.modules)
        assert "numpy" in loaded and "torch" not in loaded
        assert type(slot.worker.process) is Started
    finally:
        slot.stop()
        template.close()
