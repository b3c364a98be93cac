"""A correct `lstm` as a CS231n-style cell: one pre-activation a = x_t @ Wx + h @ Wh + b with the weights transposed
once, the gates as explicit column slices a[:, 0:H], a[:, H:2H], ... (PyTorch's order i, f, g, o), a hand-written
numerically stable sigmoid, and lstm_forward calling lstm_step step by step into a preallocated hs."""
from __future__ import annotations

import torch


def _sigmoid(a: torch.Tensor) -> torch.Tensor:
    """1 / (1 + e^-a) for a >= 0 and e^a / (1 + e^a) below. Each branch sees only its own half of a (clamped), so
    no exp overflows, not even in the branch where() discards, whose inf would turn the gradient into NaN."""
    e = torch.exp(a.clamp(max=0))
    return torch.where(a >= 0, 1 / (1 + torch.exp(-a.clamp(min=0))), e / (1 + e))


def lstm_step(x_t, h_prev, c_prev, W_ih, W_hh, b):
    H = h_prev.shape[1]
    Wx, Wh = W_ih.t(), W_hh.t()  # (I, 4H), (H, 4H)
    a = x_t.mm(Wx) + h_prev.mm(Wh) + b  # (B, 4H)
    i = _sigmoid(a[:, 0:H])
    f = _sigmoid(a[:, H:2 * H])
    g = torch.tanh(a[:, 2 * H:3 * H])
    o = _sigmoid(a[:, 3 * H:4 * H])
    next_c = f * c_prev + i * g
    next_h = o * torch.tanh(next_c)
    return next_h, next_c


def lstm_forward(x, h0, c0, W_ih, W_hh, b):
    B, T, _ = x.shape
    hs = h0.new_zeros(B, T, h0.shape[1])
    h, c = h0, c0
    for t in range(T):
        h, c = lstm_step(x[:, t, :], h, c, W_ih, W_hh, b)
        hs[:, t, :] = h
    return hs, (h, c)
