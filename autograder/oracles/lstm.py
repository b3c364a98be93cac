"""Mistakes for component `lstm`: a cell and a layer with one classic mistake switched on."""
from __future__ import annotations

import torch


def step(x_t, h, c, W_ih, W_hh, b, *, order: str = "ifgo", cell_tanh: bool = True, swap_fg: bool = False, g_act=torch.tanh,
         old_cell: bool = False, forget_bias: float = 0.0, bias_times: int = 1):
    """`order`: the gate of each block, in the order read; `old_cell`: h from c_prev; `forget_bias`: added to f's
    pre-activation; `bias_times`: how many times b is added."""
    gates = x_t @ W_ih.T + h @ W_hh.T + bias_times * b
    blocks = dict(zip(order, gates.chunk(4, dim=-1)))
    i, f, g, o = torch.sigmoid(blocks["i"]), torch.sigmoid(blocks["f"] + forget_bias), g_act(blocks["g"]), torch.sigmoid(blocks["o"])
    c_new = f * g + i * c if swap_fg else f * c + i * g
    cell = c if old_cell else c_new
    return o * (torch.tanh(cell) if cell_tanh else cell), c_new


def forward(x, h0, c0, W_ih, W_hh, b, zero_state: bool = False, **mistake):
    h, c = (torch.zeros_like(h0), torch.zeros_like(c0)) if zero_state else (h0, c0)
    hs = []
    for t in range(x.shape[1]):
        h, c = step(x[:, t], h, c, W_ih, W_hh, b, **mistake)
        hs.append(h)
    return torch.stack(hs, dim=1)
