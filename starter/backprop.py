# Starter code generated from the reference solution by `autograder release`.
# Replace each `raise NotImplementedError` with your implementation.
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
    raise NotImplementedError("softmax is not implemented yet")


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean negative log-likelihood of the targets under softmax(logits).

    logits: (N, V) float; targets: (N,) int in [0, V).
    Returns (1/N) * sum over n of -log softmax(logits[n])[targets[n]] as a
    Python float. Must stay finite for |logits| ~ 1e4.
    """
    raise NotImplementedError("cross_entropy is not implemented yet")


def cross_entropy_backward(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Gradient of `cross_entropy(logits, targets)` (the mean) w.r.t. logits.

    logits: (N, V) float; targets: (N,) int. Returns dlogits: (N, V), same dtype
    as logits.
    """
    raise NotImplementedError("cross_entropy_backward is not implemented yet")


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Affine layer: x (N, D), W (H, D), b (H,) -> out (N, H) = x @ W.T + b."""
    raise NotImplementedError("linear_forward is not implemented yet")


def linear_backward(
    dout: np.ndarray, x: np.ndarray, W: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward pass of `linear_forward`.

    dout: (N, H) upstream gradient dL/dout; x: (N, D) and W: (H, D) as in the
    forward pass. Returns (dx, dW, db) = (dL/dx, dL/dW, dL/db) with shapes
    (N, D), (H, D), (H,).
    """
    raise NotImplementedError("linear_backward is not implemented yet")


def tanh_backward(dout: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Backward pass of out = tanh(a), given the output (not the input a).

    dout: upstream gradient dL/dout; out: tanh(a); both of the same shape.
    Returns dL/da, same shape.
    """
    raise NotImplementedError("tanh_backward is not implemented yet")


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
    raise NotImplementedError("ffnn_lm_forward is not implemented yet")


def ffnn_lm_backward(dlogits: np.ndarray, cache) -> dict[str, np.ndarray]:
    """Backward pass of `ffnn_lm_forward`.

    dlogits: (N, V) upstream gradient dL/dlogits; cache: as returned by
    `ffnn_lm_forward`. Returns a dict with the same keys, shapes and dtype as
    params (E, W, b, U, c), each the gradient of L w.r.t. that parameter. The
    gradient of E sums the contributions of every occurrence of an id in
    contexts (an id may repeat across rows and across positions).
    """
    raise NotImplementedError("ffnn_lm_backward is not implemented yet")


def ffnn_lm_loss_and_grads(
    contexts: np.ndarray, targets: np.ndarray, params: dict[str, np.ndarray]
) -> tuple[float, dict[str, np.ndarray]]:
    """Mean cross-entropy of the feed-forward LM and its gradients.

    contexts: (N, n-1) int; targets: (N,) int, the id of the token that follows
    each context; params as in `ffnn_lm_forward`. Returns (loss, grads): loss a
    Python float, grads a dict like params holding d loss / d parameter.
    """
    raise NotImplementedError("ffnn_lm_loss_and_grads is not implemented yet")
