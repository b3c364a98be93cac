"""A correct `transformer` with float64 internals: every module's forward casts its input to float64, runs `f64`
(its float64 computation, on float64 copies of its weights) and casts the result back to the input's dtype;
TransformerLM chains the blocks' `f64` so the whole model runs in float64 and rounds once, at the logits.
LayerNorm multiplies by rsqrt(var + eps); the GELU is x * Phi(x) with Phi from erfc; the causal mask adds -inf
above the diagonal; generate computes its probabilities in float64 with kthvalue-based top-k (ties kept)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn


def _w(layer: nn.Linear) -> torch.Tensor:
    return layer.weight.double()


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def f64(self, x):
        centred = x - x.mean(-1, keepdim=True)
        scale = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + self.eps)
        return centred * scale * self.weight.double() + self.bias.double()

    def forward(self, x):
        return self.f64(x.double()).to(x.dtype)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def f64(self, x):
        a = x @ _w(self.w1).T
        return (a * 0.5 * torch.erfc(-a / math.sqrt(2))) @ _w(self.w2).T  # Phi(a) = erfc(-a / sqrt 2) / 2

    def forward(self, x):
        return self.f64(x.double()).to(x.dtype)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, causal: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.causal = causal
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)

    def f64(self, x):
        B, T, d = x.shape
        dk = d // self.num_heads
        q, k, v = ((x @ _w(p).T).reshape(B, T, self.num_heads, dk).permute(0, 2, 1, 3)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-1, -2) / math.sqrt(dk)  # (B, h, T, T)
        if self.causal:
            above = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            scores = scores + torch.zeros(T, T, dtype=scores.dtype, device=x.device).masked_fill(above, -math.inf)
        y = torch.softmax(scores, -1) @ v  # (B, h, T, dk)
        return y.permute(0, 2, 1, 3).reshape(B, T, d) @ _w(self.output_proj).T

    def forward(self, x):
        return self.f64(x.double()).to(x.dtype)


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm_first: bool = True, causal: bool = True):
        super().__init__()
        self.norm_first = norm_first
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, causal)
        self.ln2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)

    def f64(self, x):
        if self.norm_first:
            x = x + self.attn.f64(self.ln1.f64(x))
            return x + self.ffn.f64(self.ln2.f64(x))
        x = self.ln1.f64(x + self.attn.f64(x))
        return self.ln2.f64(x + self.ffn.f64(x))

    def forward(self, x):
        return self.f64(x.double()).to(x.dtype)


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.context_length = context_length
        self.norm_first = norm_first
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.position_embeddings = nn.Embedding(context_length, d_model)
        self.layers = nn.ModuleList(TransformerBlock(d_model, num_heads, d_ff, norm_first) for _ in range(num_layers))
        if norm_first:
            self.ln_final = LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.02)

    def forward(self, ids):
        T = ids.shape[-1]
        if T > self.context_length:
            raise ValueError(f"the context holds {self.context_length} tokens, got {T}")
        x = self.token_embeddings.weight.double()[ids] + self.position_embeddings.weight.double()[:T]
        for layer in self.layers:
            x = layer.f64(x)
        if self.norm_first:
            x = self.ln_final.f64(x)
        return (x @ _w(self.lm_head).T).to(self.lm_head.weight.dtype)


@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    out = list(prompt.unbind())
    for _ in range(max_new_tokens):
        window = torch.stack(out[-model.context_length:])
        logits = model(window.unsqueeze(0))[0, -1]
        if temperature == 0:
            out.append(logits.argmax())
            continue
        scaled = logits.double() / temperature
        if top_k is not None and top_k < scaled.numel():
            kth = torch.kthvalue(scaled, scaled.numel() - top_k + 1).values  # the k-th largest
            scaled = scaled.masked_fill(scaled < kth, -math.inf)
        probs = torch.softmax(scaled, dim=-1).to(logits.dtype)
        out.append(torch.multinomial(probs, 1, generator=generator)[0])
    return torch.stack(out)
