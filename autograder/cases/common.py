"""Helpers shared by the cases: tensor inputs, unpacking results, and what a matrix product that does not fit means."""
from __future__ import annotations

import numpy as np

from ..judge import LIKELY
from ..sandbox.host.process import StudentRaised
from ..tensors import deferred, is_tensor

torch = deferred("torch")



def torch_dtype(name: str):
    """The case's dtype, "float32" or "float64", as torch's."""
    return {"float32": torch.float32, "float64": torch.float64}[name]


def tensor(rng: np.random.Generator, *shape: int, dtype: str, scale: float = 0.5) -> torch.Tensor:
    """A normal random tensor drawn from the case's RNG."""
    return torch.from_numpy(rng.normal(scale=scale, size=shape)).to(torch_dtype(dtype))


def tensors(t, got, what: str, names: tuple[str, ...]) -> tuple:
    """The student's tuple of tensors, or a failure that says what was expected."""
    if not (isinstance(got, tuple | list) and len(got) == len(names) and all(is_tensor(g) for g in got)):
        t.fail(f"{what}: expected a tuple of {len(names)} tensors ({', '.join(names)}), got {type(got).__name__}.")
    return tuple(got)


def call_leaving_inputs(t, fn, args: list, names: tuple[str, ...], what: str):
    """Call `fn` on inputs placed in the worker, then check that the tensor inputs are left as they were."""
    placed = [t.student.put(a) if is_tensor(a, subclasses=True) else a for a in args]
    got = fn(*placed)
    for name, arg, remote in zip(names, args, placed):
        if is_tensor(arg, subclasses=True):
            t.unchanged(t.student.value(remote), arg, f"{what}: the argument {name} afterwards (inputs must not be modified in place)")
    return got


# What numpy and torch say when the two sides of a matrix product do not fit.
MATMUL_MISFITS = ("shapes cannot be multiplied", "mismatch in its core dimension", "not aligned")


def with_layout(t, call, what: str, layout: str):
    """`call()`, the student's function; where it raises for a matrix product whose sides do not fit, the message
    says first how the weights are laid out (`layout`), the usual cause: a formula written for the other layout."""
    try:
        return call()
    except StudentRaised as exc:
        if any(misfit in exc.message for misfit in MATMUL_MISFITS):
            t.fail(f"{what}: {exc.describe()}\n{LIKELY}{layout}")
        raise
