"""General diagnostics: what the shape of a wrong answer's difference from the expected one says, when none of
the case's own hints explains it.

A hint computes a known mistake's answer; these look only at the student's answer and the expected one:
a ratio that is the same in every element (a sum where a mean is expected, a logarithm in another base),
values that stop at a constant where the expected ones keep growing (a clamp, an epsilon inside a log), the
expected values shifted by one position, transposed, in another order, with positions or items left out or
added, and, for statistical tests, what a sample shows. Each speaks only when it explains every element, as
a hint does, and starts with the judge's LIKELY prefix only when it names a mistake; when none does, where
along an axis the error enters is a fact worth saying (error_enters). In a hidden case nothing
of an expected value is said: a ratio, a size's name, an axis, a position or the student's own value is
fine, an expected item is not.

Every function returns "" or a sentence starting with a space, and never raises: a diagnostic that cannot be
computed for these inputs says nothing (`quiet`).
"""
from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping

import numpy as np

from .chi_square import chi_square_p_value

LIKELY = "Likely mistake: "  # names the mistake whose wrong answer explains every element; summaries keep it whole
OVERFLOW = "Overflow in exp, or a 0 * inf, usually causes this."  # the default cause of NaN or Inf where the reference is finite
LARGEST = 64  # the largest plain integer ratio named without a size of the inputs behind it
WORK = 1_000_000  # element comparisons a diagnostic may make (pairings of rows are quadratic)
# Epsilons written inside logarithms and clamps: powers of ten, and float32's and float64's machine epsilon and tiny.
EPSILONS = [10.0 ** -k for k in range(3, 21)] + [float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps),
                                                  float(np.finfo(np.float32).tiny), float(np.finfo(np.float64).tiny)]
# Those that cap a sum's terms (capped_terms), the most common first: Keras's 1e-7, then others seen in course code.
TENS = [1e-7, 1e-8, 1e-10, 1e-12, 1e-6, 1e-9, 1e-5, 1e-15, 1e-20]
CAPS = [*TENS, *EPSILONS[-4:-2]]
# got / expected of a logarithm in another base, and its words
BASES = {1 / math.log(2): ("1/ln 2", "a base-2 logarithm where the natural log is expected"),
         math.log(2): ("ln 2", "a change of logarithm base the wrong way round (multiplied by ln 2 where it should be divided)"),
         1 / math.log(10): ("1/ln 10", "a base-10 logarithm where the natural log is expected"),
         math.log(10): ("ln 10", "a change of logarithm base the wrong way round (multiplied by ln 10 where it should be divided)")}


def quiet(diagnostic: Callable[..., str]) -> Callable[..., str]:
    """A diagnostic that fails on odd inputs (a complex tensor, a ragged list) has nothing to say; it never ends a case."""
    @functools.wraps(diagnostic)
    def said(*args, **kwargs) -> str:
        try:
            with np.errstate(all="ignore"):
                return diagnostic(*args, **kwargs)
        except Exception:
            return ""

    return said


def close(got: np.ndarray, candidate: np.ndarray, tol, scale: float = 1.0) -> np.ndarray:
    """Elementwise: `got` is `candidate` within what a hint may differ by (judge.Tolerance.close), exactly when `tol`
    is None (integers and booleans); NaN matches NaN."""
    if tol is None:
        return (got == candidate) | (np.isnan(got) & np.isnan(candidate))
    return tol.close(got, candidate, scale)


def fits(got: np.ndarray, candidate: np.ndarray, tol, scale: float = 1.0) -> bool:
    return got.shape == candidate.shape and bool(np.all(close(got, candidate, tol, scale)))


def as_float(x) -> np.ndarray:
    """A numpy float64 copy of an array, tensor or number (booleans as 0 and 1)."""
    if type(x).__module__.startswith("torch"):
        x = x.detach().cpu().numpy()
    if np.asarray(x).dtype.kind not in "biuf":
        raise TypeError(f"not real numbers: {type(x).__name__}")
    return np.asarray(x, dtype=np.float64)


def _named(dims: Mapping[str, int] | None, n: float) -> list[str]:
    """The names of the case's sizes equal to `n`."""
    return [name for name, size in (dims or {}).items() if isinstance(size, int) and size > 1 and size == n]


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


