"""Helpers shared by the cases of the torch components: inputs, and unpacking results."""
from __future__ import annotations

import numpy as np
import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def tensor(rng: np.random.Generator, *shape: int, dtype: str, scale: float = 0.5) -> torch.Tensor:
    """A normal random tensor drawn from the case's RNG."""
    return torch.from_numpy(rng.normal(scale=scale, size=shape)).to(DTYPES[dtype])


def tensors(t, got, what: str, names: tuple[str, ...]) -> tuple:
    """The student's tuple of tensors, or a failure that says what was expected."""
    if not (isinstance(got, tuple | list) and len(got) == len(names) and all(type(g) is torch.Tensor for g in got)):
        t.fail(f"{what}: expected a tuple of {len(names)} tensors ({', '.join(names)}), got {type(got).__name__}.")
    return tuple(got)
