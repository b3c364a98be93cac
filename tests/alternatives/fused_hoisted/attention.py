"""A correct `attention` in another style: einsum everywhere, heads included (W_q viewed as (heads, dk, d) projects
straight into heads; W_o viewed as (d, heads, dk) concatenates them), and additive large-negative masks
(scores + where(mask, 0, finfo.min)) whose weights are then multiplied by the mask: masked weights are exactly 0,
and a query with every key masked gets a uniform softmax times zeros, so zero weights, a zero output, no NaN."""
from __future__ import annotations

import torch


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return torch.softmax(scores, dim=-1)
    penalty = torch.where(mask, scores.new_zeros(()), scores.new_full((), torch.finfo(scores.dtype).min))
    return torch.softmax(scores + penalty, dim=-1) * mask


def dot_product_attention(query, keys, values, mask=None):
    weights = _masked_softmax(torch.einsum("bh,bsh->bs", query, keys), mask)
    return torch.einsum("bs,bsv->bv", weights, values), weights


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) * Q.shape[-1] ** -0.5
    return torch.einsum("...qk,...kv->...qv", _masked_softmax(scores, mask), V)


def causal_mask(T: int, device=None) -> torch.Tensor:
    positions = torch.arange(T, device=device)
    return positions[:, None] >= positions[None, :]


def _heads(x: torch.Tensor, W: torch.Tensor, num_heads: int) -> torch.Tensor:
    """x (B, T, d) -> (B, heads, T, dk): row block h of W projects head h."""
    return torch.einsum("btd,hkd->bhtk", x, W.view(num_heads, -1, W.shape[1]))


def _merge(y: torch.Tensor, W_o: torch.Tensor) -> torch.Tensor:
    """y (B, heads, T, dk) -> concat over heads, in order, @ W_o.T: (B, T, d)."""
    return torch.einsum("bhtk,ehk->bte", y, W_o.view(W_o.shape[0], y.shape[1], y.shape[3]))


def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads, causal=True):
    mask = causal_mask(x.shape[1], x.device) if causal else None
    y = scaled_dot_product_attention(*(_heads(x, W, num_heads) for W in (W_q, W_k, W_v)), mask)
    return _merge(y, W_o)


def multi_head_cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_mask=None):
    mask = None if memory_mask is None else memory_mask[:, None, None, :]
    y = scaled_dot_product_attention(_heads(x, W_q, num_heads), _heads(memory, W_k, num_heads), _heads(memory, W_v, num_heads), mask)
    return _merge(y, W_o)
