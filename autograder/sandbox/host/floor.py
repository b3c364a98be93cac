"""Who may run while something is timed (Floor): the lanes of one grade, and with a lock file the graders of one
machine (machine_floor.py: a batch's job processes)."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from .proxy import Slot


class Floor:
    """Who may run while something is timed: correctness cases and worker starts share the machine, while a
    timing case runs alone. It waits for every other lane's case or start to end, holds new ones back (a
    waiting timing case goes first) and stops every other student worker still alive, with what it left
    running, until it ends.

    `machine`: a lock file that other graders on this machine share (the job processes of `grade-all`), so
    that a timing case also waits for, and holds back, their cases; a lane held back by another process's
    timing case stops this process's idle student workers while it waits."""

    def __init__(self, machine: Path | None = None):
        self._changed = threading.Condition()
        self._sharing = self._waiting = 0
        self._alone = False
        self._slots: list[Slot] = []
        self._machine = _machine_floor(machine, self._registered) if machine else None

    def register(self, slot: Slot | None) -> None:
        if slot:
            with self._changed:
                self._slots.append(slot)

    @contextlib.contextmanager
    def shared(self, slot: Slot | None = None):
        """A case or start in `slot`'s worker, while no timing case runs."""
        with self._changed:
            self._changed.wait_for(lambda: not self._alone and not self._waiting)
            self._sharing += 1
        try:
            with self._machine.shared(slot) if self._machine else contextlib.nullcontext():
                yield
        finally:
            with self._changed:
                self._sharing -= 1
                self._changed.notify_all()

    @contextlib.contextmanager
    def alone(self, own: Slot):
        with self._changed:
            self._waiting += 1
            self._changed.wait_for(lambda: not self._alone and not self._sharing)
            self._waiting -= 1
            self._alone = True
        try:
            with self._machine.alone(own) if self._machine else contextlib.nullcontext(), contextlib.ExitStack() as paused:
                for slot in self._registered():
                    if slot is not own:
                        paused.enter_context(slot.paused())
                yield
        finally:
            with self._changed:
                self._alone = False
                self._changed.notify_all()

    def _registered(self) -> list[Slot]:
        with self._changed:
            return list(self._slots)


def _machine_floor(path: Path, slots: Callable[[], list[Slot]]):
    """The floor shared with other processes: flock(2), POSIX only, and imported only when asked for (a batch's jobs),
    so that a student's check runs on any OS."""
    from .machine_floor import MachineFloor

    return MachineFloor(path, slots)
