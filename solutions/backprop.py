"""Component `backprop`: a feed-forward neural LM with every gradient by hand.

NumPy only: importing torch (or any other autodiff library) fails the component.
Conventions:
- Batch first. A weight W of shape (d_out, d_in) maps x to x @ W.T (PyTorch's layout).
- Every function returns arrays of the dtype of its float inputs (float32 in,
  float32 out; float64 in, float64 out) and never modifies its inputs in place.
"""

from __future__ import annotations

import numpy as np


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax along the last axis.

    z: (..., V) float array. Returns an array of the same shape and dtype whose
    rows (along the last axis) are non-negative and sum to 1. Must stay exact
    and finite for entries as large as |z| ~ 1e4 (no overflow, no NaN).
    """
    # BEGIN SOLUTION
    z = z - z.max(axis=-1, keepdims=True)  # largest entry becomes 0: exp cannot overflow
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
    # END SOLUTION


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean negative log-likelihood of the targets under softmax(logits).

    logits: (N, V) float; targets: (N,) int in [0, V).
    Returns (1/N) * sum over n of -log softmax(logits[n])[targets[n]] as a
    Python float. Must stay finite for |logits| ~ 1e4.
    """
    # BEGIN SOLUTION
    N = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)  # (N, V)
    logsumexp = np.log(np.exp(z).sum(axis=1))  # (N,)
    return float(np.mean(logsumexp - z[np.arange(N), targets]))
    # END SOLUTION


def cross_entropy_backward(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Gradient of `cross_entropy(logits, targets)` (the mean) w.r.t. logits.

    logits: (N, V) float; targets: (N,) int. Returns dlogits: (N, V), same dtype
    as logits.
    """
    # BEGIN SOLUTION
    N = logits.shape[0]
    dlogits = softmax(logits)  # (N, V), a new array
    dlogits[np.arange(N), targets] -= 1
    return dlogits / N
    # END SOLUTION


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Affine layer: x (N, D), W (H, D), b (H,) -> out (N, H) = x @ W.T + b."""
    # BEGIN SOLUTION
    return x @ W.T + b
    # END SOLUTION


def linear_backward(
    dout: np.ndarray, x: np.ndarray, W: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward pass of `linear_forward`.

    dout: (N, H) upstream gradient dL/dout; x: (N, D) and W: (H, D) as in the
    forward pass. Returns (dx, dW, db) = (dL/dx, dL/dW, dL/db) with shapes
    (N, D), (H, D), (H,).
    """
    # BEGIN SOLUTION
    dx = dout @ W  # (N, H) @ (H, D) -> (N, D)
    dW = dout.T @ x  # (H, N) @ (N, D) -> (H, D)
    db = dout.sum(axis=0)  # (H,)
    return dx, dW, db
    # END SOLUTION


def tanh_backward(dout: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Backward pass of out = tanh(a), given the output (not the input a).

    dout: upstream gradient dL/dout; out: tanh(a); both of the same shape.
    Returns dL/da, same shape.
    """
    # BEGIN SOLUTION
    return dout * (1 - out**2)
    # END SOLUTION


def ffnn_lm_forward(contexts: np.ndarray, params: dict[str, np.ndarray]):
    """Forward pass of the feed-forward LM of Bengio et al. (2003).

    contexts: (N, n-1) int, the ids of the n-1 previous tokens of each example.
    params: E (V, d), W (H, (n-1)*d), b (H,), U (V, H), c (V,).
        e = concat(E[contexts[:, 0]], ..., E[contexts[:, n-2]])   (N, (n-1)*d)
        h = tanh(e @ W.T + b)                                       (N, H)
        logits = h @ U.T + c                                        (N, V)
    Returns (logits, cache). The cache holds whatever `ffnn_lm_backward` needs
    (your choice); it is only ever passed back to your `ffnn_lm_backward`.
    """
    # BEGIN SOLUTION
    E, W, b, U, c = (params[k] for k in ("E", "W", "b", "U", "c"))
    N, m = contexts.shape  # m = n - 1 context positions
    e = E[contexts].reshape(N, m * E.shape[1])  # (N, m, d) -> (N, m*d), positions in order
    h = np.tanh(linear_forward(e, W, b))  # (N, H)
    logits = linear_forward(h, U, c)  # (N, V)
    cache = (contexts, e, h, E, W, U)
    return logits, cache
    # END SOLUTION


def ffnn_lm_backward(dlogits: np.ndarray, cache) -> dict[str, np.ndarray]:
    """Backward pass of `ffnn_lm_forward`.

    dlogits: (N, V) upstream gradient dL/dlogits; cache: as returned by
    `ffnn_lm_forward`. Returns a dict with the same keys, shapes and dtype as
    params (E, W, b, U, c), each the gradient of L w.r.t. that parameter. The
    gradient of E sums the contributions of every occurrence of an id in
    contexts (an id may repeat across rows and across positions).
    """
    # BEGIN SOLUTION
    contexts, e, h, E, W, U = cache
    dh, dU, dc = linear_backward(dlogits, h, U)  # (N, H), (V, H), (V,)
    da = tanh_backward(dh, h)  # (N, H), gradient w.r.t. the pre-activation
    de, dW, db = linear_backward(da, e, W)  # (N, m*d), (H, m*d), (H,)
    dE = np.zeros_like(E)
    np.add.at(dE, contexts, de.reshape(*contexts.shape, E.shape[1]))  # scatter-add (N, m, d) into (V, d)
    return {"E": dE, "W": dW, "b": db, "U": dU, "c": dc}
    # END SOLUTION


def ffnn_lm_loss_and_grads(
    contexts: np.ndarray, targets: np.ndarray, params: dict[str, np.ndarray]
) -> tuple[float, dict[str, np.ndarray]]:
    """Mean cross-entropy of the feed-forward LM and its gradients.

    contexts: (N, n-1) int; targets: (N,) int, the id of the token that follows
    each context; params as in `ffnn_lm_forward`. Returns (loss, grads): loss a
    Python float, grads a dict like params holding d loss / d parameter.
    """
    # BEGIN SOLUTION
    logits, cache = ffnn_lm_forward(contexts, params)
    loss = cross_entropy(logits, targets)
    grads = ffnn_lm_backward(cross_entropy_backward(logits, targets), cache)
    return loss, grads
    # END SOLUTION
