# Starter code generated from the reference solution by `autograder release`.
# Replace each `raise NotImplementedError` with your implementation.
"""Component `rnn`: an Elman recurrent network and a recurrent language model.

Conventions:
- Batch first: a sequence is (B, T, ...), one time step is (B, ...).
- A weight W of shape (d_out, d_in) maps x to x @ W.T (PyTorch's layout).
- Every function returns tensors of the dtype and device of its inputs
  (float32 and float64, CPU and CUDA) and never modifies its inputs in place.
- Autograd is allowed and expected: build the forward pass from tensor
  operations and gradients come for free.
Write the recurrence yourself with matmuls and torch.tanh: PyTorch's recurrent
modules and kernels (RNN, RNNCell, GRU, GRUCell, LSTM, LSTMCell and the
torch._VF functions behind them) fail the component.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def rnn_step(
    x_t: torch.Tensor,
    h_prev: torch.Tensor,
    W_xh: torch.Tensor,
    W_hh: torch.Tensor,
    b_h: torch.Tensor,
) -> torch.Tensor:
    """One time step of an Elman RNN.

    x_t: (B, I) the inputs at this step; h_prev: (B, H) the previous hidden
    state; W_xh: (H, I); W_hh: (H, H); b_h: (H,).
    Returns the new hidden state h_t: (B, H),
        h_t = tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h).
    """
    raise NotImplementedError("rnn_step is not implemented yet")


def rnn_forward(
    x: torch.Tensor,
    h0: torch.Tensor,
    W_xh: torch.Tensor,
    W_hh: torch.Tensor,
    b_h: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the Elman RNN over a whole sequence, one `rnn_step` per time step.

    x: (B, T, I) the inputs, T >= 1; h0: (B, H) the initial hidden state;
    W_xh, W_hh, b_h as in `rnn_step`.
    Returns (hs, h_last): hs: (B, T, H) with hs[:, t] the hidden state after
    reading x[:, t] (h0 itself is not included), and h_last: (B, H), the
    hidden state after the last step (equal to hs[:, -1]).
    Loop over time in Python; gradients must flow back through every step.
    """
    raise NotImplementedError("rnn_forward is not implemented yet")


class RNNLM(nn.Module):
    """A recurrent language model: embedding -> Elman RNN -> output layer.

    With V = vocab_size, E = d_embed, H = d_hidden, the parameters are, by
    exactly these names (the grader loads its own weights with
    load_state_dict(strict=True), so state_dict() must hold these keys only):
        embedding.weight  (V, E)   self.embedding = nn.Embedding(V, E)
        W_xh              (H, E)   nn.Parameter, input-to-hidden
        W_hh              (H, H)   nn.Parameter, hidden-to-hidden
        b_h               (H,)     nn.Parameter, hidden bias
        W_hy              (V, H)   nn.Parameter, hidden-to-output
        b_y               (V,)     nn.Parameter, output bias
    For ids (B, T): each id is embedded (B, T, E), the embeddings run through
    the Elman RNN of `rnn_forward` with W_xh, W_hh, b_h (hidden states
    hs: (B, T, H)), and the output layer maps each hidden state to
    logits = hs @ W_hy.T + b_y: (B, T, V). logits[:, t] scores the token that
    comes after ids[:, t], having read ids[:, :t + 1].
    """

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int):
        """Create the parameters listed in the class docstring.

        Any sensible random initialisation will do (for instance
        uniform(-1/sqrt(H), 1/sqrt(H)) for the RNN and output weights and
        biases, as PyTorch does); the grader loads its own weights.
        """
        super().__init__()
        raise NotImplementedError("RNNLM.__init__ is not implemented yet")

    def forward(
        self, ids: torch.Tensor, h0: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits for every position of a batch of token sequences.

        ids: (B, T) int64 token ids in [0, V), T >= 1; h0: (B, H) initial
        hidden state, or None for zeros of the parameters' dtype and device.
        Returns (logits, h_last): logits: (B, T, V), h_last: (B, H), the hidden
        state after the last position (pass it back as h0 to continue the
        sequence).
        """
        raise NotImplementedError("RNNLM.forward is not implemented yet")


def rnn_lm_loss(model: RNNLM, ids: torch.Tensor) -> torch.Tensor:
    """Teacher-forced language-modelling loss of `model` on `ids`.

    ids: (B, T) int64, T >= 2. Run the model on the whole batch (h0 = None)
    and return the mean cross-entropy, over all B * (T - 1) predictions, of
    the logits at positions 0 .. T-2 against the tokens at positions 1 .. T-1
    (ids[:, 1:]). Returns a scalar tensor that autograd can backpropagate.
    """
    raise NotImplementedError("rnn_lm_loss is not implemented yet")
