"""The grader's side of the template (sandbox/worker/template.py): one process per graded submission that imports
numpy and torch once, inside the tier's walls, and forks the submission's workers from there.

Every worker of a submission used to import torch itself (about a second of CPU each, eight times a grade, more
when cases restart crashed workers); a fork of the template costs milliseconds. It also imports what torch imports
on first use (a first backward, an optimiser's first construction: process.template_modules). The template is
trusted: no student code ever runs in it, and it never holds anything a student may not see (no solutions, secret
or expected value): what a forked worker inherits is numpy, torch and the worker's own code. Workers forked from
it share its mounts and PID namespace (bubblewrap), so one template serves one submission only. A component that
forbids numpy or torch gets a worker started from nothing instead (process.py), as does every worker once the
template is gone.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

from . import reaper, scratch
from .tiers import Tier

MESSAGE_BYTES = 1 << 16
REPLY_SECONDS = 60.0  # the first reply waits for the imports; each later one for a fork or a reap


class TemplateGone(Exception):
    """The template cannot fork (it died, or never started): start the worker from nothing."""


class Template:
    """A template process, started at once; `ready` (or the first `fork`) has it import and waits for it, so that the
    grader can hold its imports, as any start, to a time when no timing case runs (floor.Floor)."""

    def __init__(self, tier: Tier, modules: tuple[str, ...], worker_side: Path, files: tuple[str, ...], env: dict):
        # Workers' scratch folders are made in here, each its uid's alone; the folder itself only lets them through.
        self.modules = modules
        self.root = scratch.make("worker-template")
        os.chmod(self.root, 0o711)
        runtime = self.root / "runtime"
        runtime.mkdir()
        for name in files:
            shutil.copy(worker_side / name, runtime / name)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control.settimeout(REPLY_SECONDS)
        argv = [sys.executable, "-I", str(runtime / "template.py"), str(theirs.fileno())]
        try:
            self.proc = reaper.start(tier.command(argv, self.root, self.root), cwd=self.root, env={**env, "HOME": str(self.root)},
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     pass_fds=(theirs.fileno(),))
        except OSError:  # nothing started: nothing of it is left behind
            self.control.close()
            scratch.remove(self.root)
            raise
        finally:
            theirs.close()
        self.lock = threading.Lock()  # one request and its reply at a time
        self.pid: int | None = None  # its own pid as its workers see it, once it is ready
        self.gone = False
        self.hello = {"preload": list(modules), "parent": None if tier.bwrap else os.getpid()}
        self.greeted = False  # the hello sent: the template is importing, or has

    def fork(self, workdir: Path, request_read: int, reply_write: int) -> tuple[int, int]:
        """A worker serving these pipes from `workdir`: (its pid as the template sees it, its pid here)."""
        with self.lock:
            self._ready()
            reply, fds = self._ask({"op": "fork", "workdir": str(workdir)}, [request_read, reply_write])
            if len(fds) != 1 or type(reply.get("pid")) is not int:
                for fd in fds:
                    os.close(fd)
                raise self._lost()
        try:
            return reply["pid"], _pid_of(fds[0])
        finally:
            os.close(fds[0])

    def wait(self, pid: int, seconds: float) -> int | None:
        """Reap a forked worker that is dead or dies within `seconds`: its wait status, or None."""
        with self.lock:
            if self.gone:
                return None
            try:
                reply, _ = self._ask({"op": "wait", "pid": pid, "seconds": seconds}, [])
            except TemplateGone:
                return None
        return reply.get("status")

    def close(self) -> None:
        """End the template and, with it, every worker it forked that still runs."""
        self.gone = True
        self.control.close()
        reaper.stop(self.proc)
        scratch.remove(self.root)

    def ready(self) -> None:
        """Have the template import, and wait until it has (TemplateGone if it cannot)."""
        with self.lock:
            self._ready()

    def begin(self) -> None:
        """Have the template import, without waiting: for a caller that knows no timing case runs yet (a check
        before its grade), so that the template imports while the grader does (TemplateGone if it cannot)."""
        with self.lock:
            self._greet()

    def _greet(self) -> None:
        if not self.greeted and not self.gone:
            self._send(self.hello)
            self.greeted = True

    def _ready(self) -> None:
        if self.pid is None and not self.gone:
            self._greet()
            reply, _ = self._receive()
            if type(reply.get("pid")) is not int:
                raise self._lost()
            self.pid = reply["pid"]
        if self.gone:
            raise TemplateGone()

    def _ask(self, request: dict, fds: list[int]) -> tuple[dict, list[int]]:
        self._send(request, fds)
        return self._receive()

    def _send(self, message: dict, fds: list[int] = ()) -> None:
        try:
            socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))
        except OSError:
            raise self._lost() from None

    def _receive(self) -> tuple[dict, list[int]]:
        try:
            message, fds, _, _ = socket.recv_fds(self.control, MESSAGE_BYTES, 1)
            if not message:
                raise self._lost()
            return json.loads(message), fds
        except (OSError, ValueError):
            raise self._lost() from None

    def _lost(self) -> TemplateGone:
        self.gone = True
        return TemplateGone()


def _pid_of(pidfd: int) -> int:
    """The pid, in this process's PID namespace, of the process a pidfd refers to."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        return int(next(line for line in f if line.startswith("Pid:")).split()[1])
