"""A correct `rnn` with float64 internals: every function casts its inputs to float64, computes there (the step as
tanh(b_h + h @ W_hh.T + x_t @ W_xh.T) via torch.addmm) and casts its results back to the input's dtype; autograd
carries the gradients through the casts. The loss is F.cross_entropy of the model's logits in float64, cast back."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def _step64(x_t, h, W_xh, W_hh, b_h):
    return torch.tanh(torch.addmm(torch.addmm(b_h, h, W_hh.T), x_t, W_xh.T))


def rnn_step(x_t, h_prev, W_xh, W_hh, b_h):
    return _step64(*(a.double() for a in (x_t, h_prev, W_xh, W_hh, b_h))).to(h_prev.dtype)


def _forward64(x, h0, W_xh, W_hh, b_h):
    hs = [h0]
    for t in range(x.shape[1]):
        hs.append(_step64(x[:, t], hs[-1], W_xh, W_hh, b_h))
    return torch.stack(hs[1:], dim=1)


def rnn_forward(x, h0, W_xh, W_hh, b_h):
    hs = _forward64(*(a.double() for a in (x, h0, W_xh, W_hh, b_h))).to(x.dtype)
    return hs, hs[:, -1]


class RNNLM(nn.Module):
    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int):
        super().__init__()
        bound = 1 / d_hidden**0.5
        self.embedding = nn.Embedding(vocab_size, d_embed)
        self.W_xh = nn.Parameter(torch.empty(d_hidden, d_embed).uniform_(-bound, bound))
        self.W_hh = nn.Parameter(torch.empty(d_hidden, d_hidden).uniform_(-bound, bound))
        self.b_h = nn.Parameter(torch.empty(d_hidden).uniform_(-bound, bound))
        self.W_hy = nn.Parameter(torch.empty(vocab_size, d_hidden).uniform_(-bound, bound))
        self.b_y = nn.Parameter(torch.empty(vocab_size).uniform_(-bound, bound))

    def _logits64(self, ids, h0):
        B = ids.shape[0]
        h0 = torch.zeros(B, self.b_h.shape[0], dtype=torch.float64, device=ids.device) if h0 is None else h0.double()
        x = self.embedding.weight.double()[ids]
        hs = _forward64(x, h0, self.W_xh.double(), self.W_hh.double(), self.b_h.double())
        return hs @ self.W_hy.double().T + self.b_y.double(), hs[:, -1]

    def forward(self, ids, h0=None):
        logits, h_last = self._logits64(ids, h0)
        return logits.to(self.W_hy.dtype), h_last.to(self.W_hy.dtype)


def rnn_lm_loss(model: RNNLM, ids: torch.Tensor) -> torch.Tensor:
    logits, _ = model(ids)
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).double(), ids[:, 1:].flatten()).to(logits.dtype)
