"""A second, independent `transformer` in the minGPT/nanoGPT style (written from scratch to the student API, whose
state-dict names it keeps): the residual stream as `x = x + sublayer(norm(x))`, queries, keys and values from one
fused projection (x @ cat of the three weights, split), the attention scale applied to the scores, a GELU module
computing the exact 0.5 x (1 + erf(x / sqrt 2)), LayerNorm as weight * (x - mu) * rsqrt(var + eps) + bias, GPT-2's
initialisation (normal(0, 0.02), residual projections scaled by 1/sqrt(2 * layers)) applied through `apply`, and
generate on a (1, T) batch with topk-based top-k assigning -inf in place (ties kept)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = (x - mu).pow(2).mean(-1, keepdim=True)
        return self.weight * (x - mu) * torch.rsqrt(var + self.eps) + self.bias


class GELU(nn.Module):
    """The exact GELU; no parameters, so nothing in the state dict."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.act = GELU()
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.w2(self.act(self.w1(x)))


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, causal: bool = True):
        super().__init__()
        assert d_model % num_heads == 0
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        self.n_head, self.n_embd, self.causal = num_heads, d_model, causal

    def forward(self, x):
        B, T, C = x.size()
        qkv = F.linear(x, torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]))
        q, k, v = qkv.split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.causal:
            tril = torch.tril(torch.ones(T, T, device=x.device))
            att = att.masked_fill(tril == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.output_proj(y)


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm_first: bool = True, causal: bool = True):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, causal)
        self.ln2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm_first = norm_first

    def forward(self, x):
        if self.norm_first:
            x = x + self.attn(self.ln1(x))
            x = x + self.ffn(self.ln2(x))
        else:
            x = self.ln1(x + self.attn(x))
            x = self.ln2(x + self.ffn(x))
        return x


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.context_length = context_length
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.position_embeddings = nn.Embedding(context_length, d_model)
        self.layers = nn.ModuleList([TransformerBlock(d_model, num_heads, d_ff, norm_first) for _ in range(num_layers)])
        if norm_first:  # a post-LN model has no ln_final at all
            self.ln_final = LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith(("output_proj.weight", "w2.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * num_layers))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        b, t = idx.size()
        if t > self.context_length:
            raise ValueError(f"Cannot forward sequence of length {t}, context length is only {self.context_length}")
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.token_embeddings(idx) + self.position_embeddings(pos)
        for block in self.layers:
            x = block(x)
        if hasattr(self, "ln_final"):
            x = self.ln_final(x)
        return self.lm_head(x)


@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    idx = prompt.unsqueeze(0)
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= model.context_length else idx[:, -model.context_length:]
        logits = model(idx_cond)[:, -1, :]
        if temperature == 0:
            idx_next = torch.argmax(logits, dim=-1, keepdim=True)
        else:
            logits = logits / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx[0]