def _axis(axis: int, length: int, dims) -> str:
    """An axis in words: "axis 1 (size 7: T, the sequence length)"."""
    named = _named(dims, length)
    return f"axis {axis} (size {length}{': ' + ' or '.join(named) if named else ''})"


# ---- numbers and arrays of one shape ------------------------------------------------------------------------

@quiet
def number(value: float, exact: float, tol, dims: Mapping[str, int] | None = None) -> str:
    """A wrong single number: a ratio or power, or terms capped at -log(eps)."""
    got, want = np.array([value]), np.array([exact])
    return ratio(got, want, tol, dims) or power(got, want, tol) or capped_terms(value, exact, tol, dims)


@quiet
def values(got, want, tol, dims: Mapping[str, int] | None = None) -> str:
    """Arrays of one shape whose values differ: the first diagnostic that explains every element."""
    g, w = as_float(got), as_float(want)
    if g.shape != w.shape:
        return ""
    if "bool" in (_dtype(got), _dtype(want)):  # a mask has no scale: only where its entries are can be wrong
        found = (lambda: inverted(g, w), lambda: diagonal(g, w, tol, mask=True), lambda: shifted(g, w, tol, dims),
                 lambda: transposed(g, w, tol), lambda: reordered(g, w, tol, dims))
    else:
        found = (lambda: ratio(g, w, tol, dims), lambda: power(g, w, tol), lambda: clamped(g, w, tol), lambda: diagonal(g, w, tol),
                 lambda: shifted(g, w, tol, dims), lambda: transposed(g, w, tol), lambda: reordered(g, w, tol, dims))
    return next((said for said in (diagnose() for diagnose in found) if said), "")


@quiet
def error_enters(off: np.ndarray, dims: Mapping[str, int] | None = None) -> str:
    """Where along an axis the error enters: the first k positions (1 <= k < n) all within tolerance and every later
    one with an element off (a recurrence wrong from its second step). `off`: the judge's verdict per element. Of the
    axes of size 3 or more where that holds, the longest (a time axis) is named. A fact, not a mistake: no LIKELY."""
    found = []
    for axis in range(off.ndim):
        n = off.shape[axis]
        wrong = _rows(off, axis).any(axis=1)
        k = int(np.argmax(wrong))  # the first position with an element off
        if n >= 3 and 1 <= k and wrong[k:].all():
            found.append((n, -axis, k))
    if not found:
        return ""
    n, axis, k = max(found)
    right = "position 0 matches" if k == 1 else f"positions 0 to {k - 1} match"
    return f" Along {_axis(-axis, n, dims)}, {right} the reference and every later one differs: the error enters at position {k}."


def _dtype(x) -> str:
    return str(np.asarray(x).dtype if isinstance(x, (int, float, bool)) else x.dtype).removeprefix("torch.")


def ratio(g: np.ndarray, w: np.ndarray, tol, dims=None) -> str:
    """got / expected the same in every element: -1, an integer up to LARGEST, a size of the inputs, their
    reciprocals, or a change of logarithm base."""
    finite = np.isfinite(w) & np.isfinite(g)
    if not finite.any() or not np.array_equal(g[~finite], w[~finite], equal_nan=True):
        return ""
    i = np.argmax(np.where(finite, np.abs(w), -1.0))
    if w.flat[i] == 0 or g.flat[i] == 0:
        return ""
    r = g.flat[i] / w.flat[i]
    named = {size for size in (dims or {}).values() if isinstance(size, int) and size > 1}
    candidates = [-1.0, *BASES] + [float(n) for n in set(range(2, LARGEST + 1)) | named] + [1.0 / n for n in set(range(2, LARGEST + 1)) | named]
    for c in sorted(candidates, key=lambda c: abs(c - r)):
        if abs(c - r) > 1e-3 * abs(c):
            break
        if fits(g, c * w, tol, abs(c)):
            return _ratio_words(c, dims, g.size)
    return ""


def _ratio_words(c: float, dims, count: int) -> str:
    every = " in every element" if count > 1 else ""
    if c == -1:
        return f" {LIKELY}the result is the expected one with its sign flipped{every}: a minus sign missing or extra."
    if c in BASES:
        name, why = BASES[c]
        return f" {LIKELY}the result is {name} = {c:.6g} times the expected one{every}: {why}."
    n = round(c if c > 1 else 1 / c)
    named = _named(dims, n)
    if c > 1:
        if named:
            return (f" {LIKELY}the result is {_times(n)} the expected one{every}, and {n} is {' or '.join(named)}: a sum over "
                    f"them where a mean is expected, or a division by {n} left out.")
        return f" {LIKELY}the result is exactly {_times(n)} the expected one{every}: a sum where a mean is expected, or a division by {n} left out."
    if named:
        return (f" {LIKELY}the result is the expected one divided by {n}{every}, and {n} is {' or '.join(named)}: a mean over "
                f"them where a sum is expected, or one division by {n} too many.")
    return f" {LIKELY}the result is exactly the expected one divided by {n}{every}: a mean where a sum is expected, or one division by {n} too many."


