"""A correct `rnn` in another style: a fused step (one matmul of cat([x_t, h]) with cat([W_xh, W_hh], 1)), the input
projection x @ W_xh.T + b_h hoisted out of the time loop for all steps at once, the output layer by einsum, and the
loss as log_softmax gathered at the targets."""
from __future__ import annotations

import torch
import torch.nn as nn


def rnn_step(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(torch.cat([x_t, h_prev], -1) @ torch.cat([W_xh, W_hh], 1).T + b_h)


def rnn_forward(x, h0, W_xh, W_hh, b_h):
    projected = x @ W_xh.T + b_h  # (B, T, H): every step's input term in one matmul
    h, hs = h0, []
    for t in range(x.shape[1]):
        h = torch.tanh(projected[:, t] + h @ W_hh.T)
        hs.append(h)
    return torch.stack(hs, 1), h


class RNNLM(nn.Module):
    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_embed)

        def uniform(*shape):  # PyTorch's RNN initialisation, U(-1/sqrt(H), 1/sqrt(H))
            return nn.Parameter((torch.rand(shape) * 2 - 1) / d_hidden**0.5)

        self.W_xh, self.W_hh, self.b_h = uniform(d_hidden, d_embed), uniform(d_hidden, d_hidden), uniform(d_hidden)
        self.W_hy, self.b_y = uniform(vocab_size, d_hidden), uniform(vocab_size)

    def forward(self, ids, h0=None):
        if h0 is None:
            h0 = self.W_hh.new_zeros(ids.shape[0], self.W_hh.shape[0])
        hs, h_last = rnn_forward(self.embedding(ids), h0, self.W_xh, self.W_hh, self.b_h)
        return torch.einsum("bth,vh->btv", hs, self.W_hy) + self.b_y, h_last


def rnn_lm_loss(model: RNNLM, ids: torch.Tensor) -> torch.Tensor:
    logits, _ = model(ids)
    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
    return -log_probs.gather(-1, ids[:, 1:, None]).mean()
