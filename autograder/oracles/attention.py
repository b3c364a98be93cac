"""Mistakes for components `attention` and `causal_mask`: attention with one classic mistake switched on."""
from __future__ import annotations

import math

import torch


def causal(T: int, kind: str):
    """A (T, T) causal mask, right ("tril") or wrong: "none" (no mask: None), "triu", "no_diagonal" (tril(-1)),
    "next" (tril(1): each position sees the next one too) or "inverted" (~tril)."""
    ones = torch.ones(T, T, dtype=torch.bool)
    return {"none": None, "tril": ones.tril(), "triu": ones.triu(), "no_diagonal": ones.tril(-1), "next": ones.tril(1),
            "inverted": ~ones.tril()}[kind]


def attend(Q, K, V, mask=None, *, scale: float, dim: int = -1, ignore: bool = False, invert: bool = False, after: bool = False,
           zero_empty: bool = False, finite: bool = False, additive: bool = False):
    """(output, weights) of softmax(Q K^T / scale) V, with a mistake switched on: the softmax over `dim`,
    the mask ignored, inverted or multiplied into the weights after the softmax. A query with no key
    gets NaN, or zeros as the starter asks (zero_empty), or with masked scores set to the most negative
    finite number instead of -inf (finite), the mean of the values, or with -10000 added to the masked
    scores (additive, old BERT code), the weights of no mask at all, as the constant cancels."""
    use = mask is not None and not ignore
    scores = Q @ K.transpose(-2, -1) / scale
    if use and additive:
        scores = scores - 10000.0 * (~mask).to(scores.dtype)
    elif use and not after:
        scores = scores.masked_fill(mask if invert else ~mask, torch.finfo(scores.dtype).min if finite else float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    if use and after:
        weights = weights * mask
    if zero_empty:
        weights = weights.nan_to_num(0.0)
    return weights @ V, weights


def split(x, W, num_heads: int, transpose: bool = True):
    """x @ W.T as heads (B, h, T, dk); without the transpose, (B, T, h, dk) read straight as (B, h, T, dk)."""
    B, T, d = x.shape
    y = x @ W.T
    return y.reshape(B, T, num_heads, d // num_heads).transpose(1, 2) if transpose else y.reshape(B, num_heads, T, d // num_heads)


def mha(x, memory, W_q, W_k, W_v, W_o, num_heads: int, mask=None, *, split_transpose: bool = True, merge_transpose: bool = True,
        W_o_use: str = "concat", scale: float | None = None, **attend_mistake):
    """Multi-head attention with one mistake switched on. The heads split or merged by a reshape alone;
    W_o_use: "concat" (right), "none", or "per_head" (each head mapped by its own diagonal block of W_o
    before the concatenation); or one of attend's mistakes."""
    d = x.shape[-1]
    dk = d // num_heads
    q, k, v = (split(a, W, num_heads, split_transpose) for a, W in ((x, W_q), (memory, W_k), (memory, W_v)))
    y, _ = attend(q, k, v, mask, scale=math.sqrt(dk) if scale is None else scale, **attend_mistake)
    y = (y.transpose(1, 2) if merge_transpose else y).reshape(x.shape)
    if W_o_use == "per_head":
        W_o = torch.block_diag(*(W_o[i * dk:(i + 1) * dk, i * dk:(i + 1) * dk] for i in range(num_heads)))
    return y if W_o_use == "none" else y @ W_o.T