def power(g: np.ndarray, w: np.ndarray, tol) -> str:
    """got = expected ** p with p a change of logarithm base: a log of one base undone with an exp of another
    (a perplexity computed with log2 and exp)."""
    if not (np.all(np.isfinite(w)) and np.all(w > 0) and np.all(g > 0)):
        return ""
    i = np.argmax(np.abs(np.log(w)))
    if abs(math.log(w.flat[i])) < 1e-6:
        return ""
    p = math.log(g.flat[i]) / math.log(w.flat[i])
    for c, (name, _) in BASES.items():
        if abs(p - c) <= 1e-3 * c and fits(g, w ** c, tol):
            return (f" {LIKELY}the result is the expected one to the power {name} = {c:.6g}: a logarithm and an exponential "
                    "of different bases (log2 with exp, or ln with 2 **); use the same base for both.")
    return ""


def _epsilon(c: float) -> str:
    """`c` in words when it is log(eps) or -log(eps) of an epsilon written in code: " (= -log(1e-07))"."""
    for eps in EPSILONS:
        for sign in (1, -1):
            if c != 0 and abs(c - sign * math.log(eps)) <= 1e-6 * abs(c):
                return f" (= {'-' if sign < 0 else ''}log({eps:.8g}))"
    return ""


def clamped(g: np.ndarray, w: np.ndarray, tol) -> str:
    """The result stops at one value wherever the expected one goes beyond it, and is right everywhere else."""
    right = close(g, w, tol)
    off = ~right
    if not off.any() or not np.isfinite(g[off]).all():
        return ""
    c = float(np.median(g[off]))
    if not fits(g[off], np.full(int(off.sum()), c), tol):
        return ""
    above = bool(np.all(w[off] > c))
    if not (above or np.all(w[off] < c)):
        return ""
    beyond = (w > c) if above else (w < c)
    at = close(w, np.full(w.shape, c), tol)
    if np.any(beyond & right & ~close(g, np.full(g.shape, c), tol)) or not np.any(~beyond & right & ~at):
        return ""  # an element beyond the constant that was not stopped, or none short of it that follows the expected: no clamp
    eps = _epsilon(c)
    if len(np.unique(w[off])) < 2 and not eps:
        return ""  # one element alone cannot show a value that stops while the expected one grows
    how = "a clamp, or an epsilon inside a log (log(x + eps) stops at log(eps))" if eps else "a clamp, or a maximum or minimum"
    return (f" {LIKELY}the result stops at {c:.6g}{eps} wherever the expected value is {'larger' if above else 'smaller'}, "
            f"while the expected keeps {'growing' if above else 'falling'}: {how} caps it there.")


def capped_terms(value: float, exact: float, tol, dims=None) -> str:
    """A single number that is j * -log(eps) / m (m 1 or a size of the inputs) while the expected one is larger:
    a sum of terms each capped at -log(eps) (log(sigmoid(x) + eps) on large scores), the other terms all but 0.
    Powers of ten share ln 10 (20 terms at 1e-7 make 28 at 1e-5), so the most common epsilon that fits is named."""
    if not (np.isfinite(value) and np.isfinite(exact)) or value == 0 or abs(exact) <= abs(value):
        return ""
    for eps in CAPS:
        cap = -math.log(eps)
        for m, name in [(1, "")] + [(size, n) for n, size in (dims or {}).items() if isinstance(size, int) and size > 1]:
            j = round(abs(value) * m / cap)
            if 1 <= j <= 1000 and fits(np.array([abs(value)]), np.array([j * cap / m]), tol):
                per = f" / {m} ({name})" if m > 1 else ""
                other = " (or another power of ten)" if eps in TENS else ""
                return (f" {LIKELY}the result is {j} x {cap:.6g}{per}, and {cap:.6g} = -log({eps:.8g}): as if {j} of its terms "
                        f"stopped at -log(eps) with eps = {eps:.8g}{other}, an epsilon inside a log or a clamp, while the expected "
                        "ones keep growing.")
    return ""


