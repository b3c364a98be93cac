"""Judging: compare what the student returned with what the reference expects.

Every comparison checks type, then shape, then dtype, then the NaN/Inf
pattern, then values, and stops at the first difference with a message that
says what was expected in words, what came back, and (when the wrong value
matches a known mistake) the likely mistake. For cases that are not visible,
messages never contain expected values or errors from which they could be
recovered: only where and how much of the output is off.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .sandbox.remote import Remote

Hints = Mapping[str, Callable[[], object]]  # "likely mistake" -> lazily computed wrong answer


class CaseFailed(Exception):
    """The student's answer is wrong; the message is the feedback."""


def type_name(value) -> str:
    if isinstance(value, Remote):
        return f"an object that cannot be sent back as data ({value!r})"
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if _is_tensor(value):
        return f"a torch tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"a {type(value).__name__}"


def _is_tensor(value) -> bool:
    # Only the parent builds values from the wire, so an exact type check is trustworthy.
    import torch

    return type(value) is torch.Tensor


def as_number(got, what: str) -> float:
    """Accept a Python or NumPy real number (or a 0-d array); anything else fails."""
    if type(got) in (int, float) or (isinstance(got, np.generic) and np.isrealobj(got) and got.dtype.kind in "iuf"):
        return float(got)
    if isinstance(got, np.ndarray) and got.shape == () and got.dtype.kind in "iuf":
        return float(got)
    raise CaseFailed(f"{what}: expected a real number, got {type_name(got)}.")


def expect_number(got, want: float, what: str, *, rtol: float, atol: float, visible: bool, hints: Hints | None = None) -> None:
    value = as_number(got, what)
    if _same_number(value, want, rtol, atol):
        return
    if visible:
        message = f"{what}: expected {want:.10g}, got {value:.10g}."
    elif np.isfinite(want) != np.isfinite(value):
        message = f"{what}: expected a {'finite' if np.isfinite(want) else 'non-finite'} number, got {value:.10g}."
    else:
        message = f"{what}: the value differs from the reference (rtol {rtol:g}, atol {atol:g})."
    raise CaseFailed(message + _likely(value, hints, rtol, atol))


def _same_number(a: float, b: float, rtol: float, atol: float) -> bool:
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) and np.isnan(b))
    if np.isinf(a) or np.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


def expect_array(got, want, what: str, *, rtol: float, atol: float, visible: bool, hints: Hints | None = None) -> None:
    """`want` is a numpy array or a torch tensor; `got` must be the same kind."""
    kind = "torch tensor" if _is_tensor(want) else "numpy array"
    if (kind == "torch tensor") != _is_tensor(got) or (kind == "numpy array" and type(got) is not np.ndarray):
        raise CaseFailed(f"{what}: expected a {kind}, got {type_name(got)}.")
    want_shape, got_shape = tuple(want.shape), tuple(got.shape)
    if got_shape != want_shape:
        raise CaseFailed(f"{what}: expected shape {want_shape}, got {got_shape}." + _likely(got, hints, rtol, atol))
    if got.dtype != want.dtype:
        raise CaseFailed(f"{what}: expected dtype {want.dtype} (the dtype must follow the inputs), got {got.dtype}.")
    g, w = _numpy(got), _numpy(want)
    if g.dtype.kind == "b" or w.dtype.kind in "iub":
        _compare_exact(g, w, what, visible, hints)
        return
    _compare_floats(g, w, what, rtol, atol, visible, hints)


def _numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if _is_tensor(x) else x


def _compare_exact(g: np.ndarray, w: np.ndarray, what: str, visible: bool, hints: Hints | None) -> None:
    off = g != w
    if off.any():
        first = _index(np.argwhere(off)[0])
        raise CaseFailed(f"{what}: {int(off.sum())} of {off.size} entries differ from the reference, the first at {first}."
                         + _likely(g, hints, 0, 0))


