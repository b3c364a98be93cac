"""Floor's rule between the processes of one machine (a batch's jobs), with flock(2): POSIX only."""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path

from .proxy import Slot


class MachineFloor:
    """Floor's rule between processes, with flock(2) on two files: `room` is held shared by every case and
    start, exclusively by a timing case; `turnstile` is held by a timing case from the moment it waits, and
    passed through by everyone else, so that waiting timing cases go first.

    While a lane of this process waits at the turnstile, the process's idle workers stay stopped; a worker
    whose lane holds the room runs: its lane resumes it on the way in, and no waiting lane stops it until it
    is idle again. Otherwise a case could hold the room with its worker stopped, while the timing case that
    stopped it waits for the room."""

    def __init__(self, path: Path, slots: Callable[[], list[Slot]]):
        self.room, self.turnstile, self.slots = path, path.with_name(path.name + ".turnstile"), slots
        self._waiting = 0  # this process's lanes held back by another's timing case
        self._lock = threading.Lock()
        self._paused: dict[Slot, contextlib.ExitStack] = {}
        self._inside: set[Slot] = set()  # slots whose lane holds the room

    @contextlib.contextmanager
    def shared(self, slot: Slot | None):
        with self._held(self.turnstile, fcntl.LOCK_EX, wait=self._wait_paused):
            pass
        with self._held(self.room, fcntl.LOCK_SH), self._running(slot):
            yield

    @contextlib.contextmanager
    def alone(self, own: Slot):
        with self._held(self.turnstile, fcntl.LOCK_EX), self._held(self.room, fcntl.LOCK_EX), self._running(own):
            yield

    @contextlib.contextmanager
    def _held(self, path: Path, mode: int, wait=None):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # a descriptor per hold: flock(2) locks are per open file
        try:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                with wait() if wait else contextlib.nullcontext():
                    fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _running(self, slot: Slot | None):
        """`slot`'s worker runs while its lane holds the room, though other lanes of this process still wait."""
        if slot is None:
            yield
            return
        with self._lock:
            self._inside.add(slot)
            stopped = self._paused.pop(slot, None)
        if stopped:
            stopped.close()
        try:
            yield
        finally:
            with self._lock:
                self._inside.discard(slot)

    @contextlib.contextmanager
    def _wait_paused(self):
        """Another process times: this process's idle workers stop until none of its lanes waits."""
        with self._lock:
            self._waiting += 1
            for slot in self.slots():
                if slot not in self._inside and slot not in self._paused:
                    self._paused[slot] = contextlib.ExitStack()
                    self._paused[slot].enter_context(slot.paused())
        try:
            yield
        finally:
            with self._lock:
                self._waiting -= 1
                stopped = []
                if not self._waiting:
                    stopped, self._paused = list(self._paused.values()), {}
            for stack in stopped:
                stack.close()
