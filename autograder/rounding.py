"""Expected values of low-precision cases: the exact answer, and how far rounding may take a correct one.

A float32 answer is right when it is as close to the exact answer as float32 arithmetic allows, in
whatever order its operations ran (fused gates, hoisted projections, a log-sum-exp softmax, float64
inside). The reference's own float32 result is just one such answer, so it is never the target:
`rounded(compute, *inputs)` runs the reference on float64 copies of the inputs (float32 values are
exact in float64) for the truth, and measures on this very instance how much error float32 brings:
- the reference's own float32 error (what one correct order of operations lost), and
- how far the float64 result moves when every element of every input is nudged by up to one rounding
  of its tensor's largest magnitude (the computation's conditioning: intermediate values the size of
  the inputs, such as m + log(sum(exp(z - m))) in a softmax, carry that error in any order of operations).
The allowed error of each output is SAFETY times the larger of the two, plus FLOOR roundings of the
output's largest magnitude. Known mistakes change outputs by orders of magnitude more (`autograder
verify` shows each caught). The model assumes a smooth computation: no argmax or sampling inside.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from .tensors import deferred, is_module, is_tensor, is_torch_dtype

torch = deferred("torch")

SAFETY = 32.0  # correct reorderings were measured at up to 6x the larger estimate (tests/test_rounding.py)
FLOOR = 16.0  # roundings of the output's largest magnitude, for outputs the estimates happen to find exact
NUDGES = 2  # random nudges of the inputs


@dataclass(frozen=True)
class Rounded:
    """An expected floating-point value of a low-precision case."""

    truth: object  # the exact answer: a float64 tensor or array, or a float
    dtype: str | None  # the dtype the answer must have ("float32"); None for a plain number
    bound: float  # the largest absolute error a correct answer in that dtype may have, per element


def rounded(compute, *inputs):
    """compute(*inputs) for a check: unchanged when every floating input is float64; otherwise the same
    structure with each floating result a `Rounded`. `compute` may itself be a module, and modules
    among the inputs are copied and converted with the tensors (their weights are inputs too)."""
    eps = _roundoff(compute, inputs)
    if eps is None:
        return compute(*inputs)
    args = (compute, *inputs)
    truth = _call(_cast(args, {}, wide=True))
    own = _call(_cast(args, {}, wide=False))
    nudged = [_call(_cast(args, {}, wide=True, nudge=(np.random.default_rng(i), eps))) for i in range(NUDGES)]
    return _combine(truth, [own, *nudged], eps)


def unit_roundoff(dtype) -> float:
    """Half the gap between 1 and the next number: the largest relative error of one rounding."""
    return float(torch.finfo(dtype).eps if is_torch_dtype(dtype) else np.finfo(dtype).eps) / 2


def _call(args):
    compute, *inputs = args
    return compute(*inputs)


def _roundoff(compute, inputs) -> float | None:
    """The unit roundoff of the least precise floating input, or None when all are float64."""
    dtypes = set()
    _floats((compute, inputs), dtypes.add)
    widest = max((unit_roundoff(d) for d in dtypes), default=0.0)
    return widest if widest > unit_roundoff(np.float64) else None


def _floats(value, found) -> None:
    if is_module(value):
        for p in value.parameters():
            found(p.dtype)
    elif is_tensor(value, subclasses=True) and value.is_floating_point():
        found(value.dtype)
    elif isinstance(value, np.ndarray) and value.dtype.kind == "f":
        found(value.dtype)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _floats(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _floats(v, found)


def _cast(value, memo: dict, *, wide: bool, nudge=None):
    """A copy of `value` with its floating tensors, arrays and modules in float64 (`wide`) or as they are,
    each element times (1 + r * eps) for r uniform in [-1, 1] when nudged. Other values pass as they are."""
    if is_module(value):
        if id(value) not in memo:
            module = copy.deepcopy(value).to(torch.float64) if wide else copy.deepcopy(value)
            with torch.no_grad():
                for p in module.parameters():
                    p.grad = None
                    if nudge:
                        p.add_(torch.from_numpy(_jitter(nudge, p.detach().numpy())).to(p))
            memo[id(value)] = module
        return memo[id(value)]
    if is_tensor(value, subclasses=True) and value.is_floating_point():
        return _tensor(value.detach(), wide, nudge).requires_grad_(value.requires_grad)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        array = value.astype(np.float64 if wide else value.dtype)
        return array + _jitter(nudge, array) if nudge else array
    if isinstance(value, (tuple, list)):
        return type(value)(_cast(v, memo, wide=wide, nudge=nudge) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, memo, wide=wide, nudge=nudge) for k, v in value.items()}
    return value


def _tensor(t: torch.Tensor, wide: bool, nudge) -> torch.Tensor:
    t = t.to(torch.float64, copy=True) if wide else t.clone()
    return t.add_(torch.from_numpy(_jitter(nudge, t.numpy())).to(t)) if nudge else t


def _jitter(nudge, values: np.ndarray) -> np.ndarray:
    """One rounding of the tensor's largest magnitude, up or down, drawn for each element."""
    rng, eps = nudge
    top = float(np.abs(values[np.isfinite(values)]).max(initial=0.0))
    return rng.uniform(-eps * top, eps * top, size=values.shape)


def _combine(truth, others: list, eps: float):
    """`truth`'s structure, each floating leaf a Rounded whose bound comes from the other runs' errors."""
    if isinstance(truth, (tuple, list)):
        return type(truth)(_combine(v, [o[i] for o in others], eps) for i, v in enumerate(truth))
    if isinstance(truth, dict):
        return {k: _combine(v, [o[k] for o in others], eps) for k, v in truth.items()}
    if is_tensor(truth, subclasses=True) and truth.is_floating_point():
        return Rounded(truth.detach(), str(others[0].dtype).removeprefix("torch."), _bound(truth.detach().numpy(), others, eps))
    if isinstance(truth, np.ndarray) and truth.dtype.kind == "f":
        return Rounded(truth, str(others[0].dtype), _bound(truth, others, eps))
    if isinstance(truth, (float, np.floating)):
        return Rounded(float(truth), None, _bound(np.float64(truth), others, eps))
    return truth


def _bound(truth: np.ndarray, others: list, eps: float) -> float:
    exact = np.asarray(truth, dtype=np.float64)
    finite = np.isfinite(exact)
    scale = float(np.abs(exact[finite]).max(initial=0.0))
    noise = 0.0
    for other in others:
        values = np.asarray(other.detach().numpy() if is_tensor(other, subclasses=True) else other, dtype=np.float64)
        if not np.isfinite(values[finite]).all():
            raise ArithmeticError("the reference is not finite in low precision where the exact answer is")
        noise = max(noise, float(np.abs(values - exact)[finite].max(initial=0.0)))
    return SAFETY * noise + FLOOR * eps * scale


def exact(value):
    """The exact answer of a Rounded value, for hints built from it; any other value is its own."""
    return value.truth if isinstance(value, Rounded) else value
