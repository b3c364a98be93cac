"""Judging: compare what the student returned with what the reference expects.

Every comparison checks type, then shape, then dtype, then the NaN/Inf
pattern, then values, and stops at the first difference with a message that
says what was expected in words, what came back, and (when the wrong value
of a known mistake explains every element) the likely mistake. Values are
within the case's rtol and atol of a float64 expected value, or within the
bound of a low-precision case's error model (rounding.py); the element shown
is the worst relative to what it is allowed. For cases that are not visible,
messages never contain expected values or errors from which they could be
recovered: only where and how much of the output is off. When no hint of the case explains a difference,
the general diagnostics of diagnose.py may (a ratio, a clamp, a shift, a transpose, items left out), or else
say where along an axis the error enters. Several outputs of one call are judged together (expect_each), so
that the message says which of them match.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from . import diagnose
from .outcome import Ended
from .rounding import Rounded
from .sandbox.host.proxy import Remote
from .sandbox.worker.wire import Handle
from .tensors import is_tensor

Candidates = Mapping[str, Callable[[], object]]  # a likely mistake -> its wrong answer, computed only when asked
LOW_PRECISION = ("float16", "bfloat16", "float32")
LIKELY = diagnose.LIKELY
Sizes = Mapping[str, int]  # a size of the case's inputs, named as a student knows it ("T - 1, the number of predicted positions") -> its value


class CaseFailed(Ended):
    """The student's answer is wrong; the message is the feedback."""

    kind = "wrong"


KEPT = ("The grader reads back plain values only (exact built-in types, numpy numbers and strings, arrays and tensors of "
        "numbers), as an object of another class could compare equal to anything")


def type_name(value) -> str:
    kept = _kept_name(value)
    if kept is not None:
        return f"an object that cannot be sent back as data: a {kept}. {KEPT}"
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if is_tensor(value):
        return f"a torch tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"a {type(value).__name__}"


def _kept_name(value) -> str | None:
    """The worker's name for an object it kept (a Remote when it is the whole answer, a Handle inside one)."""
    if isinstance(value, Remote):
        value = value._expr.base if not value._expr.attrs else None
    return value.type_name if isinstance(value, Handle) else None


def as_number(got, what: str) -> float:
    """A real number: an int or a float (numpy scalars arrive as these), or a 0-d array or tensor of one."""
    if type(got) in (int, float):
        return float(got)
    if type(got) is np.ndarray and got.shape == () and got.dtype.kind in "iuf":
        return float(got)
    if is_tensor(got) and got.dim() == 0 and not got.is_complex() and _dtype_name(got) != "bool":
        return float(got.detach())
    raise CaseFailed(f"{what}: expected a real number, got {type_name(got)}.")


class Tolerance:
    """How far a floating-point answer may be from the expected value: rtol and atol for a float64 case,
    or the bound of a low-precision case's error model (rounding.Rounded)."""

    def __init__(self, want, rtol: float, atol: float):
        self.rounded = isinstance(want, Rounded)
        self.rtol, self.atol = (0.0, want.bound) if self.rounded else (rtol, atol)

    def allowed(self, exact: np.ndarray) -> np.ndarray:
        return self.atol + self.rtol * np.abs(exact)

    def matches(self, got: np.ndarray, candidate: np.ndarray) -> bool:
        """A likely mistake's answer, computed in the case's precision, explains every element of `got`."""
        return bool(np.all(self.close(got, candidate)))

    def close(self, got: np.ndarray, candidate: np.ndarray, scale: float = 1.0) -> np.ndarray:
        """Elementwise `matches`; `scale`: how many times the expected value's size the candidate is (a low-precision
        case's bound grows with it)."""
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is nan (no match) without a warning on the grader's stderr
            if self.rounded:  # both carry rounding
                near = np.abs(got - candidate) <= 2 * self.atol * scale
            else:
                near = np.abs(got - candidate) <= max(self.atol, 1e-9) + max(self.rtol, 1e-6) * np.abs(candidate)
            near &= np.isfinite(candidate)  # |x - inf| <= rtol * inf holds for every finite x: infinity matches only itself
            return near | (got == candidate) | (np.isnan(got) & np.isnan(candidate))

    def __str__(self) -> str:
        return f"allowed error {self.atol:.2g}, what float32 rounding can cost" if self.rounded else f"rtol {self.rtol:g}, atol {self.atol:g}"


