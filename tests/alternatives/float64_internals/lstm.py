"""A correct `lstm` with float64 internals: inputs cast to float64 once, the whole recurrence computed there (gates as
b + h @ W_hh.T + x_t @ W_ih.T via torch.addmm, split with unbind on a (B, 4, H) view), results cast back to the
input's dtype at the end."""
from __future__ import annotations

import torch


def _step64(x_t, h, c, W_ih, W_hh, b):
    gates = torch.addmm(torch.addmm(b, h, W_hh.T), x_t, W_ih.T)  # (B, 4H)
    i, f, g, o = gates.view(gates.shape[0], 4, -1).unbind(1)  # PyTorch's order i, f, g, o
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def lstm_step(x_t, h_prev, c_prev, W_ih, W_hh, b):
    h, c = _step64(*(a.double() for a in (x_t, h_prev, c_prev, W_ih, W_hh, b)))
    return h.to(h_prev.dtype), c.to(c_prev.dtype)


def lstm_forward(x, h0, c0, W_ih, W_hh, b):
    x, h, c, W_ih, W_hh, b = (a.double() for a in (x, h0, c0, W_ih, W_hh, b))
    hs = []
    for t in range(x.shape[1]):
        h, c = _step64(x[:, t], h, c, W_ih, W_hh, b)
        hs.append(h)
    return torch.stack(hs, 1).to(h0.dtype), (h.to(h0.dtype), c.to(c0.dtype))
