"""The worker: the one process that imports and runs a submission.

Started by `process.py` as `python -I worker.py REQUEST_FD REPLY_FD` with an
empty environment, in a scratch folder holding a copy of the submission. It
limits itself before any student code runs, then answers requests until its
request pipe closes. Everything it sends is untrusted by the parent.
"""
from __future__ import annotations

import importlib
import os
import resource
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guard  # noqa: E402  (-I keeps this folder off sys.path; it is removed again below)
import wire  # noqa: E402

del sys.path[0]

SUBMISSION_DIR = os.getcwd()


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


class Objects:
    """Objects that stay in the worker; the parent refers to them by handle."""

    def __init__(self):
        self.by_id: dict[int, object] = {}
        self.ids: dict[int, int] = {}  # id(obj) -> handle, so one object keeps one handle

    def handle(self, obj) -> dict:
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.by_id) + 1
            self.by_id[self.ids[key]] = obj
        return {"__handle__": [self.ids[key], type(obj).__qualname__]}

    def get(self, handle_id: int):
        if handle_id not in self.by_id:
            raise wire.WireError(f"unknown handle {handle_id}")
        return self.by_id[handle_id]


def build(value):
    """Turn the parent's requests for objects into the objects: an RNG, a spy, or a student attribute."""
    if isinstance(value, wire.Make):
        if value.kind == "spy":
            return guard.Spy(value.arg)
        if value.kind == "torch_generator":
            import torch

            return torch.Generator().manual_seed(value.arg)
        import numpy

        return numpy.random.default_rng(value.arg)
    obj = importlib.import_module(value.base) if isinstance(value.base, str) else value.base
    for name in value.attrs:
        obj = getattr(obj, name)
    return obj


def serve(request: dict, blobs: list[bytes], objects: Objects) -> tuple[dict, list[bytes]]:
    args = wire.decode(request.get("args", []), blobs, objects.get, build)
    op = request.get("op")
    if op == "call":
        fn, args, kwargs = args
        result = fn(*args, **kwargs)
    elif op in ("get", "put"):
        (result,) = args
    else:
        raise wire.WireError(f"unknown op {op!r}")
    out: list[bytes] = []
    if request.get("keep"):
        return {"value": objects.handle(result)}, out
    return {"value": wire.encode(result, out, objects.handle)}, out


def describe_error(exc: BaseException) -> dict:
    frames = [
        f"{os.path.basename(f.filename)}, line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename.startswith(SUBMISSION_DIR + os.sep)
    ]
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "frames": frames[-8:]}


def main() -> None:
    request_fd, reply_fd = int(sys.argv[1]), int(sys.argv[2])
    hello, _ = wire.read_frame(request_fd)
    apply_limits(hello["limits"])
    forbidden = guard.Guard(SUBMISSION_DIR, hello["forbidden_modules"], hello["forbidden_calls"])
    sys.path.insert(0, SUBMISSION_DIR)
    objects = Objects()
    wire.write_frame(reply_fd, {"ready": True}, [])
    while True:
        try:
            request, blobs = wire.read_frame(request_fd)
        except wire.WireClosed:
            return
        try:
            reply, out = serve(request, blobs, objects)
        except BaseException as exc:  # student code may raise anything, SystemExit included
            reply, out = {"error": describe_error(exc)}, []
        reply["violations"] = forbidden.violations
        sys.stdout.flush()
        sys.stderr.flush()
        wire.write_frame(reply_fd, reply, out)


if __name__ == "__main__":
    main()
