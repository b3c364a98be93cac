"""The parent's side of the boundary: start a worker, talk to it, kill it.

A worker is a fresh `python -I` process in a scratch copy of the submission,
with an empty environment, its own session (so the whole group can be killed),
resource limits it applies before importing student code, and stdout/stderr
drained and discarded. A request that times out, or a worker that dies,
poisons only that worker: the caller drops it and the next case starts another.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import wire

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
STARTUP_SECONDS = 60.0


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 600
    memory_bytes: int = 4 << 30
    file_bytes: int = 16 << 20
    open_files: int = 256
    reply_bytes: int = 256 << 20


class WorkerFailure(Exception):
    """The call produced no usable answer; the worker must be replaced."""


class WorkerDied(WorkerFailure):
    pass


class CallTimeout(WorkerFailure):
    pass


class BadReply(WorkerFailure):
    pass


class StudentRaised(Exception):
    """Student code raised; the worker itself is fine."""

    def __init__(self, type_name: str, message: str, frames: list[str]):
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message, self.frames = type_name, message, frames


def discard_output(stream) -> None:
    """Read the worker's stdout/stderr to the end so a flood never blocks it; nothing it prints counts."""
    while stream.read1(1 << 16):
        pass


class Worker:
    """One running worker process holding one submission."""

    def __init__(self, submission_dir: Path, forbidden_modules: list[str], forbidden_calls: list[str], limits: Limits):
        self.limits = limits
        self.scratch = Path(tempfile.mkdtemp(prefix="autograder-worker-"))
        workdir = self.scratch / "submission"
        shutil.copytree(submission_dir, workdir)
        request_read, self.request_fd = os.pipe()
        self.reply_fd, reply_write = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(WORKER_SCRIPT), str(request_read), str(reply_write)],
            cwd=workdir,
            env={"HOME": str(workdir), "OMP_NUM_THREADS": "1", "LC_ALL": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(request_read, reply_write),
            start_new_session=True,
        )
        os.close(request_read)
        os.close(reply_write)
        self.drainer = threading.Thread(target=discard_output, args=(self.proc.stdout,), daemon=True)
        self.drainer.start()
        hello = {"limits": asdict(limits), "forbidden_modules": forbidden_modules, "forbidden_calls": forbidden_calls}
        self.exchange(hello, [], time.monotonic() + STARTUP_SECONDS)

    def exchange(self, header: dict, blobs: list[bytes], deadline: float) -> tuple[dict, list[bytes]]:
        try:
            wire.write_frame(self.request_fd, header, blobs)
            reply, reply_blobs = wire.read_frame(self.reply_fd, deadline, self.limits.reply_bytes)
        except (wire.WireClosed, BrokenPipeError):
            raise WorkerDied(self.death_notice()) from None
        except wire.WireTimeout:
            raise CallTimeout("did not finish within the time limit") from None
        except wire.WireError as exc:
            raise BadReply(f"the worker sent a malformed reply ({exc})") from None
        return reply, reply_blobs

    def death_notice(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "the worker stopped answering"
        if code < 0:
            name = signal.Signals(-code).name
            hint = {"SIGXCPU": " (CPU time limit)", "SIGKILL": " (killed, often for memory)", "SIGXFSZ": " (file size limit)"}
            return f"the worker process was killed by {name}{hint.get(name, '')}"
        return f"the worker process exited with status {code} (sys.exit or os._exit in student code?)"

    def close(self) -> None:
        for fd in (self.request_fd, self.reply_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.drainer.join(timeout=5)
        shutil.rmtree(self.scratch, ignore_errors=True)