def _compare_floats(g, w, what, rtol, atol, visible, hints) -> None:
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    bad_pattern = (np.isnan(g64) != np.isnan(w64)) | (np.isinf(g64) != np.isinf(w64))
    if bad_pattern.any():
        first = _index(np.argwhere(bad_pattern)[0])
        nonfinite = int((~np.isfinite(g64)).sum())
        raise CaseFailed(
            f"{what}: {nonfinite} entries are NaN or Inf where the reference has "
            f"{int((~np.isfinite(w64)).sum())}; the first mismatch is at {first}. "
            "Overflow in exp, or a 0 * inf, usually causes this." + _likely(g, hints, rtol, atol)
        )
    # The pattern matched, so where the reference is finite the answer is too;
    # where the reference is infinite only the sign can still be wrong.
    finite = np.isfinite(w64)
    err = np.abs(np.where(finite, g64 - w64, 0.0))
    off = np.where(finite, err > atol + rtol * np.abs(np.where(finite, w64, 0.0)), np.isinf(w64) & (g64 != w64))
    if not off.any():
        return
    share = f"{int(off.sum())} of {off.size} elements ({100 * off.mean():.0f}%) are off (rtol {rtol:g}, atol {atol:g})"
    if visible:
        worst = np.unravel_index(int(np.argmax(err)), err.shape)
        rel = f", relative error {err[worst] / abs(w64[worst]):.3g}" if w64[worst] else ""
        detail = (f"largest absolute error {err[worst]:.3g} at {_index(worst)} "
                  f"(expected {w64[worst]:.6g}, got {g64[worst]:.6g}{rel}); {share}")
    else:
        detail = f"{share}; the first is at {_index(np.argwhere(off)[0])}"
    raise CaseFailed(f"{what}: values differ from the reference: {detail}." + _likely(g, hints, rtol, atol))


def _index(idx) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]" if len(idx) else "[] (a scalar)"


def expect_equal(got, want, what: str, *, visible: bool, hints: Hints | None = None) -> None:
    """Exact comparison for counts, token lists, vocabularies (a list and a tuple compare equal)."""
    for kind in (Mapping, (list, tuple), (set, frozenset)):
        if isinstance(want, kind) and not isinstance(got, kind):
            raise CaseFailed(f"{what}: expected a {type(want).__name__}, got {type_name(got)}.")
    if _equal(got, want):
        return
    if isinstance(want, Mapping):
        detail = _mapping_difference(got, want, visible)
    elif visible:
        detail = f"expected {_short(want)}, got {_short(got)}"
    else:
        detail = "the result differs from the reference"
    raise CaseFailed(f"{what}: {detail}." + _likely(got, hints, 0, 0))


def _equal(a, b) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (set, frozenset)) and isinstance(b, (set, frozenset)):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    return _is_real(a) and _is_real(b) and a == b


def _is_real(x) -> bool:
    return type(x) in (int, float, bool) or (isinstance(x, np.generic) and x.dtype.kind in "biuf")


def _mapping_difference(got: Mapping, want: Mapping, visible: bool) -> str:
    """Counts of missing, unexpected and wrong keys; examples only where expected values may be shown."""
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    wrong = [k for k in want if k in got and not _equal(got[k], want[k])]

    def example(keys, detail=lambda k: _short(k)) -> str:
        return f" (e.g. {detail(keys[0])})" if visible else ""

    parts = []
    if missing:
        parts.append(f"{len(missing)} keys missing" + example(missing))
    if extra:
        parts.append(f"{len(extra)} unexpected keys" + example(extra))
    if wrong:
        parts.append(f"{len(wrong)} keys with a wrong value" + example(wrong, lambda k: f"{_short(k)}: expected {_short(want[k])}, got {_short(got[k])}"))
    return f"{len(want)} entries expected; " + "; ".join(parts)


def _short(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _likely(got, hints: Hints | None, rtol: float, atol: float) -> str:
    for mistake, wrong_answer in (hints or {}).items():
        if _matches(got, wrong_answer, rtol, atol):
            return f" Likely mistake: {mistake}."
    return ""


def _matches(got, wrong_answer, rtol: float, atol: float) -> bool:
    """A hint that cannot be computed for these inputs simply does not match."""
    try:
        candidate = wrong_answer()
        if isinstance(candidate, (np.ndarray, np.generic, float, int)) or _is_tensor(candidate):
            g, c = np.asarray(_numpy(got), dtype=np.float64), np.asarray(_numpy(candidate), dtype=np.float64)
            return g.shape == c.shape and bool(np.allclose(g, c, rtol=max(rtol, 1e-6), atol=max(atol, 1e-9), equal_nan=True))
        return _equal(got, candidate)
    except Exception:
        return False
