"""Mistakes for component `rnn`: the recurrence with one classic mistake switched on."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def step(x_t, h, W_xh, W_hh, b_h, *, transpose: bool = True, bias: bool = True, tanh: bool = True):
    pre = x_t @ W_xh.T + h @ (W_hh.T if transpose else W_hh) + (b_h if bias else 0)
    return torch.tanh(pre) if tanh else pre


def forward(x, h0, W_xh, W_hh, b_h, *, use_h0: bool = True, shift: bool = False, **mistake):
    """hs with a mistake: h0 ignored, hs one step late (shift), or one of step's."""
    h = h0 if use_h0 else torch.zeros_like(h0)
    hs = [h] if shift else []
    for t in range(x.shape[1]):
        h = step(x[:, t], h, W_xh, W_hh, b_h, **mistake)
        hs.append(h)
    return torch.stack(hs[: x.shape[1]], dim=1)


def loss(logits, ids, *, mistake: str) -> float:
    """The mean cross-entropy with a mistake: the targets not shifted ("none") or shifted the wrong way ("back"),
    softmax applied to the logits first ("softmax"), or F.nll_loss of the raw logits ("nll")."""
    if mistake in ("softmax", "nll"):
        scores, targets = logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)
        return (F.cross_entropy(scores.softmax(-1), targets) if mistake == "softmax" else F.nll_loss(scores, targets)).item()
    pairs = {"none": (logits, ids), "back": (logits[:, 1:], ids[:, :-1])}[mistake]
    return F.cross_entropy(pairs[0].reshape(-1, logits.shape[-1]), pairs[1].reshape(-1)).item()
