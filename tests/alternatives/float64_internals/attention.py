"""A correct `attention` with float64 internals: inputs cast to float64, results cast back. Another all-masked-row
treatment: a hand-written softmax, exp(s - max over the allowed keys) with masked entries set to -inf before the
exp (so they are exactly 0), divided by the row sum clamped away from 0: a row with no allowed key sums to 0 and
stays all zeros, with finite gradients. Heads by reshape and permute."""
from __future__ import annotations

import math

import torch


def _softmax64(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        mask = torch.ones((), dtype=torch.bool, device=scores.device)
    mask = mask.expand_as(scores)
    top = scores.masked_fill(~mask, -math.inf).amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top)).detach()  # any shift is exact; none for empty rows
    e = torch.exp((scores - top).masked_fill(~mask, -math.inf))
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)


def dot_product_attention(query, keys, values, mask=None):
    q, k, v = query.double(), keys.double(), values.double()
    weights = _softmax64((k @ q[:, :, None])[:, :, 0], mask)  # (B, S)
    context = (weights[:, None, :] @ v)[:, 0]  # (B, Dv)
    return context.to(values.dtype), weights.to(query.dtype)


def _sdpa64(Q, K, V, mask):
    weights = _softmax64(Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1]), mask)
    return weights @ V


def scaled_dot_product_attention(Q, K, V, mask=None):
    return _sdpa64(Q.double(), K.double(), V.double(), mask).to(V.dtype)


def causal_mask(T: int, device=None) -> torch.Tensor:
    return torch.tril(torch.ones(T, T, device=device)).bool()


def _split(y: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, T, d = y.shape
    return y.reshape(B, T, num_heads, d // num_heads).permute(0, 2, 1, 3)


def _attend64(x, memory, W_q, W_k, W_v, W_o, num_heads, mask):
    x, memory, W_q, W_k, W_v, W_o = (a.double() for a in (x, memory, W_q, W_k, W_v, W_o))
    y = _sdpa64(_split(x @ W_q.T, num_heads), _split(memory @ W_k.T, num_heads), _split(memory @ W_v.T, num_heads), mask)
    B, _, Tq, _ = y.shape
    return y.permute(0, 2, 1, 3).reshape(B, Tq, -1) @ W_o.T


def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads, causal=True):
    mask = causal_mask(x.shape[1], x.device) if causal else None
    return _attend64(x, x, W_q, W_k, W_v, W_o, num_heads, mask).to(x.dtype)


def multi_head_cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_mask=None):
    mask = None if memory_mask is None else memory_mask.reshape(memory_mask.shape[0], 1, 1, -1)
    return _attend64(x, memory, W_q, W_k, W_v, W_o, num_heads, mask).to(x.dtype)
