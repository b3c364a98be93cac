"""Cases for component `attention` (attention.py).

Inputs are random and non-symmetric, and sizes differ wherever the API allows
(H != Dv, dk != dv, Tq != Tk, d != dk), so a missing or wrong scale, a softmax
over the wrong axis, heads split without the transpose, or W_o left out all
show. Masks keep anywhere from one key to all but one per query, so a mask
that is ignored, inverted or applied after the softmax shows too. Every query
keeps at least one key, except in the one case about queries that keep none
(the student API leaves those to the starter's docstring).
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np

from ..gradients import check_gradients
from ..rounding import rounded
from . import check
from .common import call_leaving_inputs, tensor, tensors
from ..tensors import deferred

torch = deferred("torch")

FILE = "attention.py"  # the student API's file that holds this component: the rubric and submissions know it from here

MaskKind = Literal["none", "shared", "padding", "sparse"]


# ---- inputs ---------------------------------------------------------------------------------------


def key_mask(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    """A bool mask over the last axis (the keys), True = may attend. Each row keeps a share drawn
    from [0, 1), so some rows mask most keys; every row keeps at least one key and, when it has
    more than one, masks at least one (so an inverted mask still leaves every row a key)."""
    S = shape[-1]
    mask = rng.uniform(size=shape) < rng.uniform(size=shape[:-1] + (1,))
    drop = rng.integers(0, S, size=shape[:-1] + (1,))
    np.put_along_axis(mask, drop, S == 1, axis=-1)  # masks one key (none when there is only one)
    np.put_along_axis(mask, (drop + rng.integers(1, max(S, 2), size=drop.shape)) % S, True, axis=-1)  # keeps another
    return torch.from_numpy(mask)


def sdpa_mask(rng, kind: MaskKind, batch: int, heads: int, tq: int, tk: int) -> torch.Tensor | None:
    """None, one (Tq, Tk) mask shared by every example and head, a (B, 1, 1, Tk) padding mask,
    or a full (B, h, Tq, Tk) mask."""
    return {"none": lambda: None, "shared": lambda: key_mask(rng, tq, tk),
            "padding": lambda: key_mask(rng, batch, tk)[:, None, None, :],
            "sparse": lambda: key_mask(rng, batch, heads, tq, tk)}[kind]()


def mha_weights(rng, d: int, dtype: str) -> list[torch.Tensor]:
    """W_q, W_k, W_v, W_o, each (d, d), at scale 1/sqrt(d) as in training: for x at scale 1, the
    scores and outputs are O(1), where float32 rounding stays well inside the tolerances."""
    return [tensor(rng, d, d, dtype=dtype, scale=d ** -0.5) for _ in range(4)]


# ---- what classic mistakes compute, for the feedback's hints ----------------------------------------

SCORE_MISTAKES = {  # feedback -> what attend() is told
    "the 1/sqrt(dk) scaling is missing": {"scale": 1.0},
    "the softmax runs over the query axis (dim=-2); it must normalise over the keys (dim=-1)": {"dim": -2},
}
MASK_MISTAKES = {
    "the mask is ignored": {"ignore": True},
    "the mask is inverted: True means the key may be attended to": {"invert": True},
    "the mask multiplies the weights after the softmax, so the kept weights no longer sum to 1; "
    "fill the masked scores with -inf before the softmax": {"after": True},
}


def sdpa_hints(Q, K, V, mask) -> dict:
    run = lambda **kw: lambda ref: ref.oracles.attention.attend(Q, K, V, mask, **({"scale": math.sqrt(Q.shape[-1])} | kw))[0]  # noqa: E731
    return {msg: run(**kw) for msg, kw in (SCORE_MISTAKES | (MASK_MISTAKES if mask is not None else {})).items()}


def mha_hints(x, memory, Ws, num_heads: int, mask) -> dict:
    """mask: what the heads attend with, (T, T) or (B, 1, 1, Tk), or None."""
    run = lambda **mistake: lambda ref: ref.oracles.attention.mha(x, memory, *Ws, num_heads, mask, **mistake)  # noqa: E731
    return {
        "the heads are split without the transpose: (B, T, h, dk) must become (B, h, T, dk) with .transpose(1, 2), "
        "not by a reshape or view": run(split_transpose=False, merge_transpose=False),
        "the head outputs are merged without the transpose back: (B, h, T, dk) must become (B, T, h, dk) "
        "with .transpose(1, 2) before the reshape to (B, T, d)": run(merge_transpose=False),
        "the scores are divided by sqrt(d) instead of sqrt(dk), dk = d // num_heads": run(scale=math.sqrt(x.shape[-1])),
        "W_o is not applied to the concatenated heads": run(W_o_use="none"),
        "W_o is applied to each head separately before the concatenation; it maps the concatenation of all heads": run(W_o_use="per_head"),
        **{msg: run(**kw) for msg, kw in (SCORE_MISTAKES | (MASK_MISTAKES if mask is not None else {})).items()},
    }


CAUSAL_MISTAKES = {  # feedback -> the wrong mask (oracles.attention.causal)
    "the causal mask is missing: causal=True attends to every position": "none",
    "the causal mask is upper-triangular (triu): positions attend to the future instead of the past": "triu",
    "the causal mask leaves out the diagonal (tril(-1)): a position attends to itself too": "no_diagonal",
    "the causal mask is inverted: True (may attend) belongs on and below the diagonal": "inverted",
}


def causal_hints(x, Ws, num_heads: int) -> dict:
    """multi_head_self_attention(..., causal=True) with a wrong causal mask. A mask that leaves the
    first or last query no key gives NaN, or zeros as the starter asks: both are recognised."""
    def run(kind: str, **empty):
        return lambda ref: ref.oracles.attention.mha(x, x, *Ws, num_heads, ref.oracles.attention.causal(x.shape[1], kind), **empty)

    hints = {}
    for mistake, kind in CAUSAL_MISTAKES.items():
        hints[mistake] = run(kind, zero_empty=True)
        hints[f"{mistake} (the query left with no key at all gets NaN)"] = run(kind)
    return hints


# What makes attention's values NaN or Inf, said by the judge in place of its generic sentence.
NONFINITE = ("Attention gets NaN from a softmax over a row whose scores are all -inf (a query with every key masked: "
             "0/0), and Inf where a score overflows.")


# ---- calling the student ------------------------------------------------------------------------


def output(t, got, shape: tuple, dtype: torch.dtype, what: str) -> torch.Tensor:
    """For cases without a reference: the student's output must be a finite tensor of this shape and dtype."""
    if type(got) is not torch.Tensor or tuple(got.shape) != tuple(shape) or got.dtype != dtype:
        t.fail(f"{what}: expected a {dtype} tensor of shape {tuple(shape)}, got "
               + (f"a {got.dtype} tensor of shape {tuple(got.shape)}." if type(got) is torch.Tensor else f"{type(got).__name__}."))
    if not torch.isfinite(got).all():
        t.fail(f"{what}: {int((~torch.isfinite(got)).sum())} entries are NaN or Inf (a query whose every key is masked, or overflow?).")
    return got


