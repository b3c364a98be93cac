"""Plausible backprop bugs lose points in `backprop` only, in the cases meant to catch them."""
import pytest
from conftest import assert_caught_in_component_only

SOFTMAX = (
    "z = z - z.max(axis=-1, keepdims=True)  # largest entry becomes 0: exp cannot overflow\n"
    "    e = np.exp(z)\n"
    "    return e / e.sum(axis=-1, keepdims=True)"
)
LOGSUMEXP = (
    "logsumexp = np.log(np.exp(z).sum(axis=1))  # (N,)\n"
    "    return float(np.mean(logsumexp - z[np.arange(N), targets]))"
)
ALL_CHECKS = {f"backprop.{c}" for c in (
    "softmax", "cross_entropy", "cross_entropy_backward", "linear", "tanh_backward", "ffnn_forward",
    "ffnn_backward", "embedding_repeats", "loss_and_grads", "dtypes", "inputs_unchanged")}

# (what the student got wrong, anchor in solutions/backprop.py, replacement, checks that must fail, phrase of the feedback)
MISTAKES = [
    ("softmax along axis 0", SOFTMAX, SOFTMAX.replace("axis=-1", "axis=0"),
     {"backprop.softmax"}, "softmax taken along axis 0 instead of the last axis"),
    ("softmax without subtracting the max", "z = z - z.max(axis=-1, keepdims=True)", "z = z",
     {"backprop.softmax"}, "the max is not subtracted before exp"),
    ("cross_entropy summed instead of averaged", "return float(np.mean(logsumexp", "return float(np.sum(logsumexp",
     {"backprop.cross_entropy", "backprop.loss_and_grads"}, "the sum over the batch instead of the mean"),
    ("cross_entropy as -log(softmax)", LOGSUMEXP, "return float(-np.mean(np.log(softmax(logits)[np.arange(N), targets])))",
     {"backprop.cross_entropy"}, "log(softmax(z)) underflows to log(0) = -inf"),
    ("cross_entropy without the max in the log-sum-exp", "z = logits - logits.max(axis=1, keepdims=True)  # (N, V)", "z = logits",
     {"backprop.cross_entropy"}, "the max is not subtracted inside the log-sum-exp"),
    ("cross_entropy_backward not divided by N", "return dlogits / N", "return dlogits",
     {"backprop.cross_entropy_backward", "backprop.loss_and_grads"}, "not divided by N"),
    ("cross_entropy_backward with the sign flipped", "return dlogits / N", "return -dlogits / N",
     {"backprop.cross_entropy_backward", "backprop.loss_and_grads"}, "the sign is flipped"),
    ("cross_entropy_backward without the one-hot", "dlogits[np.arange(N), targets] -= 1", "pass",
     {"backprop.cross_entropy_backward", "backprop.loss_and_grads"}, "the one-hot of the targets is not subtracted"),
    ("linear_forward without the bias", "return x @ W.T + b", "return x @ W.T",
     {"backprop.linear", "backprop.ffnn_forward"}, "the bias is missing"),
    ("linear db as the mean", "db = dout.sum(axis=0)", "db = dout.mean(axis=0)",
     {"backprop.linear", "backprop.ffnn_backward"}, "db is the mean over the batch instead of the sum"),
    ("linear dW transposed", "dW = dout.T @ x", "dW = x.T @ dout",
     {"backprop.linear", "backprop.ffnn_backward"}, "dW is transposed"),
    ("tanh_backward with the input's formula", "return dout * (1 - out**2)", "return dout * (1 - np.tanh(out) ** 2)",
     {"backprop.tanh_backward", "backprop.ffnn_backward"}, "used the input instead of the output"),
    ("tanh_backward without the square", "return dout * (1 - out**2)", "return dout * (1 - out)",
     {"backprop.tanh_backward", "backprop.ffnn_backward"}, "the square is missing"),
    ("context positions concatenated in reverse", "e = E[contexts].reshape", "e = E[contexts[:, ::-1]].reshape",
     {"backprop.ffnn_forward", "backprop.ffnn_backward"}, "the context positions are concatenated in reverse order"),
    ("tanh missing from the forward", "h = np.tanh(linear_forward(e, W, b))", "h = linear_forward(e, W, b)",
     {"backprop.ffnn_forward"}, "tanh is missing from the hidden layer"),
    ("all-zero gradients", 'return {"E": dE, "W": dW, "b": db, "U": dU, "c": dc}',
     'return {k: np.zeros_like(v) for k, v in {"E": dE, "W": dW, "b": db, "U": dU, "c": dc}.items()}',
     {"backprop.ffnn_backward", "backprop.embedding_repeats", "backprop.loss_and_grads"}, "the gradient is all zeros"),
    ("dE by fancy-index += (repeated ids overwrite)", "np.add.at(dE, contexts, de.reshape(*contexts.shape, E.shape[1]))",
     "dE[contexts] += de.reshape(*contexts.shape, E.shape[1])",
     {"backprop.embedding_repeats"}, "repeated ids overwrite instead of accumulating"),
    ("grads of the summed loss", "grads = ffnn_lm_backward(cross_entropy_backward(logits, targets), cache)",
     "grads = ffnn_lm_backward(cross_entropy_backward(logits, targets) * len(targets), cache)",
     {"backprop.loss_and_grads"}, "the gradients are those of the summed loss"),
    ("loss of the summed loss", "loss = cross_entropy(logits, targets)", "loss = cross_entropy(logits, targets) * len(targets)",
     {"backprop.loss_and_grads"}, "the loss is summed over the batch instead of averaged"),
    ("float32 in, float64 dE out", "dE = np.zeros_like(E)", "dE = np.zeros(E.shape)",
     {"backprop.dtypes", "backprop.loss_and_grads"}, "expected dtype float32 (the dtype must follow the inputs), got float64"),
    ("softmax shifts its input in place", "z = z - z.max(axis=-1, keepdims=True)", "z -= z.max(axis=-1, keepdims=True)",
     {"backprop.inputs_unchanged"}, "softmax modified its argument `z` in place"),
    ("imports torch", "import numpy as np\n", "import numpy as np\nimport torch\n",
     ALL_CHECKS, "import of torch"),
]


@pytest.mark.parametrize("mistake, old, new, must_fail, feedback", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistake_is_caught_in_its_component_only(rubric, tmp_path, mistake, old, new, must_fail, feedback):
    assert_caught_in_component_only(rubric, tmp_path, "backprop", old, new, must_fail, feedback)
