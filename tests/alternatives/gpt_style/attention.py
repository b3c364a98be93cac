"""A correct `attention` in the GPT style: queries scaled by 1/sqrt(dk) before the matmul, masked_fill(-inf) masks,
one fused QKV projection (x @ cat([W_q, W_k, W_v]).T split in three), heads by view/transpose, and bmm for the
single-query attention. Another all-masked-row treatment: such a row is let through the softmax unmasked (so it
stays finite) and its weights are then zeroed by the real mask."""
from __future__ import annotations

import math

import torch


def _weights(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return torch.softmax(scores, dim=-1)
    open_rows = mask | ~mask.any(dim=-1, keepdim=True)  # a row with no allowed key is not masked at all here
    weights = torch.softmax(scores.masked_fill(~open_rows, float("-inf")), dim=-1)
    return weights.masked_fill(~mask, 0.0)


def dot_product_attention(query, keys, values, mask=None):
    scores = torch.bmm(query.unsqueeze(1), keys.transpose(1, 2)).squeeze(1)  # (B, S)
    weights = _weights(scores, mask)
    return torch.bmm(weights.unsqueeze(1), values).squeeze(1), weights


def scaled_dot_product_attention(Q, K, V, mask=None):
    q = Q * (1.0 / math.sqrt(Q.size(-1)))
    return _weights(q @ K.transpose(-2, -1), mask) @ V


def causal_mask(T: int, device=None) -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1).logical_not()


def _heads(y: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, T, C = y.size()
    return y.view(B, T, num_heads, C // num_heads).transpose(1, 2)  # (B, nh, T, hs)


def _concat(y: torch.Tensor) -> torch.Tensor:
    B, nh, T, hs = y.size()
    return y.transpose(1, 2).contiguous().view(B, T, nh * hs)


def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads, causal=True):
    q, k, v = (x @ torch.cat([W_q, W_k, W_v]).T).split(x.size(-1), dim=2)
    mask = causal_mask(x.size(1), x.device) if causal else None
    y = scaled_dot_product_attention(_heads(q, num_heads), _heads(k, num_heads), _heads(v, num_heads), mask)
    return _concat(y) @ W_o.T


def multi_head_cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_mask=None):
    q = x @ W_q.T
    k, v = (memory @ torch.cat([W_k, W_v]).T).split(memory.size(-1), dim=2)
    mask = None if memory_mask is None else memory_mask[:, None, None, :]
    y = scaled_dot_product_attention(_heads(q, num_heads), _heads(k, num_heads), _heads(v, num_heads), mask)
    return _concat(y) @ W_o.T
