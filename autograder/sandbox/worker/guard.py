"""Inside the worker: refuse the built-ins a component forbids, and record who tried.

Installed before the submission is imported, so an alias the student binds at
import time (`from torch.nn import LSTM`) already holds the stand-in. A
forbidden call is replaced wherever a loaded module holds that same object
(`torch.nn.LSTM` is also `torch.nn.modules.rnn.LSTM`), so attribute access,
`getattr` with a built string and aliases all reach the stand-in; a forbidden
Python function, and the methods a forbidden class defines, refuse in place
too, so no other reference to them (a registry, a base class) reaches the
original. A forbidden operator is refused where it runs, whatever reached it
(forbidden_ops.py). The parent also scans the source (forbidden.py), to explain.
"""
from __future__ import annotations

import importlib.abc
import os
import sys
import types

import forbidden_ops
from forbidden_ops import resolve


class Forbidden(Exception):
    """Raised in student code that reaches a forbidden built-in."""


class Guard(importlib.abc.MetaPathFinder):
    def __init__(self, submission_dir: str, modules: list[str], calls: list[str], operators: list[str]):
        self.submission_dir = submission_dir + os.sep
        self.modules = modules
        self.violations: list[str] = []
        self.stand_ins: dict[str, object] = {}  # a forbidden built-in or class -> what now stands in its name
        sys.meta_path.insert(0, self)
        for dotted in calls:
            self._replace(dotted)
        self.registrations = forbidden_ops.refuse(operators, self.refusal)  # kept: dropped, the kernels would come back

    # ---- modules -------------------------------------------------------------

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == m or fullname.startswith(m + ".") for m in self.modules):
            self._record(f"import of {fullname}", sys._getframe(1))
            raise ImportError(f"{fullname} may not be used in this component")
        return None

    # ---- calls ---------------------------------------------------------------

    def _replace(self, dotted: str) -> None:
        original = resolve(dotted)
        refuse = self.refusal(f"call of {dotted}")
        for fn in [original] if isinstance(original, types.FunctionType) else _own_methods(original):
            fn.__code__ = forbidden_ops.refusing_code(fn, refuse)
        if not isinstance(original, types.FunctionType):  # a built-in, which has no code, or a class
            self.stand_ins[dotted] = replace_everywhere(dotted, lambda original: self._stand_in(original, refuse))

    def report(self) -> list[str]:
        """What was refused since the last report, each with the student's line, and what student code undid of the guard:
        the reply to each request says what that request did, so a case's message is about its own code."""
        refused, self.violations = self.violations, []
        tampered = self.tampered()
        return refused + ([tampered] if tampered else [])

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

    def refusal(self, what: str):
        """What runs in place of `what` (a forbidden call, or what reaches a forbidden operator): it records the
        student's line that led there, and raises."""
        guard = self

        def refuse(*args, **kwargs):
            guard._record(what, sys._getframe(1))
            raise Forbidden(f"{what} may not be used in this component")

        return refuse

    @staticmethod
    def _stand_in(original, refuse):
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


def _own_methods(cls) -> list[types.FunctionType]:
    """The Python functions a class defines itself (its methods, properties' getters aside)."""
    return [fn for fn in vars(cls).values() if isinstance(fn, types.FunctionType)] if isinstance(cls, type) else []
