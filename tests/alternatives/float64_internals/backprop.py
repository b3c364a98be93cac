"""A correct `backprop` with float64 internals: every function computes in float64 and casts its results back to
the input's dtype. Softmax divides by the row sum after subtracting the row max; cross-entropy is a logsumexp minus
the target's logit; dE is accumulated as a one-hot matrix product (one_hot(ids).T @ de); backward passes by einsum."""
from __future__ import annotations

import numpy as np


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def softmax(z: np.ndarray) -> np.ndarray:
    (w,) = _f64(z)
    e = np.exp(w - w.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(z.dtype)


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    (z,) = _f64(logits)
    m = z.max(axis=1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
    return float(np.mean(lse - np.take_along_axis(z, targets[:, None], axis=1)[:, 0]))


def cross_entropy_backward(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    (z,) = _f64(logits)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    probs = e / e.sum(axis=1, keepdims=True)
    probs[np.arange(len(targets)), targets] -= 1.0
    return (probs / len(targets)).astype(logits.dtype)


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    x64, W64, b64 = _f64(x, W, b)
    return (x64 @ W64.T + b64).astype(np.result_type(x, W, b))


def linear_backward(dout: np.ndarray, x: np.ndarray, W: np.ndarray):
    g, x64, W64 = _f64(dout, x, W)
    dx, dW, db = np.einsum("nh,hd->nd", g, W64), np.einsum("nh,nd->hd", g, x64), g.sum(axis=0)
    return dx.astype(x.dtype), dW.astype(W.dtype), db.astype(W.dtype)


def tanh_backward(dout: np.ndarray, out: np.ndarray) -> np.ndarray:
    g, y = _f64(dout, out)
    return (g * (1.0 - y * y)).astype(np.result_type(dout, out))


def _forward64(contexts: np.ndarray, params: dict[str, np.ndarray]):
    """The float64 logits and the cache of ffnn_lm_forward."""
    E, W, b, U, c = _f64(*(params[name] for name in "EWbUc"))
    N, m = contexts.shape
    e = E[contexts.reshape(-1)].reshape(N, m * E.shape[1])
    h = np.tanh(e @ W.T + b)
    dtypes = {name: params[name].dtype for name in "EWbUc"}
    return h @ U.T + c, (contexts, e, h, (E, W, U), dtypes)


def ffnn_lm_forward(contexts: np.ndarray, params: dict[str, np.ndarray]):
    logits, cache = _forward64(contexts, params)
    return logits.astype(np.result_type(*cache[-1].values())), cache


def ffnn_lm_backward(dlogits: np.ndarray, cache) -> dict[str, np.ndarray]:
    contexts, e, h, (E, W, U), dtypes = cache
    (g,) = _f64(dlogits)
    dU, dc = np.einsum("nv,nh->vh", g, h), g.sum(axis=0)
    da = np.einsum("nv,vh->nh", g, U) * (1.0 - h * h)
    dW, db = np.einsum("nh,nd->hd", da, e), da.sum(axis=0)
    de = (da @ W).reshape(-1, E.shape[1])  # (N * (n-1), d), one row per id of contexts.reshape(-1)
    one_hot = np.arange(E.shape[0]) == contexts.reshape(-1, 1)  # (N * (n-1), V)
    dE = one_hot.T.astype(np.float64) @ de
    return {name: grad.astype(dtypes[name]) for name, grad in zip("EWbUc", (dE, dW, db, dU, dc))}


def ffnn_lm_loss_and_grads(contexts: np.ndarray, targets: np.ndarray, params: dict[str, np.ndarray]):
    logits, cache = _forward64(contexts, params)  # the loss and its gradient from the unrounded logits
    return cross_entropy(logits, targets), ffnn_lm_backward(cross_entropy_backward(logits, targets), cache)
