"""lstm.py, fused: one matmul of cat([x_t, h]) with cat([W_ih, W_hh]) per step."""
import torch


def lstm_step(x_t, h_prev, c_prev, W_ih, W_hh, b):
    W = torch.cat([W_ih, W_hh], dim=1)  # (4H, I + H)
    return _cell(torch.cat([x_t, h_prev], dim=1) @ W.T + b, c_prev)


def lstm_forward(x, h0, c0, W_ih, W_hh, b):
    W = torch.cat([W_ih, W_hh], dim=1)  # (4H, I + H), built once
    h, c, hs = h0, c0, []
    for t in range(x.shape[1]):
        h, c = _cell(torch.cat([x[:, t], h], dim=1) @ W.T + b, c)
        hs.append(h)
    return torch.stack(hs, dim=1), (h, c)


def _cell(gates, c_prev):
    i, f, g, o = gates.chunk(4, dim=1)
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c
