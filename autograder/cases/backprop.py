"""Cases for component `backprop` (backprop.py).

Forward values come from the reference; gradients from torch autograd on the
same inputs. Float32 inputs are graded against the answer computed in float64,
within what float32 rounding allows (rounding.rounded).
"""
from __future__ import annotations

import math

import numpy as np

from ..judge import type_name
from ..rounding import exact, rounded
from . import check
from .common import with_layout

USES = ("numpy",)  # numpy arrays only: its workers forbid torch, and its checks need none in the grader
FILE = "backprop.py"  # the student API's file that holds this component: the rubric and submissions know it from here

PARAM_KEYS = ("E", "W", "b", "U", "c")
# What makes softmax and the loss NaN or Inf, said in place of the judge's default (overflow alone).
EXP = ("A large logit overflows exp to inf (and inf / inf is NaN), and a row whose exps all underflow to 0 gives "
       "0 / 0 = NaN or log(0) = -inf: subtract each row's max first, and take log-probabilities as z - logsumexp(z).")
LAYOUT = ("W is in PyTorch's layout (d_out, d_in) = (H, D): out = x @ W.T + b, dx = dout @ W, dW = dout.T @ x. Formulas "
          "for a (D, H) weight (cs231n's layout: x @ W, dx = dout @ W.T, dW = x.T @ dout) fit only square shapes.")


# ---- inputs ------------------------------------------------------------------


def random_logits(rng: np.random.Generator, shape, scale: float = 1.0, dtype: str = "float64") -> np.ndarray:
    """Normal logits; with scale > 1, every third row is shifted by +scale or -scale in turn
    (exp overflows or underflows for every entry unless the max is subtracted) and every
    third row is spread over ~scale (most probabilities underflow to exactly 0)."""
    z = rng.normal(scale=2.0, size=tuple(shape))
    if scale > 1:
        rows = z.reshape(-1, z.shape[-1])  # a view: edits land in z
        shifted = rows[1::3]
        shifted += scale * np.where(np.arange(len(shifted)) % 2 == 0, 1.0, -1.0)[:, None]
        rows[2::3] *= scale / 2
    return z.astype(dtype)


