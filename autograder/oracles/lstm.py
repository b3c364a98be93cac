"""Mistakes for component `lstm`: a cell and a layer with one classic mistake switched on."""
from __future__ import annotations

import torch


def step(x_t, h, c, W_ih, W_hh, b, *, order: str = "ifgo", cell_tanh: bool = True, swap_fg: bool = False, g_act=torch.tanh):
    gates = x_t @ W_ih.T + h @ W_hh.T + b
    blocks = dict(zip(order, gates.chunk(4, dim=-1)))
    i, f, g, o = torch.sigmoid(blocks["i"]), torch.sigmoid(blocks["f"]), g_act(blocks["g"]), torch.sigmoid(blocks["o"])
    c = f * g + i * c if swap_fg else f * c + i * g
    return o * (torch.tanh(c) if cell_tanh else c), c


def forward(x, h0, c0, W_ih, W_hh, b, zero_state: bool = False, **mistake):
    h, c = (torch.zeros_like(h0), torch.zeros_like(c0)) if zero_state else (h0, c0)
    hs = []
    for t in range(x.shape[1]):
        h, c = step(x[:, t], h, c, W_ih, W_hh, b, **mistake)
        hs.append(h)
    return torch.stack(hs, dim=1)