def inverted(g: np.ndarray, w: np.ndarray) -> str:
    """Booleans (as 0 and 1) each the opposite of the expected one."""
    if w.size < 2 or not np.isin(w, (0.0, 1.0)).all() or not np.array_equal(g, 1.0 - w):
        return ""
    return f" {LIKELY}every entry is the opposite of the expected one: True and False are swapped (the mask means the reverse)."


def diagonal(g: np.ndarray, w: np.ndarray, tol, mask: bool = False) -> str:
    """Square matrices (the last two axes) right everywhere but on the diagonal: in a mask, a comparison of
    positions that should (or should not) include equality."""
    if g.ndim < 2 or g.shape[-1] != g.shape[-2] or g.shape[-1] < 2:
        return ""
    off = ~close(g, w, tol)
    on = np.broadcast_to(np.eye(g.shape[-1], dtype=bool), g.shape)
    if not off.any() or (off & ~on).any():
        return ""
    why = ("a position may or may not see itself by mistake (< where <= is meant, or the reverse)" if mask
           else "each item's entry with itself is treated apart (left out, or set) where it should not be, or the reverse")
    return f" {LIKELY}only the diagonal differs ({int(off.sum())} of its {int(on.sum())} entries): {why}."


def shifted(g: np.ndarray, w: np.ndarray, tol, dims=None) -> str:
    """Along one axis, every position holds the expected value of the position before (or after) it."""
    for axis in range(g.ndim):
        n = g.shape[axis]
        if n < 3:
            continue
        head, tail = [slice(None)] * g.ndim, [slice(None)] * g.ndim
        head[axis], tail[axis] = slice(0, n - 1), slice(1, n)
        head, tail = tuple(head), tuple(tail)
        if fits(w[tail], w[head], tol):
            continue  # constant along the axis: a shift changes nothing
        where = _axis(axis, n, dims) if g.ndim > 1 else f"the array (size {n})"
        if fits(g[tail], w[head], tol):
            return (f" {LIKELY}along {where}, each position holds the expected value of the position before it (shifted by "
                    "one, the first aside): an off-by-one in the positions.")
        if fits(g[head], w[tail], tol):
            return (f" {LIKELY}along {where}, each position holds the expected value of the position after it (shifted by "
                    "one, the last aside): an off-by-one in the positions.")
    return ""


def transposed(g: np.ndarray, w: np.ndarray, tol) -> str:
    """The expected values with their axes in another order (same shape or not)."""
    if not 2 <= w.ndim <= 5 or g.ndim != w.ndim:
        return ""
    for order in itertools.permutations(range(w.ndim)):
        if order == tuple(range(w.ndim)):
            continue
        moved = np.transpose(w, order)
        if moved.shape == g.shape and fits(g, moved, tol) and not fits(g, w, tol):
            swapped = [a for a, b in enumerate(order) if a != b]
            if w.ndim == 2:
                what = "transposed"
            elif len(swapped) == 2:
                what = f"with axes {swapped[0]} and {swapped[1]} swapped"
            else:
                what = f"with its axes in the order {order}"
            return f" {LIKELY}the result is the expected one {what}: a transpose (or swapped axes) too many or too few."
    return ""


def _rows(x: np.ndarray, axis: int) -> np.ndarray:
    """The slices of `x` along `axis`, each flattened: (n, rest)."""
    return np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)


def _pairing(g_rows: np.ndarray, w_rows: np.ndarray, tol) -> tuple[list[int | None], list[int]] | None:
    """Each expected row's partner among the got rows (None: missing), and the got rows no expected row took (extra);
    None when it would cost more than WORK comparisons."""
    if g_rows.shape[0] * w_rows.shape[0] * max(w_rows.shape[1], 1) > WORK:
        return None
    same = np.all(close(g_rows[:, None, :], w_rows[None, :, :], tol), axis=2)  # (got, expected)
    taken, partner = set(), []
    for i in range(w_rows.shape[0]):
        j = next((j for j in np.flatnonzero(same[:, i]) if j not in taken), None)
        partner.append(None if j is None else int(j))
        taken.add(j)
    return partner, [j for j in range(g_rows.shape[0]) if j not in taken]