def masked_weights_are_zero(t, weights: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    """A masked key's weight is exactly 0, not merely small (a property: no expected values involved)."""
    leaked = (weights != 0) & ~mask
    if leaked.any():
        first = [int(i) for i in leaked.nonzero()[0]]
        t.fail(f"{what}: {int(leaked.sum())} masked keys (mask False) got a non-zero weight (the largest "
               f"{weights[leaked].abs().max().item():.3g}), the first at {first}; a masked key's weight must be exactly 0. "
               "Fill the masked scores with -inf before the softmax: adding a finite 'large negative' number is "
               "not enough when a masked key's score is itself large.")


# ---- dot_product_attention ----------------------------------------------------------------------


def dot_product_hints(q, k, v, mask, i: int) -> dict:
    """The mistakes of sdpa_hints for output i (0: context, 1: weights) of dot_product_attention."""
    m = None if mask is None else mask[:, None]
    run = lambda **kw: lambda ref: ref.oracles.attention.attend(q[:, None], k, v, m, **({"scale": 1.0} | kw))[i].squeeze(1)  # noqa: E731
    return {"the scores are divided by sqrt(H); this attention has no scaling": run(scale=math.sqrt(q.shape[-1])),
            "the softmax runs over the batch axis (dim=0); it must normalise over the S source positions": run(dim=0),
            **({} if mask is None else {msg: run(**kw) for msg, kw in MASK_MISTAKES.items()})}


@check("attention.dot_product")
def dot_product(t, batch: int = 4, src_len: int = 7, hidden: int = 5, d_v: int = 3, masked: bool = True, dtype: str = "float64"):
    """Context and weights against the reference, masked weights exactly 0, inputs left as they were."""
    q, k, v = tensor(t.rng, batch, hidden, dtype=dtype, scale=1.0), tensor(t.rng, batch, src_len, hidden, dtype=dtype), tensor(t.rng, batch, src_len, d_v, dtype=dtype)
    mask = key_mask(t.rng, batch, src_len) if masked else None
    want = t.expect(lambda ref: rounded(ref.attention.dot_product_attention, q, k, v, mask))
    what = f"dot_product_attention with B={batch}, S={src_len}, H={hidden}, Dv={d_v}, " + ("a (B, S) mask" if masked else "mask=None") + f", {dtype}"
    got = call_leaving_inputs(t, t.student.attention.dot_product_attention, [q, k, v, mask], ("query", "keys", "values", "mask"), what)
    got = tensors(t, got, what, ("context", "weights"))
    for i, name in ((1, "weights"), (0, "context")):
        t.close(got[i], want[i], f"{what}: {name}", hints=dot_product_hints(q, k, v, mask, i), nonfinite=NONFINITE)
    if masked:
        masked_weights_are_zero(t, got[1], mask, f"{what}: weights")


# ---- scaled_dot_product_attention -------------------------------------------------------------------


def sdpa_inputs(rng, batch: int, heads: int, tq: int, tk: int, dk: int, dv: int, dtype: str) -> list[torch.Tensor]:
    """Q (B, h, Tq, dk), K (B, h, Tk, dk), V (B, h, Tk, dv); Q at scale 1 so the 1/sqrt(dk) matters."""
    return [tensor(rng, batch, heads, tq, dk, dtype=dtype, scale=1.0), tensor(rng, batch, heads, tk, dk, dtype=dtype, scale=1.0),
            tensor(rng, batch, heads, tk, dv, dtype=dtype)]


@check("attention.scaled")
def scaled(t, batch: int = 2, heads: int = 3, tq: int = 5, tk: int = 7, dk: int = 4, dv: int = 6,
           mask: MaskKind = "none", dtype: str = "float64"):
    """Values against the reference (inputs left as they were), then the gradients of Q, K and V.
    mask: none, shared (Tq, Tk), padding (B, 1, 1, Tk) or sparse (B, h, Tq, Tk); all must broadcast."""
    Q, K, V = sdpa_inputs(t.rng, batch, heads, tq, tk, dk, dv, dtype)
    M = sdpa_mask(t.rng, mask, batch, heads, tq, tk)
    want = t.expect(lambda ref: rounded(ref.attention.scaled_dot_product_attention, Q, K, V, M))
    shape = "no mask" if M is None else f"a mask of shape {tuple(M.shape)}"
    what = f"scaled_dot_product_attention with Q {tuple(Q.shape)}, K {tuple(K.shape)}, V {tuple(V.shape)} and {shape}, {dtype}"
    got = call_leaving_inputs(t, t.student.attention.scaled_dot_product_attention, [Q, K, V, M], ("Q", "K", "V", "mask"), what)
    t.close(got, want, what, hints=sdpa_hints(Q, K, V, M), nonfinite=NONFINITE)
    check_gradients(t, t.student.attention.scaled_dot_product_attention,
                    lambda *a: t.expect(lambda ref: ref.attention.scaled_dot_product_attention(*a)),
                    [Q, K, V, M], grad_args=range(3), names=("Q", "K", "V"), outputs=("output",))


EMPTY_ROW_MISTAKES = {  # feedback -> what attend() is told, for queries whose keys are all masked
    "a query whose keys are all masked gets NaN (0/0: the softmax of a row of -inf, or weights renormalised by a sum "
    "of 0): give such rows finite scores before the softmax and zero their weights after it": {},
    "a query whose keys are all masked averages the values (uniform weights from a finite 'large negative' fill): "
    "its weights must all be 0 and its output the zero vector": {"finite": True},
    "a query whose keys are all masked attends as if nothing were masked (a constant added to every masked score, "
    "-10000 or -1e9, cancels in its softmax): its weights must all be 0 and its output the zero vector": {"additive": True},
}


def without_keys(rng, mask: torch.Tensor) -> torch.Tensor:
    """`mask` with every key masked for a random query of each example (one row of the last two axes)."""
    mask = mask.clone()
    rows = mask.reshape(mask.shape[0], -1, mask.shape[-1])
    rows[torch.arange(len(rows)), torch.from_numpy(rng.integers(0, rows.shape[1], size=len(rows)))] = False
    return rows.reshape(mask.shape)


@check("attention.fully_masked")
def fully_masked(t, fn: Literal["dot_product_attention", "scaled_dot_product_attention", "multi_head_cross_attention"],
                 batch: int = 3, heads: int = 2, tq: int = 4, tk: int = 6, d: int = 8, dtype: str = "float64"):
    """The handout's convention for a query whose keys are ALL masked: weights all 0, a zero output, and no
    NaN in values or gradients. Each example has such a query (for dot_product_attention and cross-attention,
    whose masks are per example, one example masks everything); the others keep from one key to all but one. Values against the reference, then the
    gradients of every floating input (dot_product_attention: values only, as its API asks)."""
    if fn == "dot_product_attention":
        q, k, v = tensor(t.rng, batch, d, dtype=dtype, scale=1.0), tensor(t.rng, batch, tk, d, dtype=dtype), tensor(t.rng, batch, tk, 3, dtype=dtype)
        mask = key_mask(t.rng, batch, tk)
        mask[int(t.rng.integers(batch))] = False
        args, names = [q, k, v, mask], ("query", "keys", "values", "mask")
        wrong = lambda ref, i, **kw: ref.oracles.attention.attend(q[:, None], k, v, mask[:, None], scale=1.0, **kw)[i].squeeze(1)  # noqa: E731
    elif fn == "scaled_dot_product_attention":
        Q, K, V = sdpa_inputs(t.rng, batch, heads, tq, tk, d // heads, 3, dtype)
        mask = without_keys(t.rng, key_mask(t.rng, batch, heads, tq, tk))
        args, names = [Q, K, V, mask], ("Q", "K", "V", "mask")
        wrong = lambda ref, i, **kw: ref.oracles.attention.attend(Q, K, V, mask, scale=math.sqrt(d // heads), **kw)[0]  # noqa: E731
    else:
        x, memory = tensor(t.rng, batch, tq, d, dtype=dtype, scale=1.0), tensor(t.rng, batch, tk, d, dtype=dtype, scale=1.0)
        Ws, mask = mha_weights(t.rng, d, dtype), key_mask(t.rng, batch, tk)
        mask[int(t.rng.integers(batch))] = False
        args, names = [x, memory, *Ws, heads, mask], ("x", "memory", "W_q", "W_k", "W_v", "W_o", "num_heads", "memory_mask")
        wrong = lambda ref, i, **kw: ref.oracles.attention.mha(x, memory, *Ws, heads, mask[:, None, None, :], **kw)  # noqa: E731
    student_fn = getattr(t.student.attention, fn)
    want = t.expect(lambda ref: rounded(getattr(ref.attention, fn), *args))
    what = f"{fn} with a mask of shape {tuple(mask.shape)} that masks every key of some queries, {dtype}"
    got = call_leaving_inputs(t, student_fn, args, names, what)

    def hints(i: int) -> dict:
        return {msg: (lambda ref, kw=kw: wrong(ref, i, **kw)) for msg, kw in EMPTY_ROW_MISTAKES.items()}

    if fn == "dot_product_attention":
        got = tensors(t, got, what, ("context", "weights"))
        for i, name in ((1, "weights"), (0, "context")):
            t.close(got[i], want[i], f"{what}: {name}", hints=hints(i), nonfinite=NONFINITE)
        return
    t.close(got, want, what, hints=hints(0), nonfinite=NONFINITE)
    floating = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    check_gradients(t, student_fn, lambda *a: t.expect(lambda ref: getattr(ref.attention, fn)(*a)), args,
                    grad_args=floating, names=[names[i] for i in floating], outputs=("output",))


# ---- behaviour: no expected values, so nothing leaks from hidden cases ---------------------------------------


@check("attention.weights_are_distributions")
def weights_are_distributions(t, fn: Literal["dot_product_attention", "scaled_dot_product_attention"] = "dot_product_attention",
                              batch: int = 3, heads: int = 2, tq: int = 4, tk: int = 9, dk: int = 6, dtype: str = "float64"):
    """Each query's weights are >= 0 and sum to 1, and masked keys get exactly 0. Keys that an example
    masks for all its queries score about +1e4 to +1e5, so a finite 'large negative' number added to
    the scores (the -10000 of old BERT code) leaks weight onto them. scaled_dot_product_attention shows
    its weights when V is the identity: output = weights @ I."""
    padding = key_mask(t.rng, batch, tk)  # (B, Tk), False = masked for every query of the example
    dot = fn == "dot_product_attention"
    if dot:
        q, k = tensor(t.rng, batch, dk, dtype=dtype, scale=1.0), tensor(t.rng, batch, tk, dk, dtype=dtype, scale=1.0)
        mask, loud = padding, ~padding
    else:
        q, k, _ = sdpa_inputs(t.rng, batch, heads, tq, tk, dk, 1, dtype)
        kept = torch.nn.functional.one_hot(padding.int().argmax(-1), tk).bool()  # a key each example keeps
        mask = padding[:, None, None, :] & (key_mask(t.rng, batch, heads, tq, tk) | kept[:, None, None, :])
        loud = ~padding[:, None, :]
    q[..., 0] = 1.0
    k[..., 0] = torch.where(loud, 1e5, k[..., 0])
    eye = torch.eye(tk, dtype=k.dtype).expand(*k.shape[:-1], tk).clone()  # V: weights @ I = weights
    what = f"{fn} with keys of shape {tuple(k.shape)} and a mask of shape {tuple(mask.shape)}, {dtype}"
    got = getattr(t.student.attention, fn)(q, k, eye, mask)
    weights = tensors(t, got, what, ("context", "weights"))[1] if dot else got
    weights = output(t, weights, mask.shape, k.dtype, f"{what}: the attention weights" + ("" if dot else " (the output for V = identity)"))
    if (weights < 0).any():
        t.fail(f"{what}: {int((weights < 0).sum())} attention weights are negative; softmax weights are >= 0.")
    masked_weights_are_zero(t, weights, mask, f"{what}: weights")
    t.close(weights.sum(-1), torch.ones(mask.shape[:-1], dtype=k.dtype), f"{what}: the sum of each query's weights over the keys (must be 1)")


# ---- multi-head attention -------------------------------------------------------------------------


@check("attention.self_attention")
def self_attention(t, batch: int = 2, steps: int = 6, d: int = 12, num_heads: int = 3, causal: bool = False, dtype: str = "float64"):
    """Values against the reference (inputs left as they were), then the gradients of x and the four weights."""
    x, Ws = tensor(t.rng, batch, steps, d, dtype=dtype, scale=1.0), mha_weights(t.rng, d, dtype)
    args = [x, *Ws, num_heads, causal]
    want = t.expect(lambda ref: rounded(ref.attention.multi_head_self_attention, *args))
    what = f"multi_head_self_attention with x {tuple(x.shape)}, num_heads={num_heads}, causal={causal}, {dtype}"
    got = call_leaving_inputs(t, t.student.attention.multi_head_self_attention, args, ("x", "W_q", "W_k", "W_v", "W_o"), what)
    mask = torch.ones(steps, steps, dtype=torch.bool).tril() if causal else None
    hints = causal_hints(x, Ws, num_heads) if causal else {  # the flag ignored: always causal
        "a causal mask is applied although causal=False": lambda ref: ref.oracles.attention.mha(x, x, *Ws, num_heads, ref.oracles.attention.causal(steps, "tril"))}
    t.close(got, want, what, hints=hints | mha_hints(x, x, Ws, num_heads, mask), nonfinite=NONFINITE)
    check_gradients(t, t.student.attention.multi_head_self_attention,
                    lambda *a: t.expect(lambda ref: ref.attention.multi_head_self_attention(*a)),
                    args, grad_args=range(5), names=("x", "W_q", "W_k", "W_v", "W_o"), outputs=("output",))


@check("attention.cross_attention")
def cross_attention(t, batch: int = 3, tq: int = 4, tk: int = 7, d: int = 8, num_heads: int = 2, masked: bool = True, dtype: str = "float64"):
    """Queries from x, keys and values from memory: values against the reference, then the gradients
    of x, memory and the four weights. The memory mask keeps from one to all but one memory position per example."""
    x, memory = tensor(t.rng, batch, tq, d, dtype=dtype, scale=1.0), tensor(t.rng, batch, tk, d, dtype=dtype, scale=1.0)
    Ws, mask = mha_weights(t.rng, d, dtype), key_mask(t.rng, batch, tk) if masked else None
    args = [x, memory, *Ws, num_heads, mask]
    want = t.expect(lambda ref: rounded(ref.attention.multi_head_cross_attention, *args))
    what = (f"multi_head_cross_attention with x {tuple(x.shape)}, memory {tuple(memory.shape)}, num_heads={num_heads}, "
            + ("a (B, Tk) memory_mask" if masked else "memory_mask=None") + f", {dtype}")
    names = ("x", "memory", "W_q", "W_k", "W_v", "W_o", "num_heads", "memory_mask")
    got = call_leaving_inputs(t, t.student.attention.multi_head_cross_attention, args, names, what)
    m = None if mask is None else mask[:, None, None, :]
    hints = mha_hints(x, memory, Ws, num_heads, m) | {
        "queries come from memory and keys and values from x; it is the other way round":
            lambda ref: ref.oracles.attention.mha(memory, x, *Ws, num_heads, m)}
    t.close(got, want, what, hints=hints, nonfinite=NONFINITE)
    check_gradients(t, t.student.attention.multi_head_cross_attention,
                    lambda *a: t.expect(lambda ref: ref.attention.multi_head_cross_attention(*a)),
                    args, grad_args=range(6), names=names[:6], outputs=("output",))


@check("attention.batch_independence")
def batch_independence(t, batch: int = 4, steps: int = 5, memory_len: int = 6, d: int = 8, num_heads: int = 2):
    """Examples in a batch are independent, in self-attention and in cross-attention with a memory
    mask: permuting the batch permutes the output, and an example run alone gives its row of the
    batch. Compares the student with itself. causal=False, so that a wrong causal mask (graded by
    the causal_mask component) costs nothing here."""
    x, memory = tensor(t.rng, batch, steps, d, dtype="float64", scale=1.0), tensor(t.rng, batch, memory_len, d, dtype="float64", scale=1.0)
    Ws, mask = mha_weights(t.rng, d, "float64"), key_mask(t.rng, batch, memory_len)
    perm = torch.from_numpy(t.rng.permutation(batch))
    self_attn, cross = t.student.attention.multi_head_self_attention, t.student.attention.multi_head_cross_attention
    runs = {"multi_head_self_attention, causal=False": lambda r: self_attn(x[r], *Ws, num_heads, False),
            "multi_head_cross_attention with a memory_mask": lambda r: cross(x[r], memory[r], *Ws, num_heads, mask[r])}
    for name, run in runs.items():
        whole = output(t, run(slice(None)), x.shape, x.dtype, name)
        for rows, how in ((perm, "on a permuted batch"), (perm[:1], "on one example alone")):
            t.close(run(rows), whole[rows], f"{name} {how}: the output must be the matching rows of the whole batch's (do examples mix?)")


@check("attention.position_equivariance")
def position_equivariance(t, batch: int = 2, steps: int = 7, memory_len: int = 6, d: int = 8, num_heads: int = 2):
    """Attention itself knows no positions: with causal=False, permuting the positions of x permutes
    the output of self-attention the same way; in cross-attention it permutes the output, and
    permuting the memory (and its mask) changes nothing. Compares the student with itself."""
    x, memory = tensor(t.rng, batch, steps, d, dtype="float64", scale=1.0), tensor(t.rng, batch, memory_len, d, dtype="float64", scale=1.0)
    Ws, mask = mha_weights(t.rng, d, "float64"), key_mask(t.rng, batch, memory_len)
    p, pm = torch.from_numpy(t.rng.permutation(steps)), torch.from_numpy(t.rng.permutation(memory_len))
    self_attn, cross = t.student.attention.multi_head_self_attention, t.student.attention.multi_head_cross_attention
    y = output(t, self_attn(x, *Ws, num_heads, False), x.shape, x.dtype, "multi_head_self_attention, causal=False")
    t.close(self_attn(x[:, p], *Ws, num_heads, False), y[:, p],
            "multi_head_self_attention, causal=False, on x with its positions permuted: the output must be permuted the same way")
    y = output(t, cross(x, memory, *Ws, num_heads, mask), x.shape, x.dtype, "multi_head_cross_attention")
    t.close(cross(x[:, p], memory, *Ws, num_heads, mask), y[:, p],
            "multi_head_cross_attention on x with its positions permuted: the output must be permuted the same way")
    t.close(cross(x, memory[:, pm], *Ws, num_heads, mask[:, pm]), y,
            "multi_head_cross_attention on memory (and memory_mask) with its positions permuted: the output must not change")