def expect_number(got, want, what: str, *, rtol: float, atol: float, visible: bool, hints: Candidates | None = None,
                  dims: Sizes | None = None, nonfinite: str | None = None) -> None:
    """`want`: a float, or a Rounded number of a low-precision case. `dims`: the case's sizes, for the general
    diagnostics to name a ratio by; `nonfinite`: what makes this component's values NaN or Inf, said when the
    answer is finite where the reference is not, or the reverse (None: nothing)."""
    value = as_number(got, what)
    tol = Tolerance(want, rtol, atol)
    exact = want.truth if tol.rounded else want
    if _same_number(value, exact, tol):
        return
    if visible:
        shown, seen = _digits(exact, value)
        message = f"{what}: expected {shown}, got {seen}."
    elif np.isfinite(exact) != np.isfinite(value):
        message = f"{what}: expected a {'finite' if np.isfinite(exact) else 'non-finite'} number, got {value:.10g}."
    else:
        message = f"{what}: the value differs from the reference ({tol})."
    if np.isfinite(exact) != np.isfinite(value):
        message += f" {nonfinite}" if nonfinite else ""
        raise CaseFailed(message + (_likely(value, hints, tol) or diagnose.infinity_clamped(np.array([value]), np.array([exact]), tol)))
    raise CaseFailed(message + (_likely(value, hints, tol) or diagnose.number(value, exact, tol, dims)))


def _same_number(a: float, b: float, tol: Tolerance) -> bool:
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) and np.isnan(b))
    if np.isinf(a) or np.isinf(b):
        return a == b
    return abs(a - b) <= float(tol.allowed(np.float64(b)))


def expect_array(got, want, what: str, *, rtol: float, atol: float, visible: bool, hints: Candidates | None = None,
                 labels: list[str] | None = None, dims: Sizes | None = None, nonfinite: str | None = None) -> None:
    """`want` is a numpy array or a torch tensor, or a Rounded one; `got` must be the same kind. `labels`
    name the entries of a 1-D array (the queries a check asked) in place of their indices. `dims`: the case's
    sizes, for the general diagnostics to name a ratio or an axis by; `nonfinite`: what makes this component's
    values NaN or Inf, said where the NaN/Inf pattern differs (None: diagnose.OVERFLOW where the answer has NaN or
    Inf and the reference is finite)."""
    tol = Tolerance(want, rtol, atol)
    exact = want.truth if tol.rounded else want
    dtype = want.dtype if tol.rounded else _dtype_name(exact)
    if not tol.rounded and _dtype_name(exact) in LOW_PRECISION:
        raise TypeError(f"{what}: a low-precision expected value must come from rounding.rounded(), not the reference's own rounding")
    kind = "torch tensor" if is_tensor(exact) else "numpy array"
    if (kind == "torch tensor") != is_tensor(got) or (kind == "numpy array" and type(got) is not np.ndarray):
        raise CaseFailed(f"{what}: expected a {kind}, got {type_name(got)}.")
    want_shape, got_shape = tuple(exact.shape), tuple(got.shape)
    if got_shape != want_shape:
        raise CaseFailed(f"{what}: expected shape {want_shape}, got {got_shape}."
                         + (_likely(got, hints, tol) or diagnose.shape(got, exact, None if _exact_kind(exact) else tol, visible, dims)))
    if _dtype_name(got) != dtype:
        raise CaseFailed(f"{what}: expected dtype {dtype} (the dtype must follow the inputs), got {_dtype_name(got)}.")
    g, w = _numpy(got), _numpy(exact)
    where = (lambda idx: labels[int(idx[0])]) if labels is not None and g.ndim == 1 and len(labels) == len(g) else _index
    if g.dtype.kind == "b" or _exact_kind(w):
        _compare_exact(g, w, what, where, hints, visible, dims)
        return
    _compare_floats(g, w, what, tol, visible, hints, where, dims, nonfinite)