def reordered(g: np.ndarray, w: np.ndarray, tol, dims=None) -> str:
    """The expected slices along one axis, all there, in another order."""
    for axis in range(g.ndim):
        n = g.shape[axis]
        if n < 2:
            continue
        w_rows = _rows(w, axis)
        paired = _pairing(_rows(g, axis), w_rows, tol)
        if paired is None or None in paired[0] or paired[1] or np.all(close(w_rows[:, None], w_rows[None], tol), axis=2).sum() > n:
            continue  # not all there, or expected slices that repeat (any answer with as many of each is a "reordering")
        order = paired[0]
        if order == list(range(n)):
            continue
        what = "rows" if g.ndim == 2 and axis == 0 else "values" if g.ndim == 1 else f"entries along {_axis(axis, n, dims)}"
        if order == list(range(n - 1, -1, -1)):
            return f" {LIKELY}the result holds the expected {what} in reverse order."
        moved = next(i for i, j in enumerate(order) if i != j)
        return (f" {LIKELY}the result holds the expected {what} in another order (the expected one at position {moved} "
                f"is at {order[moved]}): the order of a loop or an index is not the one asked for.")
    return ""


@quiet
def rows(got, want, visible: bool) -> str:
    """Integer arrays of one shape whose rows are small items (pairs, triples: at most 4 columns): the rows missing
    and extra, as for a shape that differs (`shape`)."""
    g, w = as_float(got), as_float(want)
    if g.shape != w.shape or w.ndim != 2 or w.shape[1] > 4:
        return ""
    return _items(g, w, None, 0, visible)


# ---- shapes ----------------------------------------------------------------------------------------------

@quiet
def shape(got, want, tol, visible: bool, dims: Mapping[str, int] | None = None) -> str:
    """An array of another shape than expected: the right values in another shape, transposed, or with positions
    or rows left out or added."""
    g, w = as_float(got), as_float(want)
    if g.size == w.size and g.size:
        if fits(g.reshape(w.shape), w, tol):
            if tuple(d for d in g.shape if d != 1) == tuple(d for d in w.shape if d != 1):
                return f" {LIKELY}the right values with axes of size 1 {'added' if g.ndim > w.ndim else 'left out'} (keepdims, a missing squeeze or an extra unsqueeze)."
            return f" {LIKELY}the right values in the expected order, in another shape: a reshape (or view) to the wrong shape, or one left out."
        said = transposed(g, w, tol)
        if said:
            return said
    if g.ndim != w.ndim or g.ndim == 0:
        return ""
    differ = [a for a in range(w.ndim) if g.shape[a] != w.shape[a]]
    if len(differ) != 1:
        return ""
    if w.ndim == 2 and differ[0] == 0 and w.shape[1] <= 4:  # rows that are items (pairs): which ones says more than where
        return _items(g, w, tol, 0, visible) or _sliced(g, w, tol, 0, dims)
    return _sliced(g, w, tol, differ[0], dims) or _items(g, w, tol, differ[0], visible)


def _sliced(g: np.ndarray, w: np.ndarray, tol, axis: int, dims) -> str:
    """The expected values without (or with extra) positions at the start or the end of one axis."""
    n, m = w.shape[axis], g.shape[axis]
    short, long = (g, w) if m < n else (w, g)
    k = abs(n - m)
    for start in range(k + 1):
        if fits(short, np.take(long, range(start, start + short.shape[axis]), axis=axis), tol):
            ends = [f"{start} at the start"] * bool(start) + [f"{k - start} at the end"] * bool(k - start)
            where = _axis(axis, n, dims) if w.ndim > 1 else "the array"
            which = "missing" if m < n else "extra"
            what = "a range or slice that starts or stops one place off" if k == 1 else "a range or slice with the wrong bounds"
            return (f" {LIKELY}the result is the expected one with {k} position{'s' * (k > 1)} {which} along {where}, "
                    f"{' and '.join(ends)}: {what}.")
    return ""


