"""A correct `backprop` in the step-by-step manual-backprop style: every intermediate of the forward pass named
(emb, embcat, hpre, h, logits), softmax as counts times the reciprocal of their sum, cross-entropy from log_softmax,
its gradient by backpropagating through log_softmax (dz = dlogprobs - softmax * sum(dlogprobs)), and dE accumulated
with one np.add.at per context position."""
from __future__ import annotations

import numpy as np


def softmax(z: np.ndarray) -> np.ndarray:
    counts = np.exp(z - z.max(axis=-1, keepdims=True))
    return counts * (1.0 / counts.sum(axis=-1, keepdims=True))


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    logprobs = _log_softmax(logits)
    return float(-logprobs[np.arange(len(targets)), targets].mean())


def cross_entropy_backward(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    N = len(targets)
    dlogprobs = np.zeros_like(logits)
    dlogprobs[np.arange(N), targets] = -1.0 / N
    return dlogprobs - softmax(logits) * dlogprobs.sum(axis=1, keepdims=True)


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b + x.dot(W.T)


def linear_backward(dout: np.ndarray, x: np.ndarray, W: np.ndarray):
    return dout.dot(W), (x.T @ dout).T, dout.sum(axis=0)


def tanh_backward(dout: np.ndarray, out: np.ndarray) -> np.ndarray:
    return dout - dout * out**2


def ffnn_lm_forward(contexts: np.ndarray, params: dict[str, np.ndarray]):
    emb = params["E"][contexts]  # (N, n-1, d)
    embcat = emb.reshape(emb.shape[0], -1)  # (N, (n-1)*d)
    hpre = linear_forward(embcat, params["W"], params["b"])
    h = np.tanh(hpre)
    logits = linear_forward(h, params["U"], params["c"])
    return logits, (contexts, emb.shape, embcat, h, params)


def ffnn_lm_backward(dlogits: np.ndarray, cache) -> dict[str, np.ndarray]:
    contexts, emb_shape, embcat, h, params = cache
    dh, dU, dc = linear_backward(dlogits, h, params["U"])
    dhpre = tanh_backward(dh, h)
    dembcat, dW, db = linear_backward(dhpre, embcat, params["W"])
    demb = dembcat.reshape(emb_shape)
    dE = np.zeros_like(params["E"])
    for j in range(contexts.shape[1]):
        np.add.at(dE, contexts[:, j], demb[:, j])
    return {"E": dE, "W": dW, "b": db, "U": dU, "c": dc}


def ffnn_lm_loss_and_grads(contexts: np.ndarray, targets: np.ndarray, params: dict[str, np.ndarray]):
    logits, cache = ffnn_lm_forward(contexts, params)
    loss = cross_entropy(logits, targets)
    return loss, ffnn_lm_backward(cross_entropy_backward(logits, targets), cache)
