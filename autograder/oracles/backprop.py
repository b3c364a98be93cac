"""Oracles and mistakes for component `backprop`: gradients by torch autograd, in the inputs' precision
(the cases wrap them in rounding.rounded), and the wrong answers of classic mistakes."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..cases.backprop import PARAM_KEYS


def grads(scalar_fn, *arrays) -> list[np.ndarray]:
    """d scalar_fn(*arrays) / d each array, by torch autograd in the arrays' precision."""
    xs = [torch.tensor(a, requires_grad=True) for a in arrays]
    scalar_fn(*xs).backward()
    return [x.grad.numpy() for x in xs]


def pullback(out: torch.Tensor, upstream: np.ndarray) -> torch.Tensor:
    """The scalar whose gradient w.r.t. `out` is `upstream`: backpropagates a random upstream gradient."""
    return (out * torch.from_numpy(upstream)).sum()


def cross_entropy_grad(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return grads(lambda z: F.cross_entropy(z, torch.from_numpy(targets)), logits)[0]


def linear_grads(dout: np.ndarray, x: np.ndarray, W: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return grads(lambda x, W, b: pullback(F.linear(x, W, b), dout), x, W, b)


def tanh_grad(dout: np.ndarray, a: np.ndarray) -> np.ndarray:
    return grads(lambda a: pullback(torch.tanh(a), dout), a)[0]


def ffnn(contexts: np.ndarray, params: dict, loss_of_logits) -> tuple[float, dict, np.ndarray]:
    """(loss, grads, de) of the FFNN-LM by torch autograd in the params' precision; de is the gradient of
    the concatenated embeddings (N, (n-1)*d), kept to build the wrong scatters of the hints."""
    p = {k: torch.tensor(params[k], requires_grad=True) for k in PARAM_KEYS}
    e = p["E"][torch.from_numpy(contexts)].reshape(len(contexts), -1)
    e.retain_grad()
    logits = torch.tanh(e @ p["W"].T + p["b"]) @ p["U"].T + p["c"]
    loss = loss_of_logits(logits)
    loss.backward()
    return loss.item(), {k: p[k].grad.numpy() for k in PARAM_KEYS}, e.grad.numpy()


def ffnn_backward(contexts: np.ndarray, params: dict, dlogits: np.ndarray) -> tuple[float, dict, np.ndarray]:
    return ffnn(contexts, params, lambda logits: pullback(logits, dlogits))


def ffnn_loss_and_grads(contexts: np.ndarray, targets: np.ndarray, params: dict) -> tuple[float, dict, np.ndarray]:
    return ffnn(contexts, params, lambda logits: F.cross_entropy(logits, torch.from_numpy(targets)))


# ---- wrong answers ----------------------------------------------------------------------------------


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """A stable softmax along any axis, for the wrong axes of the hints."""
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_along(z: np.ndarray, where: str) -> np.ndarray:
    """The softmax along axis 0 ("first") or over the whole array ("all") instead of the last axis."""
    if where == "first":
        return np.moveaxis(softmax(np.moveaxis(z, 0, -1)), -1, 0)
    return softmax(z.reshape(-1)).reshape(z.shape)


def naive_softmax(z: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)


def global_max_softmax(z: np.ndarray) -> np.ndarray:
    """exp(z - max over the whole array), normalised per row: rows far below the global max are 0 / 0."""
    with np.errstate(all="ignore"):
        e = np.exp(z - z.max())
        return e / e.sum(axis=-1, keepdims=True)


def log_softmax_loss(z: np.ndarray, targets: np.ndarray) -> float:
    """-mean log(softmax(z)[target]): a stable softmax, but its zeros give log(0) = -inf."""
    with np.errstate(all="ignore"):
        return float(-np.mean(np.log(softmax(z)[np.arange(len(z)), targets])))


def clamped_loss(z: np.ndarray, targets: np.ndarray, eps: float, form: str) -> float:
    """-mean log of the target's probability with an epsilon: log(p + eps) (form "add") or log(max(p, eps)) ("max")."""
    p = softmax(z.astype(np.float64))[np.arange(len(z)), targets]
    return float(-np.mean(np.log(p + eps if form == "add" else np.maximum(p, eps))))


def naive_loss(z: np.ndarray, targets: np.ndarray) -> float:
    """logsumexp without the max: exp overflows to inf or underflows to 0."""
    with np.errstate(all="ignore"):
        return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(z)), targets]))


