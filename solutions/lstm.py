"""Component `lstm`: a long short-term memory (LSTM) layer.

Conventions:
- Batch first: a sequence is (B, T, ...), one time step is (B, ...).
- A weight W of shape (d_out, d_in) maps x to x @ W.T (PyTorch's layout).
- The 4H rows of W_ih, W_hh and b hold the four gates in PyTorch's order
  i, f, g, o (input, forget, cell candidate, output), H rows each, so the
  weights of a torch.nn.LSTM layer can be used as they are. The lecture
  writes i, f, o, g: do not follow it here.
- Every function returns tensors of the dtype and device of its inputs
  (float32 and float64, CPU and CUDA) and never modifies its inputs in place.
Write the cell yourself with matmuls, torch.sigmoid and torch.tanh: PyTorch's
recurrent modules and kernels (RNN, RNNCell, GRU, GRUCell, LSTM, LSTMCell,
torch.lstm_cell and the torch._VF functions behind them) fail the component.
"""

from __future__ import annotations

import torch


def lstm_step(
    x_t: torch.Tensor,
    h_prev: torch.Tensor,
    c_prev: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One time step of an LSTM cell.

    x_t: (B, I) the inputs at this step; h_prev, c_prev: (B, H) the previous
    hidden and cell states; W_ih: (4H, I); W_hh: (4H, H); b: (4H,).
    The pre-activations gates = x_t @ W_ih.T + h_prev @ W_hh.T + b, (B, 4H),
    split into four (B, H) blocks along the last axis, in the order
    i, f, g, o (columns 0:H, H:2H, 2H:3H, 3H:4H). Then
        i, f, o = sigmoid of their blocks,   g = tanh of its block,
        c_t = f * c_prev + i * g,            h_t = o * tanh(c_t).
    Returns (h_t, c_t), both (B, H).
    """
    # BEGIN SOLUTION
    gates = x_t @ W_ih.T + h_prev @ W_hh.T + b  # (B, 4H)
    i, f, g, o = gates.chunk(4, dim=-1)  # 4 x (B, H), PyTorch's order
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c_t = f * c_prev + i * g  # (B, H)
    h_t = o * torch.tanh(c_t)  # (B, H)
    return h_t, c_t
    # END SOLUTION


def lstm_forward(
    x: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b: torch.Tensor,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run the LSTM over a whole sequence, one `lstm_step` per time step.

    x: (B, T, I) the inputs, T >= 1; h0, c0: (B, H) the initial hidden and
    cell states; W_ih, W_hh, b as in `lstm_step`.
    Returns (hs, (h_last, c_last)): hs: (B, T, H) with hs[:, t] the hidden
    state after reading x[:, t] (h0 itself is not included); h_last, c_last:
    (B, H) the hidden and cell states after the last step. This is what
    torch.nn.LSTM(batch_first=True) returns, without its leading layer axis.
    Loop over time in Python; gradients must flow back through every step.
    """
    # BEGIN SOLUTION
    h, c = h0, c0  # (B, H), (B, H)
    hs = []
    for t in range(x.shape[1]):
        h, c = lstm_step(x[:, t], h, c, W_ih, W_hh, b)  # (B, H), (B, H)
        hs.append(h)
    return torch.stack(hs, dim=1), (h, c)  # (B, T, H), ((B, H), (B, H))
    # END SOLUTION
