"""torch on first use. Importing it costs about a second, and a command whose cases never touch a tensor (a check of
ngram or backprop) must not pay it: a module of the grader that uses torch binds `torch = deferred("torch")`, which
imports it at the first attribute looked up. No value can be a tensor before torch is imported, so the type tests
here import torch only where it is imported already (or being imported) instead of importing it to answer no."""
from __future__ import annotations

import importlib
import sys

import numpy as np


class _Deferred:
    """Stands for a module until it is used: each attribute is looked up on the module, imported then if need be."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<{self._name}, imported on first use>"


def deferred(name: str):
    return _Deferred(name)


def imported(name: str):
    """The module `name` where it is imported, else None; an import another thread has begun is waited for (the import
    system's lock: a lane may import torch while another judges ngram's answers)."""
    return importlib.import_module(name) if name in sys.modules else None


def is_tensor(value, subclasses: bool = False) -> bool:
    """Whether `value` is a torch tensor: exactly one (the wire builds no subclass), or with `subclasses` a Parameter too."""
    torch = imported("torch")
    if torch is None:
        return False
    return isinstance(value, torch.Tensor) if subclasses else type(value) is torch.Tensor


def is_array(value) -> bool:
    """A numpy array or a torch tensor, exactly."""
    return type(value) is np.ndarray or is_tensor(value)


def is_module(value) -> bool:
    torch = imported("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def is_torch_dtype(value) -> bool:
    torch = imported("torch")
    return torch is not None and isinstance(value, torch.dtype)