def cross_entropy_backward(z: np.ndarray, targets: np.ndarray, *, one_hot: bool = True, of: str = "softmax") -> np.ndarray:
    """(softmax(z) - one_hot) / N with a mistake: the one-hot not subtracted, taken from the logits
    themselves (of="logits"), or a softmax without the max (of="naive")."""
    n, vocab = z.shape
    probs = {"softmax": softmax, "naive": naive_softmax, "logits": lambda z: z}[of](z.astype(np.float64))
    return (probs - np.eye(vocab)[targets] * one_hot) / n


def logits_from_embeddings(e: np.ndarray, params: dict, activation=np.tanh) -> np.ndarray:
    """The FFNN-LM from its concatenated embeddings on: wrong concatenations or activations plug in here."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    return activation(e @ p["W"].T + p["b"]) @ p["U"].T + p["c"]


def ffnn_logits(contexts: np.ndarray, params: dict, *, concat: str = "reversed", activation: bool = True) -> np.ndarray:
    """FFNN-LM logits with a mistake: the context positions concatenated in reverse order or interleaved, stacked
    along the batch axis before the reshape ("stacked", which mixes examples), or tanh left out."""
    E = params["E"].astype(np.float64)[contexts]  # (N, n-1, d)
    e = {"reversed": E[:, ::-1], "interleaved": E.transpose(0, 2, 1), "plain": E, "stacked": E.transpose(1, 0, 2)}[concat]
    e = e.reshape(len(contexts), -1)
    return logits_from_embeddings(e, params, np.tanh if activation else (lambda a: a))


def scatter_overwriting(contexts: np.ndarray, de: np.ndarray, vocab: int) -> np.ndarray:
    """dE[contexts] += de: buffered fancy indexing keeps one contribution per repeated id."""
    dE = np.zeros((vocab, de.shape[1] // contexts.shape[1]))
    dE[contexts] += de.reshape(*contexts.shape, -1)
    return dE


def scatter_looping(contexts: np.ndarray, de: np.ndarray, vocab: int, axis: int) -> np.ndarray:
    """A loop over one axis of contexts (0: rows, 1: positions) with a buffered dE[ids] += ... inside:
    repeats across the loop add up, repeats within one slice keep one contribution."""
    blocks = de.reshape(*contexts.shape, -1)
    dE = np.zeros((vocab, blocks.shape[2]))
    for i in range(contexts.shape[axis]):
        dE[np.take(contexts, i, axis)] += np.take(blocks, i, axis)
    return dE


def scatter_reversed(contexts: np.ndarray, de: np.ndarray, vocab: int) -> np.ndarray:
    """The gradient of the concatenation split into positions in reverse order."""
    dE = np.zeros((vocab, de.shape[1] // contexts.shape[1]))
    np.add.at(dE, contexts[:, ::-1], de.reshape(*contexts.shape, -1))
    return dE


def tanh_backward(dout: np.ndarray, out: np.ndarray, *, mistake: str) -> np.ndarray:
    """tanh's backward with a mistake: tanh applied to the output again ("input"), dout not multiplied in
    ("no_dout"), or the square left out ("no_square")."""
    return {"input": lambda: dout * (1 - np.tanh(out) ** 2), "no_dout": lambda: 1 - out**2, "no_square": lambda: dout * (1 - out)}[mistake]()


def bias_grad(dout: np.ndarray, *, mistake: str) -> np.ndarray:
    """db of a linear layer with a mistake: not summed over the batch ("none"), or summed over axis 1 ("axis1")."""
    return dout if mistake == "none" else dout.sum(axis=1)