def expect_identical(got, original, what: str) -> None:
    """Exactly `original`, bit for bit (NaN where it had NaN): for inputs that must be left as they were."""
    if type(got) is not type(original) or tuple(got.shape) != tuple(original.shape) or got.dtype != original.dtype:
        raise CaseFailed(f"{what}: expected {type_name(original)}, got {type_name(got)}.")
    g, o = _numpy(got), _numpy(original)
    changed = ~((g == o) | (np.isnan(g) & np.isnan(o))) if o.dtype.kind in "fc" else g != o
    if changed.any():
        raise CaseFailed(f"{what}: {int(changed.sum())} of {changed.size} entries changed, the first at {_index(np.argwhere(changed)[0])}.")


def _dtype_name(x) -> str:
    return str(x.dtype).removeprefix("torch.")


def _numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if is_tensor(x) else x


def _exact_kind(x) -> bool:
    """Integers and booleans are compared exactly."""
    return _dtype_name(x).startswith(("int", "uint", "bool"))


def _compare_exact(g: np.ndarray, w: np.ndarray, what: str, where, hints: Candidates | None, visible: bool, dims: Sizes | None) -> None:
    off = g != w
    if off.any():
        first = where(np.argwhere(off)[0])
        raise CaseFailed(f"{what}: {int(off.sum())} of {off.size} entries differ from the reference, the first at {first}."
                         + (_likely(g, hints, None) or diagnose.values(g, w, None, dims) or diagnose.rows(g, w, visible)))


def _compare_floats(g, w, what, tol: Tolerance, visible, hints, where, dims: Sizes | None, cause: str | None) -> None:
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    bad_pattern = (np.isnan(g64) != np.isnan(w64)) | (np.isinf(g64) != np.isinf(w64))
    if bad_pattern.any():
        first = where(np.argwhere(bad_pattern)[0])
        nonfinite = int((~np.isfinite(g64)).sum())
        raise CaseFailed(
            f"{what}: {nonfinite} entries are NaN or Inf where the reference has "
            f"{int((~np.isfinite(w64)).sum())}; the first mismatch is at {first}." + diagnose.nonfinite(g64, w64, cause)
            + (_likely(g, hints, tol) or diagnose.infinity_clamped(g64, w64, tol))
        )
    # The pattern matched, so where the reference is finite the answer is too;
    # where the reference is infinite only the sign can still be wrong.
    finite = np.isfinite(w64)
    err = np.zeros_like(w64)
    err[finite] = np.abs(g64[finite] - w64[finite])
    allowed = tol.allowed(np.where(finite, w64, 0.0))
    off = np.where(finite, err > allowed, np.isinf(w64) & (g64 != w64))
    if not off.any():
        return
    share = f"{int(off.sum())} of {off.size} elements ({100 * off.mean():.0f}%) are off ({tol})"
    if visible:
        worst = np.unravel_index(int(np.argmax(np.where(off, err / np.maximum(allowed, 1e-300), 0.0))), err.shape)
        shown, seen = _digits(w64[worst], g64[worst])
        detail = (f"the worst, relative to what is allowed, is at {where(worst)}: expected {shown}, got {seen} "
                  f"(error {err[worst]:.3g}, allowed {allowed[worst]:.3g}); {share}")
    else:
        detail = f"{share}; the first is at {where(np.argwhere(off)[0])}"
    raise CaseFailed(f"{what}: values differ from the reference: {detail}."
                     + (_likely(g, hints, tol) or diagnose.values(g64, w64, tol, dims) or diagnose.error_enters(off, dims)))


