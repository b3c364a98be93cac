"""A correct `transformer` in the CS336 style: einsum with the Linear weights everywhere, heads as their own einsum
axis (no transposes), LayerNorm from torch.var_mean(x, -1, unbiased=False, keepdim=True), the causal mask as
masked_fill of the strict upper triangle, position embeddings read as weight[:T], CS336's truncated-normal
initialisation, and generate with sort-based top-k (the k-th value of the descending sort, ties kept)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        var, mean = torch.var_mean(x, -1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


def _linear(x, layer: nn.Linear):
    return torch.einsum("...i,oi->...o", x, layer.weight)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        a = _linear(x, self.w1)
        return _linear(a * 0.5 * (1 + torch.erf(a / math.sqrt(2))), self.w2)  # exact GELU, x * Phi(x)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, causal: bool = True):
        super().__init__()
        self.num_heads, self.causal = num_heads, causal
        self.q_proj, self.k_proj, self.v_proj, self.output_proj = (nn.Linear(d_model, d_model, bias=False) for _ in range(4))

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = (_linear(x, p).view(B, T, self.num_heads, -1) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = torch.einsum("bqhk,bshk->bhqs", q, k) / math.sqrt(q.shape[-1])
        if self.causal:
            later = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
            scores = scores.masked_fill(later, -math.inf)
        y = torch.einsum("bhqs,bshk->bqhk", torch.softmax(scores, -1), v)
        return _linear(y.reshape(B, T, d), self.output_proj)


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm_first: bool = True, causal: bool = True):
        super().__init__()
        self.norm_first = norm_first
        self.ln1, self.attn = LayerNorm(d_model), MultiHeadSelfAttention(d_model, num_heads, causal)
        self.ln2, self.ffn = LayerNorm(d_model), FeedForward(d_model, d_ff)

    def forward(self, x):
        if self.norm_first:
            x = x + self.attn(self.ln1(x))
            return x + self.ffn(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ffn(x))


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.context_length, self.norm_first = context_length, norm_first
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.position_embeddings = nn.Embedding(context_length, d_model)
        self.layers = nn.ModuleList([TransformerBlock(d_model, num_heads, d_ff, norm_first) for _ in range(num_layers)])
        if norm_first:
            self.ln_final = LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("embeddings.weight"):
                nn.init.trunc_normal_(p, std=1.0, a=-3.0, b=3.0)
            elif p.dim() == 2:
                std = math.sqrt(2 / sum(p.shape))
                nn.init.trunc_normal_(p, std=std, a=-3 * std, b=3 * std)

    def forward(self, ids):
        T = ids.shape[1]
        if T > self.context_length:
            raise ValueError(f"{T} tokens do not fit a context of {self.context_length}")
        x = self.token_embeddings(ids) + self.position_embeddings.weight[:T]
        for layer in self.layers:
            x = layer(x)
        if self.norm_first:
            x = self.ln_final(x)
        return _linear(x, self.lm_head)


@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    tokens = prompt.clone()
    for _ in range(max_new_tokens):
        logits = model(tokens[-model.context_length:][None])[0, -1]
        if temperature == 0:
            following = torch.argmax(logits, keepdim=True)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = torch.sort(logits, descending=True).values[min(top_k, logits.numel()) - 1]
                logits = torch.where(logits >= kth, logits, -math.inf)
            following = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
        tokens = torch.cat([tokens, following])
    return tokens
