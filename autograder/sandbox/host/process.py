"""The parent's side of the boundary: start a worker, talk to it, kill it.

In the sandbox, a worker is a `python -I` process in a scratch copy of the
submission, forked from the submission's template (template.py) or started
from nothing, inside the run's isolation tier (tiers.py) with an environment of
its own (worker_env: nothing of the grader's but what CUDA needs), its own
session (so the whole group can be killed), no descriptors but its two pipes,
and stdout/stderr sent to /dev/null (what student code prints through Python
comes back with each reply instead, as text: worker.Printed); nothing it prints
counts. Before importing student code it walls itself in (walls.py).

In the portable tier (a student checking their own code on macOS, Windows or
Linux without the sandbox) a worker is a plain child process on its stdin and
stdout (Spawned, Streams): the same worker code, requests, deadlines and
messages, and nothing that only Linux has.

Either way, a request that times out, or a worker that dies, poisons only that
worker: the caller drops it and the next case starts another.
"""
from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ...outcome import Ended, GraderFailed, seconds_text
from . import reaper, scratch
from ..worker import wire
from .template import Template, TemplateGone
from .tiers import Tier, cuda_driver_dirs

# The worker's side of the boundary (sandbox/worker/): copied into each worker's scratch folder, so
# that at the root and bubblewrap tiers the worker needs nothing of the grader's.
WORKER_SIDE = Path(__file__).parents[1] / "worker"
WORKER_FILES = ("worker.py", "walls.py", "guard.py", "forbidden_ops.py", "audit.py", "seccomp.py", "wire.py")
STARTUP_SECONDS = 60.0
# What a worker imports before student code unless its cases need less (cases.USES): torch takes about 0.9 s to import,
# which a template (or a worker started ahead) pays early.
PRELOAD = ("numpy", "torch")
# What torch imports on a process's first backward, 0.3 s: a template imports it once for all the workers it forks.
FIRST_BACKWARD = ("torch.fx.experimental.symbolic_shapes",)
# Fixed malloc thresholds: glibc otherwise moves them with each process's history, so two workers
# running the same code could differ 2x in page faults (measured on attention's 8 MB score matrices).
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"
# USER: the student uid of the root tier has no account, and getpass.getuser() (torch.compile's cache folders) needs a name.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "LC_ALL": "C.UTF-8", "GLIBC_TUNABLES": MALLOC_TUNABLES, "USER": "student"}  # and HOME, its folder
# What CUDA needs of the grader's environment, which workers do not otherwise get: the devices they may use (Ray sets
# CUDA_VISIBLE_DEVICES on a GPU node) and how they are numbered, so that a worker's cuda is the grader's.
CUDA_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 600
    memory_bytes: int = 4 << 30
    file_bytes: int = 16 << 20
    open_files: int = 256
    processes: int = 256  # tasks (threads too) beyond those the uid already has
    reply_bytes: int = 256 << 20


@dataclass(frozen=True)
class Forbidden:
    """What a component forbids, as its worker is told (grading.yaml's `forbidden`): modules refused at import, calls
    refused wherever they are reached, operators refused where they run (sandbox/worker/guard.py)."""

    modules: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    operators: tuple[str, ...] = ()


@dataclass(frozen=True)
class Deadline:
    """A case's time limit, carried by every request made for the case."""

    seconds: float
    at: float  # time.monotonic()

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(seconds, time.monotonic() + seconds)


class WorkerFailure(Ended):
    """The call produced no usable answer; the worker must be replaced."""

    kind = "crashed"

    def describe(self) -> str:
        return f"Your code crashed the process running it: {self}."


class WorkerDied(WorkerFailure):
    """The worker's process ended: `notice` says how, in facts; the message adds what student code may have done."""

    def __init__(self, notice: str, exited: bool):
        super().__init__(notice + (" (sys.exit or os._exit in student code?)" if exited else ""))
        self.notice = notice


class WorkerWontStart(GraderFailed):
    """A worker died or hung before it was ready: no student code had run in it, so the failure is the grader's."""