def expect_each(parts: Sequence[tuple[str, Callable[[], None]]], of: str) -> None:
    """Several outputs of one call judged as one: each part is (its name, a comparison that raises CaseFailed), and
    every part is judged. If any fails, the case fails with the first failing part's own message and, where some parts
    match and some do not, one sentence naming which, in the order given: where the values first part from the
    reference's. `of` names them all ("the gradients"). Any other exception ends the case as it would have, had the
    parts been judged one after the other: at once, or behind a part that failed before it."""
    first, matching, failing = None, [], []
    for name, judge_part in parts:
        try:
            judge_part()
        except CaseFailed as exc:
            first = first or exc
            failing.append(name)
            continue
        except Exception:
            if first is not None:
                raise first
            raise
        matching.append(name)
    if first is None:
        return
    if matching:
        first.args = (f"{first} Of {of}: {_listed(matching)} {'matches' if len(matching) == 1 else 'match'}; "
                      f"{_listed(failing)} {'does' if len(failing) == 1 else 'do'} not.",)
    raise first


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _digits(expected: float, got: float) -> tuple[str, str]:
    """Both numbers with the fewest significant digits (at least 6) that tell them apart."""
    for digits in range(6, 18):
        shown, seen = f"{expected:.{digits}g}", f"{got:.{digits}g}"
        if shown != seen:
            return shown, seen
    return f"{expected!r}", f"{got!r}"


def _index(idx) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]" if len(idx) else "[] (a scalar)"


def expect_equal(got, want, what: str, *, visible: bool, hints: Candidates | None = None) -> None:
    """Exact comparison for counts, token lists, vocabularies (a list and a tuple compare equal)."""
    kept = _first_kept(got)
    if kept is not None:
        raise CaseFailed(f"{what}: expected a {_kind(want)}, got {'' if kept is got else f'a {type(got).__name__} holding '}{type_name(kept)}.")
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
    raise CaseFailed(f"{what}: {detail}." + (_likely(got, hints, None) or diagnose.items(got, want, visible, _short)))


def _first_kept(value):
    """The first object the worker kept rather than sent, anywhere in `value`, or None."""
    if _kept_name(value) is not None:
        return value
    items = [*value.keys(), *value.values()] if isinstance(value, Mapping) else value if isinstance(value, (list, tuple, set, frozenset)) else ()
    return next((kept for kept in map(_first_kept, items) if kept is not None), None)


def _kind(value, many: bool = False) -> str:
    """What an expected value is, in words ("list of lists of str"), never what it holds."""
    name = type(value).__name__
    if many and name not in ("str", "int", "float", "bool"):
        name += "s"
    inner = {_kind(v, many=True) for v in value} if isinstance(value, (list, tuple, set, frozenset)) else set()
    return f"{name} of {inner.pop()}" if len(inner) == 1 else name


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
    missing = sorted((k for k in want if k not in got), key=_repr)  # sorted: the example shown is the same in every run
    extra = sorted((k for k in got if k not in want), key=_repr)
    wrong = sorted((k for k in want if k in got and not _equal(got[k], want[k])), key=_repr)

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
    text = _repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _repr(value) -> str:
    """repr, but a set's items sorted: Python orders them by a hash seeded afresh in each process, and the same
    difference must read the same in every run (the portable runner's and the sandbox's alike)."""
    if isinstance(value, (set, frozenset)):
        items = ", ".join(sorted(map(_repr, value)))
        return f"{{{items}}}" if isinstance(value, set) and value else f"{type(value).__name__}({{{items}}})" if value else repr(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (set, frozenset, list, tuple, dict)) for v in value):
        items = ", ".join(map(_repr, value))
        return f"[{items}]" if isinstance(value, list) else f"({items}{',' * (len(value) == 1)})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_repr(k)}: {_repr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _likely(got, hints: Candidates | None, tol: Tolerance | None) -> str:
    """The first hint whose wrong answer explains every element of `got` (exactly, with no tolerance)."""
    for mistake, wrong_answer in (hints or {}).items():
        if _matches(got, wrong_answer, tol):
            return f" {LIKELY}{mistake}."
    return ""


def _matches(got, wrong_answer, tol: Tolerance | None) -> bool:
    """A hint that cannot be computed for these inputs simply does not match."""
    try:
        candidate = wrong_answer()
        if isinstance(candidate, (np.ndarray, np.generic, float, int)) or is_tensor(candidate):
            g, c = np.asarray(_numpy(got), dtype=np.float64), np.asarray(_numpy(candidate), dtype=np.float64)
            return g.shape == c.shape and (bool(np.array_equal(g, c, equal_nan=True)) if tol is None else tol.matches(g, c))
        return _equal(got, candidate)
    except Exception:
        return False
