"""A correct `backprop` in another style: log-sum-exp softmax exp(z - (m + log(sum(exp(z - m))))), cross-entropy
through logsumexp and a one-hot matrix, einsum for every linear map and its backward pass, tanh' as (1 - y)(1 + y),
and dE accumulated bincount-style, one np.bincount per embedding dimension."""
from __future__ import annotations

import numpy as np


def _logsumexp(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def softmax(z: np.ndarray) -> np.ndarray:
    return np.exp(z - _logsumexp(z))


def _one_hot(targets: np.ndarray, V: int, dtype) -> np.ndarray:
    return np.eye(V, dtype=dtype)[targets]


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    log_probs = logits - _logsumexp(logits)  # (N, V)
    picked = np.einsum("nv,nv->n", log_probs, _one_hot(targets, logits.shape[1], logits.dtype))
    return float(-picked.mean())


def cross_entropy_backward(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    N, V = logits.shape
    return (softmax(logits) - _one_hot(targets, V, logits.dtype)) / np.asarray(N, dtype=logits.dtype)


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("nd,hd->nh", x, W) + b


def linear_backward(dout: np.ndarray, x: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.einsum("nh,hd->nd", dout, W), np.einsum("nh,nd->hd", dout, x), np.einsum("nh->h", dout)


def tanh_backward(dout: np.ndarray, out: np.ndarray) -> np.ndarray:
    return dout * (1 - out) * (1 + out)


def ffnn_lm_forward(contexts: np.ndarray, params: dict[str, np.ndarray]):
    positions = [params["E"][contexts[:, j]] for j in range(contexts.shape[1])]  # n-1 arrays (N, d)
    e = np.concatenate(positions, axis=1)  # (N, (n-1)*d)
    h = np.tanh(linear_forward(e, params["W"], params["b"]))
    logits = linear_forward(h, params["U"], params["c"])
    return logits, {"contexts": contexts, "e": e, "h": h, "params": params}


def ffnn_lm_backward(dlogits: np.ndarray, cache) -> dict[str, np.ndarray]:
    p, contexts = cache["params"], cache["contexts"]
    dh, dU, dc = linear_backward(dlogits, cache["h"], p["U"])
    de, dW, db = linear_backward(tanh_backward(dh, cache["h"]), cache["e"], p["W"])
    V, d = p["E"].shape
    rows = de.reshape(-1, d)  # (N * (n-1), d), in the order of contexts.ravel()
    dE = np.stack([np.bincount(contexts.ravel(), weights=rows[:, j], minlength=V) for j in range(d)], axis=1)
    return {"E": dE.astype(p["E"].dtype), "W": dW, "b": db, "U": dU, "c": dc}


def ffnn_lm_loss_and_grads(contexts: np.ndarray, targets: np.ndarray, params: dict[str, np.ndarray]):
    logits, cache = ffnn_lm_forward(contexts, params)
    return cross_entropy(logits, targets), ffnn_lm_backward(cross_entropy_backward(logits, targets), cache)