class CallTimeout(WorkerFailure):
    kind = "timeout"

    def __init__(self, limit: float):
        super().__init__(f"did not finish within {seconds_text(limit)}")
        self.seconds = limit

    def describe(self) -> str:
        return f"Timed out: the case did not finish within {seconds_text(self.seconds)} (an infinite loop, or far too slow)."


class BadReply(WorkerFailure):
    kind = "bad_reply"

    def describe(self) -> str:
        return f"Your code sent back something the grader cannot accept: {self}."


class StudentRaised(Ended):
    """Student code raised; the worker itself is fine."""

    def __init__(self, type_name: str, message: str, frames: list[str]):
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message, self.frames = type_name, message, frames
        self.kind = "not_implemented" if type_name == "NotImplementedError" else "raised"

    def describe(self) -> str:
        if self.kind == "not_implemented":
            return f"Not implemented yet ({self.message or 'NotImplementedError'})."
        where = "".join(f"\n  at {frame}" for frame in self.frames)
        return f"Your code raised {self.type_name}: {self.message}{where}"


def worker_env() -> dict[str, str]:
    """The environment a worker (or template) starts with, but for HOME: WORKER_ENV, and from the grader's own
    environment CUDA_VARIABLES and, as LD_LIBRARY_PATH, the folders of CUDA's driver (tiers.cuda_driver_dirs)."""
    env = {**WORKER_ENV, **{name: os.environ[name] for name in CUDA_VARIABLES if name in os.environ}}
    driver = cuda_driver_dirs()
    if driver:
        env["LD_LIBRARY_PATH"] = ":".join(map(str, driver))
    return env


def preloaded(forbidden_modules: list[str], imports: tuple[str, ...] = PRELOAD) -> list[str]:
    """What a worker imports before student code, so that no case pays for it: what its cases' requests use and import
    (runner._modules), less any module that clashes with a forbidden one."""
    return [m for m in dict.fromkeys(imports) if not _clashes(m, forbidden_modules)]


def _clashes(module: str, forbidden_modules: list[str]) -> bool:
    """Whether `module` is, holds or sits in a forbidden one (a module already loaded would be handed out without
    the import guard)."""
    return any(f == module or f.startswith(module + ".") or module.startswith(f + ".") for f in forbidden_modules)


def template_modules(imports: tuple[str, ...] = PRELOAD) -> tuple[str, ...]:
    """What a template imports for the workers it forks: what their cases use and import, and with torch FIRST_BACKWARD."""
    return tuple(dict.fromkeys(imports + (FIRST_BACKWARD if "torch" in imports else ())))


def start_template(tier: Tier, modules: tuple[str, ...] = template_modules()) -> Template:
    """A template (template.py) for the workers of one submission that imports `modules`, started now."""
    return Template(tier, modules, WORKER_SIDE, (*WORKER_FILES, "template.py"), worker_env())


def forkable(forbidden_modules: list[str], modules: tuple[str, ...] = template_modules()) -> bool:
    """Whether a worker that forbids these modules may be forked from a template that has imported `modules`."""
    return not any(_clashes(m, forbidden_modules) for m in modules)


