"""Cases for component `causal_mask`: the mask itself, and the causal behaviour of
multi_head_self_attention(..., causal=True): no output position may depend on a later
input position (student-api.md).
"""
from __future__ import annotations

from ..judge import LIKELY, CaseFailed
from . import attention, check
from .common import tensor

FILE = "attention.py"  # the student API's file that holds this component: the rubric and submissions know it from here


@check("causal_mask.values")
def values(t, T: int = 7, device: str | None = None):
    """causal_mask(T) is the (T, T) bool lower triangle, diagonal included: row i (a query) keeps keys j <= i. A float
    mask (0/1, or the additive 0/-inf of PyTorch's Transformer tutorials) is named where it comes back (returns.py)."""
    want = t.expect(lambda ref: ref.attention.causal_mask(T))
    kwargs = {} if device is None else {"device": device}
    got = t.student.attention.causal_mask(T, **kwargs)
    what = f"causal_mask({T}{''.join(f', device={v!r}' for v in kwargs.values())})"
    wrong = lambda kind: lambda ref: ref.oracles.attention.causal(T, kind)  # noqa: E731
    hints = {
        "the upper triangle (triu): True must be on and below the diagonal": wrong("triu"),
        "the diagonal is missing (tril(-1)): a position may attend to itself": wrong("no_diagonal"),
        "inverted: True must mean 'may attend', on and below the diagonal": wrong("inverted"),
    } if T > 1 else {  # a 1 x 1 mask cannot tell a missing diagonal from an inverted mask
        "the diagonal is False, so position 0 may attend to nothing: the diagonal is missing (tril(-1)), or the mask is "
        "inverted (True must mean 'may attend', on and below the diagonal)": wrong("inverted")}
    t.close(got, want, what, hints=hints)


@check("causal_mask.no_future_leak")
def no_future_leak(t, batch: int = 2, steps: int = 8, d: int = 8, num_heads: int = 2):
    """Changing the inputs after position c leaves the outputs at positions 0..c of
    multi_head_self_attention(..., causal=True) as they were, for several c. Compares the student
    with itself, so it leaks nothing."""
    x, Ws = tensor(t.rng, batch, steps, d, dtype="float64", scale=1.0), attention.mha_weights(t.rng, d, "float64")
    run = lambda x: t.student.attention.multi_head_self_attention(x, *Ws, num_heads, True)  # noqa: E731
    what = f"multi_head_self_attention with x {tuple(x.shape)}, num_heads={num_heads}, causal=True"
    before = attention.output(t, run(x), x.shape, x.dtype, what)
    for c in sorted({0, steps // 2, max(steps - 2, 0)}):
        changed = x.clone()
        changed[:, c + 1:] = tensor(t.rng, batch, steps - c - 1, d, dtype="float64", scale=1.0)
        try:
            t.close(run(changed)[:, :c + 1], before[:, :c + 1],
                    f"{what}, after changing the inputs at positions {c + 1}..{steps - 1}: the outputs at positions 0..{c} "
                    "must not move (a position may only attend to itself and earlier positions)")
        except CaseFailed as failed:
            raise CaseFailed(str(failed) + off_by_one(t, run, x, before)) from None
    # The other half: a function that mixes no positions at all (or a mask that keeps only the
    # diagonal) leaks nothing either, so the past must reach every later position.
    changed = x.clone()
    changed[:, 0] = tensor(t.rng, batch, d, dtype="float64", scale=1.0)
    after = attention.output(t, run(changed), x.shape, x.dtype, what)
    still = (after[:, 1:] - before[:, 1:]).abs().amax(dim=-1) <= 1e-12
    if steps > 1 and bool(still.any()):
        t.fail(f"{what}: after changing the input at position 0, the outputs at some later positions did not move. "
               "Each position must attend to every earlier one as well as itself: is the mask keeping only the "
               "diagonal, or are the positions never mixed?")


def off_by_one(t, run, x, before) -> str:
    """The likely mistake when a position sees later ones, if it is the classic one: changing the last position alone
    moves the output just before it and no other (the mask keeps j <= i + 1). Compares the student with itself."""
    steps = x.shape[1]
    if steps < 3:  # with two positions, a missing mask moves the same single output
        return ""
    changed = x.clone()
    changed[:, -1] = tensor(t.rng, x.shape[0], x.shape[2], dtype="float64", scale=1.0)
    after = attention.output(t, run(changed), x.shape, x.dtype, "multi_head_self_attention, causal=True")
    reached = [p for p in range(steps - 1) if float((after[:, p] - before[:, p]).abs().max()) > 1e-9]
    return (f" {LIKELY}each position also sees the next one (changing position {steps - 1} alone moves the output at "
            f"{steps - 2} only): the mask keeps j <= i + 1, as tril(diagonal=1) does; it must keep j <= i." if reached == [steps - 2] else "")


@check("causal_mask.prefix")
def prefix(t, batch: int = 2, steps: int = 7, d: int = 12, num_heads: int = 3):
    """Causal self-attention at position s is plain attention over the prefix x[:, :s+1]. The student's
    causal output is compared with the student's own non-causal one, so the mask is pinned down (itself
    included, nothing later) without depending on the attention arithmetic, which `attention` grades."""
    x, Ws = tensor(t.rng, batch, steps, d, dtype="float64", scale=1.0), attention.mha_weights(t.rng, d, "float64")
    run = t.student.attention.multi_head_self_attention
    what = f"multi_head_self_attention with x {tuple(x.shape)}, num_heads={num_heads}, causal=True"
    causal = attention.output(t, run(x, *Ws, num_heads, True), x.shape, x.dtype, what)
    for s in range(steps):
        prefix = x[:, : s + 1]
        full = attention.output(t, run(prefix, *Ws, num_heads, False), prefix.shape, x.dtype, f"{what} on positions 0..{s}")
        t.close(causal[:, s], full[:, s], f"{what}: the output at position {s} must equal non-causal attention over "
                f"positions 0..{s} (each position attends to itself and every earlier one, and to nothing later)")
