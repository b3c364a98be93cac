"""A correct `rnn` in another style: the step as tanh(b_h + x_t @ W_xh.T + h @ W_hh.T) with the bias first, the hidden
states written into a preallocated (B, T, H) tensor, the output layer by F.linear, and the loss as F.cross_entropy
on logits laid out (B, V, T - 1), the class axis second."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def rnn_step(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(b_h + torch.mm(x_t, W_xh.t()) + torch.mm(h_prev, W_hh.t()))


def rnn_forward(x, h0, W_xh, W_hh, b_h):
    B, T, _ = x.shape
    hs = x.new_empty(B, T, h0.shape[1])
    h = h0
    for t in range(T):
        h = rnn_step(x[:, t, :], h, W_xh, W_hh, b_h)
        hs[:, t, :] = h
    return hs, h


class RNNLM(nn.Module):
    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_embed)
        self.W_xh = nn.Parameter(torch.randn(d_hidden, d_embed) * d_embed**-0.5)
        self.W_hh = nn.Parameter(torch.eye(d_hidden) * 0.5)
        self.b_h = nn.Parameter(torch.zeros(d_hidden))
        self.W_hy = nn.Parameter(torch.randn(vocab_size, d_hidden) * d_hidden**-0.5)
        self.b_y = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, ids, h0=None):
        if h0 is None:
            h0 = torch.zeros(ids.size(0), self.b_h.size(0), dtype=self.b_h.dtype, device=self.b_h.device)
        hs, h_last = rnn_forward(self.embedding(ids), h0, self.W_xh, self.W_hh, self.b_h)
        return F.linear(hs, self.W_hy, self.b_y), h_last


def rnn_lm_loss(model: RNNLM, ids: torch.Tensor) -> torch.Tensor:
    logits, _ = model(ids)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:])
