"""Inside the worker: refuse the built-ins a component forbids, and record who tried.

Installed before the submission is imported, so an alias the student binds at
import time (`from torch.nn import LSTM`) already holds the stand-in. A
forbidden call is replaced wherever a loaded module holds that same object
(`torch.nn.LSTM` is also `torch.nn.modules.rnn.LSTM`; `torch._VF.lstm` is also
`torch.lstm`), so attribute access, `getattr` with a built string and aliases
all reach the stand-in. The parent also scans the source (forbidden.py).
"""
from __future__ import annotations

import importlib
import importlib.abc
import os
import sys


class Forbidden(Exception):
    """Raised in student code that reaches a forbidden built-in."""


class Guard(importlib.abc.MetaPathFinder):
    def __init__(self, submission_dir: str, modules: list[str], calls: list[str]):
        self.submission_dir = submission_dir + os.sep
        self.modules = modules
        self.violations: list[str] = []
        self.stand_ins: dict[str, object] = {}
        sys.meta_path.insert(0, self)
        for dotted in calls:
            self._replace(dotted)

    # ---- modules -------------------------------------------------------------

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == m or fullname.startswith(m + ".") for m in self.modules):
            self._record(f"import of {fullname}", sys._getframe(1))
            raise ImportError(f"{fullname} may not be used in this component")
        return None

    # ---- calls ---------------------------------------------------------------

    def _replace(self, dotted: str) -> None:
        owner_name, name = dotted.rsplit(".", 1)
        stand_in = replace_everywhere(dotted, lambda original: self._stand_in(dotted, original))
        self.stand_ins[dotted] = stand_in
        for namespace_owner, attr in _READ_ONLY_NAMESPACES.get(owner_name, ()):
            _blocked_names(resolve(namespace_owner), attr)[name] = stand_in
        if "torch" in sys.modules and hasattr(resolve("torch.ops.aten"), name):
            _refuse_calls(getattr(resolve("torch.ops.aten"), name), stand_in)

    def tampered(self) -> str | None:
        """What student code undid of the guard, if anything: it is no longer first to see imports,
        or a forbidden name holds something other than its stand-in again."""
        if not sys.meta_path or sys.meta_path[0] is not self:
            return "the grader's import guard was removed"
        for dotted, stand_in in self.stand_ins.items():
            owner_name, name = dotted.rsplit(".", 1)
            if getattr(resolve(owner_name), name, None) is not stand_in:
                return f"{dotted} was put back after the grader replaced it"
        return None

    def _stand_in(self, dotted: str, original):
        guard = self

        def refuse(*args, **kwargs):
            guard._record(f"call of {dotted}", sys._getframe(1))
            raise Forbidden(f"{dotted} may not be used in this component")

        if isinstance(original, type):  # a class: refuse instances and subclasses alike
            return type(original.__name__, (), {
                "__new__": lambda cls, *a, **k: refuse(),
                "__init_subclass__": classmethod(lambda cls, **k: refuse()),
            })
        return refuse

    def _record(self, what: str, frame) -> None:
        while frame is not None and not frame.f_code.co_filename.startswith(self.submission_dir):
            frame = frame.f_back
        where = f" ({os.path.basename(frame.f_code.co_filename)}, line {frame.f_lineno})" if frame else ""
        self.violations.append(what + where)


class Spy:
    """Records the first argument of every call to a function (e.g. the probabilities passed to
    torch.multinomial), then calls it; installed like a stand-in, so aliases are spied on too."""

    def __init__(self, dotted: str):
        self.calls: list = []
        replace_everywhere(dotted, self._wrap)

    def _wrap(self, original):
        def spied(*args, **kwargs):
            first = args[0] if args else kwargs.get("input")
            self.calls.append(first.detach().clone() if hasattr(first, "detach") else first)
            return original(*args, **kwargs)

        return spied


def _refuse_calls(packet, refuse) -> None:
    """The dispatcher's entry for a kernel (torch.ops.aten.lstm_cell) and its overloads (.default, ...)
    refuse calls, but stay the objects torch's own modules use as keys when they register rules."""
    for op in (packet, *(getattr(packet, name) for name in packet.overloads())):
        op.__class__ = type(type(op).__name__, (type(op),), {"__slots__": (), "__call__": lambda self, *a, **k: refuse(*a, **k)})


def replace_everywhere(dotted: str, make_replacement):
    """Swap the object at `dotted` for make_replacement(object) wherever a loaded module holds it."""
    owner_name, name = dotted.rsplit(".", 1)
    owner = resolve(owner_name)
    original = getattr(owner, name)
    replacement = make_replacement(original)
    for module in list(sys.modules.values()):
        for key, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:
                setattr(module, key, replacement)
    setattr(owner, name, replacement)
    return replacement


# torch._VF's kernels also live on read-only C namespaces (an instance and its
# class); each is swapped for a delegating shadow, which torch._VF itself also reads through.
_READ_ONLY_NAMESPACES = {"torch._VF": (("torch._C", "_VariableFunctions"), ("torch._C", "_VariableFunctionsClass"), ("torch._VF", "vf"))}
_SHADOWS: dict[int, dict] = {}  # id(shadow) -> its blocked names; kept here, not on the shadow, so the shadow hands out nothing


def _blocked_names(owner, attr: str) -> dict:
    """The blocked names of the shadow standing in for owner.attr, putting one there first.

    The shadow holds the real namespace only in a closure: an attribute would be a way back to the kernels."""
    current = getattr(owner, attr)
    if id(current) in _SHADOWS:
        return _SHADOWS[id(current)]
    blocked: dict = {}

    class Shadow:
        __slots__ = ()

        def __getattr__(self, name):
            return blocked[name] if name in blocked else getattr(current, name)

        def __dir__(self):
            return dir(current)

    shadow = Shadow()
    _SHADOWS[id(shadow)] = blocked
    setattr(owner, attr, shadow)
    return blocked


def resolve(dotted: str):
    """The object at a dotted path: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)
