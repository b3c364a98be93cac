"""Mistakes for component `transformer`: its modules with one classic mistake, recomputed with the reference
module's own weights."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import attention as attention_oracles


def layer_norm(m, x, eps: float, *, dims=(-1,), unbiased: bool = False, where: str = "inside"):
    """LayerNorm with `m`'s weight and bias and a mistake: other axes, unbiased variance, eps "outside" the
    sqrt or "missing"."""
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    std = {"inside": lambda: torch.sqrt(var + eps), "outside": lambda: torch.sqrt(var) + eps, "missing": lambda: torch.sqrt(var)}[where]()
    return (x - mean) / std * m.weight + m.bias


def feed_forward(m, x, activation: str):
    """FeedForward `m` with ReLU, the tanh approximation of GELU, its sigmoid approximation x * sigmoid(1.702 x), or no
    activation ("none")."""
    act = {"relu": F.relu, "tanh": lambda a: F.gelu(a, approximate="tanh"), "sigmoid": lambda a: a * torch.sigmoid(1.702 * a),
           "none": lambda a: a}[activation]
    return m.w2(act(m.w1(x)))


def attention(m, x, num_heads: int, mask: str, **mistake):
    """Self-attention with `m`'s projections, a causal mask of the given kind (oracles.attention.causal),
    and one of oracles.attention.mha's mistakes."""
    Ws = (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight, m.output_proj.weight)
    return attention_oracles.mha(x, x, *Ws, num_heads, attention_oracles.causal(x.shape[1], mask), **mistake)


def block(m, x, norm_first: bool, *, attn_residual: bool = True, ffn_residual: bool = True,
          normed_residual: bool = False, renorm: bool = False):
    """TransformerBlock `m` with a mistake. Pre-LN only: `normed_residual` carries ln(x) on the residual
    path; `renorm` also normalises each residual sum."""
    sublayers = ((m.ln1, m.attn, attn_residual), (m.ln2, m.ffn, ffn_residual))
    for ln, sublayer, residual in sublayers:
        if norm_first:
            normed = ln(x)
            x = (normed if normed_residual else x) * residual + sublayer(normed)
            x = ln(x) if renorm else x
        else:
            x = ln(x * residual + sublayer(x))
    return x


def language_model(m, ids, norm_first: bool, *, positions: str = "first", final_ln: bool = True, blocks_norm_first: bool | None = None):
    """TransformerLM `m` with a mistake: `positions` "first" T rows, "last" T rows, "reversed", or "none";
    no ln_final; blocks run with another norm_first."""
    T = ids.shape[1]
    table = m.position_embeddings.weight
    x = m.token_embeddings(ids) + {"first": table[:T], "last": table[-T:], "reversed": table[:T].flip(0), "none": 0}[positions]
    for layer in m.layers:
        x = block(layer, x, norm_first if blocks_norm_first is None else blocks_norm_first)
    if norm_first and final_ln:
        x = m.ln_final(x)
    return m.lm_head(x)
