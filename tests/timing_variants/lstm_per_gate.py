"""lstm.py, one gate at a time: four pairs of matmuls on the gates' row blocks of the weights."""
import torch


def lstm_step(x_t, h_prev, c_prev, W_ih, W_hh, b):
    H = h_prev.shape[1]
    i, f, g, o = (x_t @ W_ih[k * H:(k + 1) * H].T + h_prev @ W_hh[k * H:(k + 1) * H].T + b[k * H:(k + 1) * H] for k in range(4))
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def lstm_forward(x, h0, c0, W_ih, W_hh, b):
    h, c, hs = h0, c0, []
    for x_t in x.unbind(1):
        h, c = lstm_step(x_t, h, c, W_ih, W_hh, b)
        hs.append(h)
    return torch.stack(hs, dim=1), (h, c)