class Worker:
    """One running worker process holding one submission: in the sandbox, forked from `template` where it may be
    (template.py), else started from nothing; in the portable tier (a student's own machine), spawned with no walls."""

    def __init__(self, submission_dir: Path, forbidden: Forbidden, limits: Limits, tier: Tier, imports: tuple[str, ...] = PRELOAD,
                 template: Template | None = None):
        self.limits = limits
        template = template if tier.walled and template and not template.gone and forkable(forbidden.modules, template.modules) else None
        self.scratch = scratch.make("worker", template.root if template else None)
        workdir = self.scratch / "submission"
        shutil.copytree(submission_dir, workdir)
        if tier.walled:
            self.process, self.channel, protected = self._walled(workdir, tier, template)
        else:
            self.process, self.channel, protected = self._portable(workdir)
        hello = {
            "limits": asdict(limits),
            "forbidden": asdict(forbidden),
            "preload": preloaded(forbidden.modules, imports),
            "student_id": tier.student_id,
            "in_network_namespace": tier.bwrap is not None,
            **protected,
        }
        try:
            ready, _ = self.exchange(hello, [], Deadline.after(STARTUP_SECONDS))
        except WorkerFailure as exc:  # nobody else holds this worker yet: its channel and process end here
            self.close()
            why = exc.notice if isinstance(exc, WorkerDied) else str(exc)
            raise WorkerWontStart(f"the process that runs the submission could not start ({why}; tier {tier.name})") from None
        self.held = ready.get("held", {})  # sent before any student code ran, so it can be believed

    def _walled(self, workdir: Path, tier: Tier, template: Template | None) -> tuple[Forked | Started, Pipes, dict]:
        """A sandboxed worker, forked or started inside the tier's walls, on two pipes; and what its walls protect."""
        if tier.student_id is not None:
            _chown_tree(self.scratch, tier.student_id)
        request_read, request_fd = os.pipe()
        reply_fd, reply_write = os.pipe()
        os.set_blocking(request_fd, False)  # requests are written under the call's deadline
        try:
            process: Forked | Started | None = Forked(template, workdir, request_read, reply_write) if template else None
        except TemplateGone:
            process = None
        if process is None:
            runtime = self.scratch / "runtime"  # the worker's side, so that it needs nothing of the grader's
            runtime.mkdir()
            for name in WORKER_FILES:
                shutil.copy(WORKER_SIDE / name, runtime / name)
            argv = [sys.executable, "-I", str(runtime / "worker.py"), str(request_read), str(reply_write)]
            try:
                process = Started(tier.command(argv, self.scratch, workdir), workdir, (request_read, reply_write), tier.bwrap is not None)
            except OSError as exc:  # no process to close: only the pipes and the scratch folder
                for fd in (request_read, reply_write, request_fd, reply_fd):
                    os.close(fd)
                scratch.remove(self.scratch)
                raise WorkerWontStart(f"the process that runs the submission could not be started ({exc})") from None
        os.close(request_read)
        os.close(reply_write)
        # In a PID namespace the grader's pids mean nothing, and the grader cannot be seen anyway.
        pids, pgids = reaper.grader_ids() if tier.bwrap is None else ([], [])
        parent = None if tier.bwrap else os.getpid()  # in bubblewrap, its PID namespace's init (which dies with us)
        if isinstance(process, Forked):  # its parent, and a process that student code must not signal either
            pids, pgids, parent = pids + [template.pid], pgids + [template.pid], template.pid
        return process, Pipes(request_fd, reply_fd), {"parent": parent, "protected_pids": pids, "protected_pgids": pgids}

    def _portable(self, workdir: Path) -> tuple[Spawned, Streams, dict]:
        """A worker with no walls, for the portable tier: the grader's own worker.py on its stdin and stdout."""
        try:
            process = Spawned([sys.executable, str(WORKER_SIDE / "worker.py"), "--stdio"], workdir)
        except OSError as exc:
            scratch.remove(self.scratch)
            raise WorkerWontStart(f"the process that runs your code could not be started ({exc})") from None
        return process, Streams(process.proc), {}

    def exchange(self, header: dict, blobs: list[bytes], deadline: Deadline) -> tuple[dict, list[bytes]]:
        try:
            return self.channel.exchange(header, blobs, deadline.at, self.limits.reply_bytes)
        except (wire.WireClosed, BrokenPipeError):
            raise WorkerDied(*self.death_notice()) from None
        except wire.WireTimeout:
            raise CallTimeout(deadline.seconds) from None
        except wire.WireError as exc:
            raise BadReply(f"the worker sent a malformed reply ({exc})") from None

    def death_notice(self) -> tuple[str, bool]:
        """How the worker ended, and whether it exited by itself (with a status) rather than by a signal."""
        code = self.process.exit_code(2.0)
        if code is None:
            return "the worker stopped answering", False
        if code < 0:
            name = signal.Signals(-code).name
            hint = {"SIGXCPU": " (CPU time limit)", "SIGKILL": " (killed, often for memory)", "SIGXFSZ": " (file size limit)"}
            return f"the worker process was killed by {name}{hint.get(name, '')}", False
        return f"the worker process exited with status {code}", True

    def close(self) -> None:
        self.channel.close()
        self.process.close()
        scratch.remove(self.scratch)


