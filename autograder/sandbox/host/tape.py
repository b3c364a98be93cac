"""A case's exchanges with the student's worker, kept so that its check can run again on them without the worker.

A check that failed is run again with a mutant of the reference in the reference's place (mutants/match.py): the
requests it makes are the ones it made (the same inputs, drawn from the same seed), so each is answered with the
reply the worker gave then, decoded and checked again by the Proxy as any reply is. A request the first run did not
make (the mutant led the check elsewhere) ends the replay: `Diverged`, or `Exhausted` past the last one recorded.
"""
from __future__ import annotations

import hashlib
import json


class Diverged(Exception):
    """The check made a request other than the one recorded in its place."""


class Exhausted(Exception):
    """The check went on past the last request recorded (the first run ended there, at its failure)."""


def _key(header: dict, blobs: list[bytes]) -> str:
    digest = hashlib.sha256(json.dumps({k: v for k, v in header.items() if k != "first"}, sort_keys=True, default=str).encode())
    for blob in blobs:
        digest.update(len(blob).to_bytes(8, "little"))
        digest.update(blob)
    return digest.hexdigest()


class Tape:
    """A slot (proxy.Slot) that keeps every request and reply that passes through it; otherwise the slot itself."""

    def __init__(self, slot):
        self.slot = slot
        self.entries: list[tuple[str, tuple[dict, list[bytes]]]] = []

    def exchange(self, header: dict, blobs: list[bytes], deadline):
        reply = self.slot.exchange(header, blobs, deadline)
        self.entries.append((_key(header, blobs), reply))
        return reply

    def __getattr__(self, name: str):
        return getattr(self.slot, name)


class Replayed:
    """A slot that answers each request with the reply recorded for it, in order."""

    staff = False

    def __init__(self, entries: list[tuple[str, tuple[dict, list[bytes]]]]):
        self._entries = iter(entries)

    def exchange(self, header: dict, blobs: list[bytes], deadline):
        key, reply = next(self._entries, (None, None))
        if key is None:
            raise Exhausted
        if key != _key(header, blobs):
            raise Diverged
        return reply

    def stop(self) -> None:
        """A reply that could not be believed stops the worker; a replay has none."""