def random_targets(rng: np.random.Generator, logits: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Random targets, except that with scale > 1 the spread rows (see random_logits) target
    their smallest logit, whose probability underflows to 0: log(softmax) then gives inf."""
    targets = rng.integers(logits.shape[1], size=logits.shape[0])
    if scale > 1:
        targets[2::3] = logits[2::3].argmin(axis=1)
    return targets


def ffnn_params(rng: np.random.Generator, vocab: int, d: int, n_ctx: int, hidden: int, dtype: str = "float64") -> dict:
    """Weights scaled by 1/sqrt(fan_in) so tanh is not saturated and every gradient matters."""
    shapes = {"E": (vocab, d), "W": (hidden, n_ctx * d), "b": (hidden,), "U": (vocab, hidden), "c": (vocab,)}
    return {k: rng.normal(scale=1 / math.sqrt(s[-1]) if len(s) == 2 else 0.5, size=s).astype(dtype) for k, s in shapes.items()}


def repeating_contexts(rng: np.random.Generator, batch: int, n_ctx: int, vocab: int) -> np.ndarray:
    """Ids from a window of 3, so they repeat across rows and within rows; row 0 repeats one
    id at every position and row 1 at its first and last positions."""
    low = int(rng.integers(0, vocab - 2))
    contexts = rng.integers(low, low + 3, size=(batch, n_ctx))
    contexts[0] = contexts[0, 0]
    contexts[1, -1] = contexts[1, 0]
    return contexts


# ---- shared checks ---------------------------------------------------------------


def _parts(t, got, count: int, what: str) -> tuple:
    """A function that returns several values must return a tuple (or list) of exactly that many."""
    if not isinstance(got, (tuple, list)) or len(got) != count:
        t.fail(f"{what}: expected a tuple of {count} values, got {type_name(got)}"
               + (f" of length {len(got)}." if isinstance(got, (tuple, list)) else "."))
    return tuple(got)


def sizes(batch: int, vocab: int) -> dict:
    """The sizes a loss is averaged over, named for the general diagnostics (a ratio of one of them is a wrong mean)."""
    return {"N, the batch size": batch, "V, the vocabulary size": vocab}


def _check_softmax(t, z: np.ndarray) -> None:
    want = t.expect(lambda ref: rounded(ref.backprop.softmax, z))
    t.close(t.student.backprop.softmax(z), want, f"softmax(z) for z of shape {z.shape} and dtype {z.dtype}", nonfinite=EXP, hints={
        "softmax taken along axis 0 instead of the last axis": lambda ref: ref.oracles.backprop.softmax_along(z, "first"),
        "normalised over the whole array instead of along the last axis": lambda ref: ref.oracles.backprop.softmax_along(z, "all"),
        "the max is not subtracted before exp, so exp overflows or underflows": lambda ref: ref.oracles.backprop.naive_softmax(z),
        "the max of the whole array is subtracted (np.max(z)), not each row's: a row far below it underflows to 0 / 0 = NaN; "
        "subtract z.max(axis=-1, keepdims=True)": lambda ref: ref.oracles.backprop.global_max_softmax(z),
    })


def _check_cross_entropy_backward(t, logits: np.ndarray, targets: np.ndarray) -> None:
    n = len(logits)
    want = t.expect(lambda ref: rounded(ref.oracles.backprop.cross_entropy_grad, logits, targets))
    got = t.student.backprop.cross_entropy_backward(logits, targets)
    wrong = lambda **mistake: lambda ref: ref.oracles.backprop.cross_entropy_backward(logits, targets, **mistake)  # noqa: E731
    t.close(got, want, f"cross_entropy_backward(logits, targets) for logits of shape {logits.shape} and dtype {logits.dtype}",
            dims=sizes(*logits.shape), nonfinite=EXP, hints={
        "not divided by N: the gradient of the summed loss, not the mean": lambda ref: exact(want) * n,
        "the one-hot of the targets is not subtracted from the softmax": wrong(one_hot=False),
        "the sign is flipped (one-hot minus softmax instead of softmax minus one-hot)": lambda ref: -exact(want),
        "the one-hot is subtracted from the logits instead of their softmax": wrong(of="logits"),
        "the max is not subtracted before exp, so exp overflows or underflows": wrong(of="naive"),
    })


def _check_linear_backward(t, dout: np.ndarray, x: np.ndarray, W: np.ndarray, b: np.ndarray) -> None:
    dx, dW, db = t.expect(lambda ref: rounded(ref.oracles.backprop.linear_grads, dout, x, W, b))
    what = f"linear_backward(dout, x, W) with dout {dout.shape}, x {x.shape}, W {W.shape} ({x.dtype})"
    got = _parts(t, with_layout(t, lambda: t.student.backprop.linear_backward(dout, x, W), what, LAYOUT), 3, what)
    t.close_each("the gradients", [
        t.part("dx", got[0], dx, f"dx of {what}", hints={
            "dx is transposed: W.T @ dout.T has shape (D, N), dx has the shape of x": lambda ref: exact(dx).T,
        }),
        t.part("dW", got[1], dW, f"dW of {what}", hints={
            "dW is transposed: x.T @ dout has shape (D, H), dW has the shape of W (H, D) = dout.T @ x": lambda ref: exact(dW).T,
            "dW is averaged over the batch instead of summed": lambda ref: exact(dW) / len(x),
        }),
        t.part("db", got[2], db, f"db of {what}", hints={
            "db is the mean over the batch instead of the sum": lambda ref: exact(db) / len(x),
            "db is not summed over the batch (b is broadcast over the batch, so its gradient sums over it)":
                lambda ref: ref.oracles.backprop.bias_grad(dout, mistake="none"),
            "db is summed over the wrong axis (axis 1 instead of the batch axis 0)":
                lambda ref: ref.oracles.backprop.bias_grad(dout, mistake="axis1"),
            "db keeps a batch axis of size 1 (keepdims=True, or ones((1, N)) @ dout): b has shape (H,), and so has db":
                lambda ref: exact(db)[None],
        }),
    ])


def _check_tanh_backward(t, dout: np.ndarray, a: np.ndarray) -> None:
    out = np.tanh(a).astype(a.dtype)
    want = t.expect(lambda ref: rounded(ref.oracles.backprop.tanh_grad, dout, a))
    wrong = lambda mistake: lambda ref: ref.oracles.backprop.tanh_backward(dout, out, mistake=mistake)  # noqa: E731
    t.close(t.student.backprop.tanh_backward(dout, out), want, f"tanh_backward(dout, out) for shape {a.shape} and dtype {a.dtype}", hints={
        "used the input instead of the output: `out` is already tanh(a), so the derivative is 1 - out**2": wrong("input"),
        "the upstream gradient dout is not multiplied in": wrong("no_dout"),
        "the square is missing: 1 - out instead of 1 - out**2": wrong("no_square"),
    })


def _forward(t, contexts: np.ndarray, params: dict) -> tuple:
    """The student's (logits, cache), with the logits checked: pairs every gradient check with values."""
    dtype = params["E"].dtype
    what = f"ffnn_lm_forward(contexts, params) with contexts {contexts.shape} and dtype {dtype}"
    logits, cache = _parts(t, t.student.backprop.ffnn_lm_forward(contexts, params), 2, what + " (logits, cache)")
    want = t.expect(lambda ref: rounded(lambda p: ref.backprop.ffnn_lm_forward(contexts, p)[0], params))
    wrong = lambda **mistake: lambda ref: ref.oracles.backprop.ffnn_logits(contexts, params, **mistake)  # noqa: E731
    t.close(logits, want, f"the logits of {what}", hints={
        "the context positions are concatenated in reverse order": wrong(concat="reversed"),
        "the embeddings are interleaved (stacked on a last axis, then flattened) instead of concatenated position by position":
            wrong(concat="interleaved"),
        "tanh is missing from the hidden layer": wrong(concat="plain", activation=False),
        "the embeddings of the context positions are stacked along axis 0 (np.concatenate's default) and reshaped, which mixes "
        "examples: concatenate E[contexts[:, j]] along axis 1, position by position": wrong(concat="stacked"),
    })
    return logits, cache


def _check_grads(t, got, want: dict, what: str, hints: dict | None = None) -> None:
    """A dict with exactly the keys of params, each gradient close to autograd; `hints` per key."""
    if not isinstance(got, dict):
        t.fail(f"{what}: expected a dict of gradients with keys {', '.join(PARAM_KEYS)}, got {type_name(got)}.")
    t.equal(set(got), set(PARAM_KEYS), f"{what}: the keys of the gradient dict (exactly {', '.join(PARAM_KEYS)}, as in params)", hints={
        "the keys carry a d prefix (dE, dW, ...): use the names of the params themselves": lambda ref: {"d" + k for k in PARAM_KEYS},
    })
    parts = []
    for k in PARAM_KEYS:
        zero = {"the gradient is all zeros (is the backward pass computed at all?)": lambda ref, k=k: np.zeros_like(exact(want[k]))}
        parts.append(t.part(f"d{k}", got[k], want[k], f"{what}: the gradient of {k}", hints={**zero, **(hints or {}).get(k, {})}))
    t.close_each("the gradients", parts)


def _embedding_hints(contexts: np.ndarray, de, vocab: int) -> dict:
    """de: the (Rounded) gradient of the concatenated embeddings, which the wrong scatters start from."""
    oracle = lambda name, *args: lambda ref: getattr(ref.oracles.backprop, name)(contexts, exact(de), vocab, *args)  # noqa: E731
    return {"E": {
        "repeated ids overwrite instead of accumulating (dE[ids] += ... is buffered; use np.add.at)": oracle("scatter_overwriting"),
        "ids repeated across rows overwrite each other: a loop over positions with dE[ids] += ... still loses them (use np.add.at)":
            oracle("scatter_looping", 1),
        "ids repeated within one context overwrite each other: a loop over rows with dE[ids] += ... still loses them (use np.add.at)":
            oracle("scatter_looping", 0),
        "the gradient of the concatenation is split into positions in reverse order": oracle("scatter_reversed"),
    }}


def _check_ffnn_backward(t, contexts: np.ndarray, params: dict, dlogits: np.ndarray) -> None:
    """Student forward (logits checked), then backward on its own cache, against autograd."""
    _, cache = _forward(t, contexts, params)
    got = t.student.backprop.ffnn_lm_backward(dlogits, cache)
    _, want, de = t.expect(lambda ref: rounded(lambda p, up: ref.oracles.backprop.ffnn_backward(contexts, p, up), params, dlogits))
    n = len(contexts)
    hints = _embedding_hints(contexts, de, params["E"].shape[0]) | {
        "W": {"dW is transposed: it must have the shape of W": lambda ref: exact(want["W"]).T},
        "U": {"dU is transposed: it must have the shape of U": lambda ref: exact(want["U"]).T},
        "b": {"db is the mean over the batch instead of the sum": lambda ref: exact(want["b"]) / n, **_kept_batch_axis(want, "b")},
        "c": {"dc is the mean over the batch instead of the sum": lambda ref: exact(want["c"]) / n, **_kept_batch_axis(want, "c")},
    }
    _check_grads(t, got, want, f"ffnn_lm_backward(dlogits, cache) with contexts {contexts.shape}", hints)


def _kept_batch_axis(want: dict, key: str) -> dict:
    return {f"d{key} keeps a batch axis of size 1 (keepdims=True in linear_backward?): it has the shape of {key}":
            lambda ref: exact(want[key])[None]}


def _check_loss_and_grads(t, contexts: np.ndarray, targets: np.ndarray, params: dict) -> None:
    n, dtype = len(contexts), params["E"].dtype
    what = f"ffnn_lm_loss_and_grads(contexts, targets, params) with contexts {contexts.shape} and dtype {dtype}"
    loss, grads = _parts(t, t.student.backprop.ffnn_lm_loss_and_grads(contexts, targets, params), 2, what + " (loss, grads)")
    want_loss, want, de = t.expect(lambda ref: rounded(lambda p: ref.oracles.backprop.ffnn_loss_and_grads(contexts, targets, p), params))
    t.close(loss, want_loss, f"the loss of {what}", dims=sizes(n, params["E"].shape[0]), hints={
        "the loss is summed over the batch instead of averaged": lambda ref: exact(want_loss) * n,
    })
    summed = {k: {"the gradients are those of the summed loss (not divided by N)": lambda ref, k=k: exact(want[k]) * n} for k in PARAM_KEYS}
    summed["E"] |= _embedding_hints(contexts, de, params["E"].shape[0])["E"]
    for k in ("b", "c"):
        summed[k] |= _kept_batch_axis(want, k)
    _check_grads(t, grads, want, f"the grads of {what}", summed)


def _clamped_log_hints(logits: np.ndarray, targets: np.ndarray) -> dict:
    """-log p with an epsilon, for the epsilons code uses: log(p + eps), or log(max(p, eps)) (np.clip's lower end). Where
    p underflows to 0 for large logits each term stops at -log(eps), far below the exact loss."""
    hints = {}
    for exponent in range(4, 21):
        e = f"1e-{exponent}"
        for form, code in (("add", f"log(p + {e}), or a clip of p at {e},"), ("max", f"a clip of p at {e} (log(max(p, {e})))")):
            hints[f"an epsilon in the log, {code} caps each -log p at {exponent * math.log(10):.4g}, far below the exact loss "
                  "where p underflows to 0: compute log p = z - logsumexp(z), which needs no epsilon"] = (
                lambda ref, eps=10.0**-exponent, form=form: ref.oracles.backprop.clamped_loss(logits, targets, eps, form))
    return hints


# ---- checks ---------------------------------------------------------------------


@check("backprop.softmax")
def softmax(t, shape: tuple = (5, 7), dtype: str = "float64", scale: float = 1.0):
    """Along the last axis of a 2-D or 3-D input; with scale ~1e4, exact and finite."""
    _check_softmax(t, random_logits(t.rng, shape, scale, dtype))


@check("backprop.cross_entropy")
def cross_entropy(t, batch: int = 6, vocab: int = 7, dtype: str = "float64", scale: float = 1.0):
    logits = random_logits(t.rng, (batch, vocab), scale, dtype)
    targets = random_targets(t.rng, logits, scale)
    want = t.expect(lambda ref: rounded(ref.backprop.cross_entropy, logits, targets))
    what = f"cross_entropy(logits, targets) for logits of shape {logits.shape} and dtype {logits.dtype}" + (
        f" with |logits| up to ~{scale:g}" if scale > 1 else "")
    t.close(t.student.backprop.cross_entropy(logits, targets), want, what, dims=sizes(batch, vocab), nonfinite=EXP, hints={
        "the sum over the batch instead of the mean": lambda ref: exact(want) * batch,
        "log base 2 instead of the natural log": lambda ref: exact(want) / math.log(2),
        "log base 10 instead of the natural log": lambda ref: exact(want) / math.log(10),
        "the minus sign is missing (log-likelihood instead of negative log-likelihood)": lambda ref: -exact(want),
        **_clamped_log_hints(logits, targets),
        "log(softmax(z)) underflows to log(0) = -inf: use z - logsumexp(z)": lambda ref: ref.oracles.backprop.log_softmax_loss(logits, targets),
        "the max is not subtracted inside the log-sum-exp, so exp overflows or underflows":
            lambda ref: ref.oracles.backprop.naive_loss(logits, targets),
        "averaged over all N * V entries (the mean of one-hot times log-probabilities), which is V times too small: "
        "the mean is over the N examples only": lambda ref: exact(want) / vocab,
    })


@check("backprop.cross_entropy_backward")
def cross_entropy_backward(t, batch: int = 6, vocab: int = 7, dtype: str = "float64", scale: float = 1.0):
    logits = random_logits(t.rng, (batch, vocab), scale, dtype)
    _check_cross_entropy_backward(t, logits, random_targets(t.rng, logits, scale))


@check("backprop.linear")
def linear(t, batch: int = 5, d_in: int = 3, d_out: int = 4, dtype: str = "float64"):
    """Non-square shapes: a missing or extra transpose shows as a wrong shape."""
    x, W, b, dout = (t.rng.normal(size=s).astype(dtype) for s in [(batch, d_in), (d_out, d_in), (d_out,), (batch, d_out)])
    want = t.expect(lambda ref: rounded(ref.backprop.linear_forward, x, W, b))
    what = f"linear_forward(x, W, b) with x {x.shape}, W {W.shape}, b {b.shape}"
    t.close(with_layout(t, lambda: t.student.backprop.linear_forward(x, W, b), what, LAYOUT), want, what, hints={
        "the bias is missing": lambda ref: ref.backprop.linear_forward(x, W, np.zeros_like(b)),
    })
    _check_linear_backward(t, dout, x, W, b)


@check("backprop.tanh_backward")
def tanh_backward(t, shape: tuple = (4, 6), dtype: str = "float64"):
    _check_tanh_backward(t, t.rng.normal(size=tuple(shape)).astype(dtype), t.rng.normal(scale=1.5, size=tuple(shape)).astype(dtype))


@check("backprop.ffnn_forward")
def ffnn_forward(t, batch: int = 7, n_ctx: int = 3, vocab: int = 11, d: int = 4, hidden: int = 6, dtype: str = "float64"):
    params = ffnn_params(t.rng, vocab, d, n_ctx, hidden, dtype)
    _forward(t, t.rng.integers(vocab, size=(batch, n_ctx)), params)


@check("backprop.ffnn_backward")
def ffnn_backward(t, batch: int = 7, n_ctx: int = 3, vocab: int = 11, d: int = 4, hidden: int = 6, dtype: str = "float64"):
    """The whole backward pass against autograd, for a random upstream gradient of the logits."""
    params = ffnn_params(t.rng, vocab, d, n_ctx, hidden, dtype)
    contexts = t.rng.integers(vocab, size=(batch, n_ctx))
    _check_ffnn_backward(t, contexts, params, t.rng.normal(size=(batch, vocab)).astype(dtype))


@check("backprop.embedding_repeats")
def embedding_repeats(t, batch: int = 6, n_ctx: int = 3, vocab: int = 9, d: int = 3, hidden: int = 5):
    """Ids repeated within and across rows: dE must add up every occurrence."""
    params = ffnn_params(t.rng, vocab, d, n_ctx, hidden)
    contexts = repeating_contexts(t.rng, batch, n_ctx, vocab)
    _check_ffnn_backward(t, contexts, params, t.rng.normal(size=(batch, vocab)))


@check("backprop.loss_and_grads")
def loss_and_grads(t, batch: int = 8, n_ctx: int = 2, vocab: int = 10, d: int = 3, hidden: int = 5, dtype: str = "float64"):
    params = ffnn_params(t.rng, vocab, d, n_ctx, hidden, dtype)
    contexts = t.rng.integers(vocab, size=(batch, n_ctx))
    _check_loss_and_grads(t, contexts, t.rng.integers(vocab, size=batch), params)


@check("backprop.dtypes")
def dtypes(t):
    """Float32 in, float32 out, for every function that returns an array."""
    f32 = "float32"
    _check_softmax(t, random_logits(t.rng, (4, 6), dtype=f32))
    logits = random_logits(t.rng, (5, 6), dtype=f32)
    _check_cross_entropy_backward(t, logits, random_targets(t.rng, logits))
    x, W, b, dout = (t.rng.normal(size=s).astype(f32) for s in [(5, 3), (4, 3), (4,), (5, 4)])
    _check_linear_backward(t, dout, x, W, b)
    _check_tanh_backward(t, t.rng.normal(size=(3, 4)).astype(f32), t.rng.normal(size=(3, 4)).astype(f32))
    params = ffnn_params(t.rng, 9, 3, 2, 5, f32)
    contexts = t.rng.integers(9, size=(6, 2))
    _check_ffnn_backward(t, contexts, params, t.rng.normal(size=(6, 9)).astype(f32))
    _check_loss_and_grads(t, contexts, t.rng.integers(9, size=6), params)


@check("backprop.inputs_unchanged")
def inputs_unchanged(t):
    """Every function that takes arrays must leave them as they were."""
    params = ffnn_params(t.rng, 9, 3, 2, 5)
    contexts, targets = t.rng.integers(9, size=(6, 2)), t.rng.integers(9, size=6)
    logits = random_logits(t.rng, (6, 9))
    x, W, b, dout = (t.rng.normal(size=s) for s in [(6, 3), (4, 3), (4,), (6, 4)])
    _unchanged(t, "softmax", z=logits)
    _unchanged(t, "cross_entropy", logits=logits, targets=targets)
    _unchanged(t, "cross_entropy_backward", logits=logits, targets=targets)
    _unchanged(t, "linear_forward", x=x, W=W, b=b)
    _unchanged(t, "linear_backward", dout=dout, x=x, W=W)
    _unchanged(t, "tanh_backward", dout=dout, out=np.tanh(dout))
    _, cache = _parts(t, _unchanged(t, "ffnn_lm_forward", contexts=contexts, params=params), 2, "ffnn_lm_forward (logits, cache)")
    _unchanged(t, "ffnn_lm_backward", cache, dlogits=logits)
    _unchanged(t, "ffnn_lm_loss_and_grads", contexts=contexts, targets=targets, params=params)


def _unchanged(t, fn: str, *own, **inputs):
    """Call `fn(*inputs, *own)` with `inputs` placed in the worker, then fail if any of them changed.
    `own` are passed as they are and not checked (the cache belongs to the student's code)."""
    handles = {name: t.student.put(value) for name, value in inputs.items()}
    result = getattr(t.student.backprop, fn)(*handles.values(), *own)
    for name, value in inputs.items():
        if not _same(t.student.value(handles[name]), value):
            t.fail(f"{fn} modified its argument `{name}` in place; it must leave its inputs unchanged "
                   "(compute into a new array, e.g. z = z - z.max(...) rather than z -= z.max(...)).")
    return result


def _same(a, b) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in b)
    return type(a) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