def _items(g: np.ndarray, w: np.ndarray, tol, axis: int, visible: bool) -> str:
    """Rows (slices along `axis`) missing and extra as items, with one of each where the case is visible; and what
    every missing (or extra) row shares, when it is that its entries are equal."""
    paired = _pairing(_rows(g, axis), _rows(w, axis), tol)
    if paired is None:
        return ""
    partner, extra = paired
    missing = [i for i, j in enumerate(partner) if j is None]
    if len(missing) + len(extra) > max(w.shape[axis], g.shape[axis]) // 2 + 1:
        return ""  # mostly different: not the same items with a few left out or added
    noun = "row" if w.ndim == 2 and axis == 0 else "entry" if w.ndim == 1 else f"slice along axis {axis}"
    plural = "entries" if noun == "entry" else noun + "s"
    w_rows, g_rows = _rows(w, axis), _rows(g, axis)

    def said(count: int, kind: str, rows, example) -> str:
        if not count:
            return f"no {noun} is {kind}"
        e = f" ({'' if count == 1 else 'for instance '}{_item(rows[example])})" if visible else ""
        return f"{count} {noun if count == 1 else plural} {'is' if count == 1 else 'are'} {kind}{e}"

    first = said(len(missing), "missing", w_rows, missing[0] if missing else 0)
    text = f" {first[0].upper()}{first[1:]}, and {said(len(extra), 'extra', g_rows, extra[0] if extra else 0)}."
    # two such rows at least: one alone could hold equal values by chance
    equal = lambda rows, which: len(which) > 1 and rows.shape[1] > 1 and all(len(np.unique(rows[i])) == 1 for i in which)  # noqa: E731
    if equal(w_rows, missing):
        text += (f" {LIKELY}every missing {noun} holds equal values: items are skipped by comparing values (x != y) where "
                 "positions should be compared (i != j).")
    elif equal(g_rows, extra):
        text += f" {LIKELY}every extra {noun} holds equal values: each item is also paired with itself (skip its own position)."
    return text


def _item(row: np.ndarray) -> str:
    """A row as the student wrote it: integers as integers."""
    values = [int(v) if float(v).is_integer() else float(f"{v:.6g}") for v in row]
    return str(values if len(values) > 1 else values[0])


# ---- non-finite values ---------------------------------------------------------------------------------------

@quiet
def nonfinite(got, want, cause: str | None) -> str:
    """Why the NaN/Inf patterns differ, in the case's words (`cause`: what makes its values NaN or Inf; "" for
    nothing). Without them, OVERFLOW where the result has NaN or Inf and the reference is finite, and where the
    result is finite and the reference infinite, only that."""
    g, w = as_float(got), as_float(want)
    if cause is not None:
        return f" {cause}" if cause else ""
    if (np.isfinite(g) & ~np.isfinite(w)).any() and not (~np.isfinite(g) & np.isfinite(w)).any():
        return " Where the reference is infinite, the result is finite."
    return f" {OVERFLOW}"


@quiet
def infinity_clamped(got, want, tol) -> str:
    """The result is finite where the reference is infinite, there one constant (log(eps) of an epsilon, or a large
    stand-in such as -1e9), and right everywhere else."""
    g, w = as_float(got), as_float(want)
    here = np.isfinite(g) & ~np.isfinite(w)
    rest = np.isfinite(w)
    if not here.any() or (~np.isfinite(g) & rest).any() or (rest.any() and not fits(g[rest], w[rest], tol)):
        return ""
    c = float(g[here].flat[0])
    if not fits(g[here], np.full(int(here.sum()), c), tol):
        return ""
    eps, sign = _epsilon(c), "-" if np.all(w[here] < 0) else ""
    if eps:
        return (f" {LIKELY}the result stops at {c:.6g}{eps} where the expected value is {sign}inf: an epsilon or a clamp "
                "(log(p + eps), log(max(p, eps))) hides a zero that must give an infinite value.")
    if abs(c) >= 1e4:
        return (f" {LIKELY}the result is {c:.6g} where the expected value is {sign}inf: a large finite number stands in for an "
                f"infinite one (use float('{sign}inf')).")
    return ""  # an ordinary value (0: a term skipped?) is no clamp


# ---- items: lists, tuples, sets ---------------------------------------------------------------------------------