class Pipes:
    """The sandbox's channel: a request pipe written and a reply pipe read under the call's deadline (select)."""

    def __init__(self, request_fd: int, reply_fd: int):
        self.request_fd, self.reply_fd = request_fd, reply_fd

    def exchange(self, header: dict, blobs: list[bytes], deadline: float, max_bytes: int) -> tuple[dict, list[bytes]]:
        wire.write_frame(self.request_fd, header, blobs, deadline)
        return wire.read_frame(self.reply_fd, deadline, max_bytes)

    def close(self) -> None:
        for fd in (self.request_fd, self.reply_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class Streams:
    """The portable tier's channel: the worker's stdin and stdout. Windows cannot select() on a pipe, so each
    exchange runs on a thread of its own and the caller waits for it until the deadline; a worker that misses it
    is closed by the caller (Slot), which ends the thread's read too."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def exchange(self, header: dict, blobs: list[bytes], deadline: float, max_bytes: int) -> tuple[dict, list[bytes]]:
        answer: queue.Queue = queue.Queue()

        def talk() -> None:
            try:
                self.proc.stdin.write(wire.pack(header, blobs))
                self.proc.stdin.flush()
                answer.put(wire.read_stream(self.proc.stdout, max_bytes))
            except (OSError, ValueError):  # a closed pipe, or one closed under us
                answer.put(wire.WireClosed("the worker closed the connection"))
            except wire.WireError as exc:
                answer.put(exc)

        threading.Thread(target=talk, daemon=True, name="worker-exchange").start()
        try:
            got = answer.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise wire.WireTimeout("no reply before the time limit") from None
        if isinstance(got, wire.WireError):
            raise got
        return got

    def close(self) -> None:
        pass  # the pipes are the process's: Spawned.close ends both


class Started:
    """A worker started from nothing: `python -I worker.py` in its own session, inside the tier's walls."""

    def __init__(self, command: list[str], workdir: Path, fds: tuple[int, int], in_bwrap: bool):
        self.proc = reaper.start(command, cwd=workdir, env={**worker_env(), "HOME": str(workdir)}, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=fds)
        self.pid = self.proc.pid
        self.depth = 2 if in_bwrap else 0  # generations from the process started to Python (bwrap, its init, Python)
        self.in_bwrap = in_bwrap

    def kill(self) -> None:
        self.proc.kill()

    def exit_code(self, seconds: float) -> int | None:
        """As subprocess reports it (-N: killed by signal N), or None while it still runs after `seconds`."""
        try:
            code = self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if self.in_bwrap and code > 128 else code  # bwrap reports a death by signal N as 128 + N

    def close(self) -> None:
        reaper.stop(self.proc)


class Forked:
    """A worker forked from the template: its child, a process group of its own, reaped by it when we ask."""

    def __init__(self, template: Template, workdir: Path, request_read: int, reply_write: int):
        self.template = template
        self.inner, self.pid = template.fork(workdir, request_read, reply_write)  # its pid as the template sees it, and here
        self.depth = 0
        self.reaped = False

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)  # not reaped before close(), so the pid is still this worker's

    def exit_code(self, seconds: float) -> int | None:
        status = None if self.reaped else self.template.wait(self.inner, seconds)
        if status is None:
            return None
        self.reaped = True
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        if not self.reaped:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.exit_code(2.0)


class Spawned:
    """A worker of the portable tier: a plain child process with no session, limits or walls of its own (what each
    OS offers alike), in the student's own environment with one thread for torch as in the sandbox."""

    depth = 0

    def __init__(self, argv: list[str], workdir: Path):
        self.proc = subprocess.Popen(argv, cwd=workdir, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid

    def kill(self) -> None:
        self.proc.kill()

    def exit_code(self, seconds: float) -> int | None:
        try:
            return self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


def _chown_tree(top: Path, uid: int) -> None:
    os.chown(top, uid, uid)
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)