@quiet
def items(got, want, visible: bool, short: Callable[[object], str] = repr) -> str:
    """Lists, tuples or sets of items: how many are missing and extra (one of each where visible), or the same items
    in another order."""
    if not (isinstance(got, (list, tuple, set, frozenset)) and isinstance(want, (list, tuple, set, frozenset))):
        return ""
    g, w = Counter(map(_hashable, got)), Counter(map(_hashable, want))
    missing, extra = sorted((w - g).elements(), key=repr), sorted((g - w).elements(), key=repr)
    if not missing and not extra:
        if isinstance(want, (list, tuple)) and list(got) != list(want):
            reverse = [_hashable(x) for x in got] == [_hashable(x) for x in reversed(want)]
            return f" {LIKELY}the right items in {'reverse' if reverse else 'another'} order."
        return ""

    def said(found: list, kind: str, among) -> str:
        if not found:
            return f"none {kind}"
        example = next(x for x in among if _hashable(x) == found[0])  # as it was written: a list stays a list
        return f"{len(found)} {kind}" + (f" ({'' if len(found) == 1 else 'for instance '}{short(example)})" if visible else "")

    return f" Of {sum(w.values())} items expected: {said(missing, 'missing', want)}, {said(extra, 'extra', got)}."


def _hashable(x):
    """An item as a key: lists as tuples, sets as frozensets, dicts as their sorted items."""
    if isinstance(x, (list, tuple)):
        return tuple(map(_hashable, x))
    if isinstance(x, (set, frozenset)):
        return frozenset(map(_hashable, x))
    if isinstance(x, dict):
        return tuple(sorted(((_hashable(k), _hashable(v)) for k, v in x.items()), key=repr))
    return x


# ---- samples ----------------------------------------------------------------------------------------------------

@quiet
def sample_shows(observed: Mapping, probs: Mapping, *, visible: bool, rows: np.ndarray | None = None,
                 fits: Mapping[str, Mapping] | None = None, name: Callable[[object], str] = repr) -> str:
    """What a sample that failed its chi-square test shows, to append to the case's message.

    `observed` and `probs` as chi_square_p_value takes them: counts of (history, outcome), and per history the
    expected distribution of outcomes. `rows`: the draws as a 2-D array, each row drawn independently with repeats
    allowed (sample_negatives' (N, k)); `fits`: named alternative distributions, like hints: the first the sample
    follows (p >= 1e-3) is named. `name`: an outcome in words."""
    if rows is not None:
        said = _without_replacement(np.asarray(rows), probs, visible)
        if said:
            return said
    for mistake, other in (fits or {}).items():
        if chi_square_p_value(Counter(observed), other) >= 1e-3:
            return f" {LIKELY}{mistake}."
    totals = Counter()
    for (h, _), n in observed.items():
        totals[h] += n
    for h, dist in probs.items():
        drawn = {o for (hh, o), n in observed.items() if hh == h and n}
        if totals[h] >= 20 and len(drawn) == 1 and max(dist.values()) < 0.99:
            after = f" after {name(h)}" if h != () else ""
            return f" Every one of the {totals[h]} draws{after} is {name(next(iter(drawn)))}: argmax, or a fixed seed?"
    often = [(totals[h] * p, h, o) for h, dist in probs.items() for o, p in dist.items()
             if totals[h] * p >= 20 and not observed.get((h, o), 0)]
    if often:
        expected, h, o = max(often, key=lambda x: x[0])
        after = f" after {name(h)}" if h != () else ""
        if visible:
            return (f" {name(o)} never appears{after} in {totals[h]} draws, though its probability is {probs[h][o]:.3g} "
                    f"(about {expected:.0f} draws): is it left out of the outcomes drawn from (an off-by-one in the ids)?")
        return f" An outcome that should be drawn often never appears{after}: is one left out of the outcomes drawn from?"
    return ""


def _without_replacement(rows: np.ndarray, probs: Mapping, visible: bool) -> str:
    """No id repeats within any row, where a sample drawn with replacement would repeat one in many rows (how many,
    which the expected distribution decides, only where the case is visible)."""
    if rows.ndim != 2 or rows.shape[1] < 2 or len(probs) != 1:
        return ""
    if any(len(np.unique(row)) < len(row) for row in rows):
        return ""
    p = np.array(list(next(iter(probs.values())).values()), dtype=np.float64)
    simulated = np.random.default_rng(0).choice(len(p), size=(2000, rows.shape[1]), p=p / p.sum())
    share = np.mean([len(np.unique(row)) < len(row) for row in simulated])
    expected = share * rows.shape[0]
    if expected < 10:
        return ""
    many = f"about {expected:.0f}" if visible else "many"
    return (f" {LIKELY}drawn without replacement: no id repeats within any of the {rows.shape[0]} rows of {rows.shape[1]} draws, "
            f"where {many} rows would hold a repeat if each id were drawn independently (with replacement).")
