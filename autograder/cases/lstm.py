"""Cases for component `lstm` (lstm.py).

The gates must come in PyTorch's order i, f, g, o. Weights are random and
non-symmetric, h0 and c0 are never zero, and sequences are long, so a swapped
gate order, a missing tanh on the cell or an ignored initial state all show.
"""
from __future__ import annotations

from itertools import permutations

from ..gradients import check_gradients
from ..rounding import exact, rounded
from . import check
from .common import call_leaving_inputs, tensor, tensors, with_layout
from ..tensors import deferred

torch = deferred("torch")

FILE = "lstm.py"  # the student API's file that holds this component: the rubric and submissions know it from here


LAYOUT = ("the weights are in PyTorch's layout (d_out, d_in): W_ih is (4H, I) and W_hh (4H, H), so gates = x_t @ W_ih.T + "
          "h_prev @ W_hh.T + b; a weight used untransposed (x_t @ W_ih, as for Keras's (I, 4H) kernels) fits only square shapes.")


def lstm_inputs(rng, batch: int, steps: int, d_in: int, hidden: int, dtype: str) -> list[torch.Tensor]:
    """x (B, T, I), h0 (B, H), c0 (B, H), W_ih (4H, I), W_hh (4H, H), b (4H,)."""
    return [tensor(rng, batch, steps, d_in, dtype=dtype, scale=1.0), tensor(rng, batch, hidden, dtype=dtype),
            tensor(rng, batch, hidden, dtype=dtype), tensor(rng, 4 * hidden, d_in, dtype=dtype),
            tensor(rng, 4 * hidden, hidden, dtype=dtype), tensor(rng, 4 * hidden, dtype=dtype)]


def unpack_forward(t, got, what: str) -> tuple:
    """(hs, h_last, c_last) from what lstm_forward returned, or a failure that says what was expected."""
    if not (isinstance(got, tuple | list) and len(got) == 2):
        t.fail(f"{what}: expected (hs, (h_last, c_last)), got {type(got).__name__}.")
    (hs,) = tensors(t, got[:1], what, ("hs",))
    return (hs, *tensors(t, got[1], f"{what}: the final state", ("h_last", "c_last")))


def _order(order: str, source: str | None = None) -> str:
    return f"the gates are split in {source or 'the order ' + ', '.join(order)}; PyTorch's (and ours) is i, f, g, o"


def _sigmoid(g):  # torch's, looked up when a hint is computed: importing this module imports no torch
    return torch.sigmoid(g)


# The gate blocks read in another order: the lecture's and TensorFlow's first, by name, and every other order after the
# named mistakes (c_t = f * g + i * c_prev is the order f, i, g, o, but the swap in the cell is the likelier code).
NAMED_ORDERS = {"ifog": "the lecture's order i, f, o, g", "igfo": "TensorFlow's order i, j, f, o (i, g, f, o)"}
MISTAKES = {
    **{_order(order, source): {"order": order} for order, source in NAMED_ORDERS.items()},
    "tanh is missing on the cell state (h_t = o * c_t)": {"cell_tanh": False},
    "h_t = o * tanh(c_prev): the output uses the old cell state; it is h_t = o * tanh(c_t), with the new one": {"old_cell": True},
    "the forget gate scales the candidate and the input gate the old cell (c_t = f * g + i * c_prev)": {"swap_fg": True},
    "sigmoid instead of tanh for the candidate g": {"g_act": _sigmoid},
    "tanh is missing on the candidate g: g is the tanh of its block, then c_t = f * c_prev + i * g": {"g_act": lambda g: g},
    "1 is added to the forget gate's pre-activation (TensorFlow's forget_bias): a forget-gate bias of about 1 is an "
    "initialisation of b, never a term of the cell": {"forget_bias": 1.0},
    "b is added twice, once with each projection (as if it were PyTorch's b_ih and b_hh): b is already their sum, "
    "add it once": {"bias_times": 2},
    **{_order(order): {"order": order} for order in map("".join, permutations("ifgo")) if order not in {"ifgo", *NAMED_ORDERS}},
    "h0 and c0 are ignored (the recurrence starts from zeros)": {"zero_state": True},
}


@check("lstm.step")
def step(t, batch: int = 3, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    x, h0, c0, W_ih, W_hh, b = lstm_inputs(t.rng, batch, 1, d_in, hidden, dtype)
    x_t = x[:, 0]
    h_t, c_t = t.expect(lambda ref: rounded(ref.lstm.lstm_step, x_t, h0, c0, W_ih, W_hh, b))
    what = f"lstm_step with B={batch}, I={d_in}, H={hidden}, {dtype}"
    got = with_layout(t, lambda: t.student.lstm.lstm_step(x_t, h0, c0, W_ih, W_hh, b), what, LAYOUT)
    got_h, got_c = tensors(t, got, what, ("h_t", "c_t"))
    step_mistakes = {m: kw for m, kw in MISTAKES.items() if "zero_state" not in kw}
    parts = []
    for i, (name, got, want) in enumerate((("c_t", got_c, c_t), ("h_t", got_h, h_t))):
        hints = {m: (lambda ref, kw=kw, i=i: ref.oracles.lstm.step(x_t, h0, c0, W_ih, W_hh, b, **kw)[1 - i]) for m, kw in step_mistakes.items()}
        parts.append(t.part(name, got, want, f"{what}: {name}", hints=hints))
    t.close_each("the outputs", parts)


@check("lstm.forward")
def forward(t, batch: int = 3, steps: int = 15, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    """Values over a long sequence, and the inputs are left as they were."""
    args = lstm_inputs(t.rng, batch, steps, d_in, hidden, dtype)
    hs, (h_last, c_last) = t.expect(lambda ref: rounded(ref.lstm.lstm_forward, *args))
    what = f"lstm_forward over T={steps} steps, {dtype}"
    got = with_layout(t, lambda: call_leaving_inputs(t, t.student.lstm.lstm_forward, args, ("x", "h0", "c0", "W_ih", "W_hh", "b"), what),
                      what, LAYOUT)
    got_hs, got_h, got_c = unpack_forward(t, got, what)
    hints = {m: (lambda ref, kw=kw: ref.oracles.lstm.forward(*args, **kw)) for m, kw in MISTAKES.items()}
    t.close_each("the outputs", [
        t.part("hs", got_hs, hs, f"{what}: hs", hints=hints | {
            "hs is time-major (T, B, H), as torch.stack's default dim=0 or a (T, B, H) buffer gives: the batch comes first, "
            "torch.stack(hs, dim=1)": lambda ref: exact(hs).transpose(0, 1),
        }),
        t.part("h_last", got_h, h_last, f"{what}: h_last", hints={
            "h_last and c_last are swapped: return (hs, (h, c))": lambda ref: exact(c_last),
        }),
        t.part("c_last", got_c, c_last, f"{what}: c_last"),
    ])


@check("lstm.forward_gradients")
def forward_gradients(t, batch: int = 3, steps: int = 8, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    """Backpropagation through time: gradients of every input, state and weight after T steps."""
    args = lstm_inputs(t.rng, batch, steps, d_in, hidden, dtype)
    check_gradients(t, t.student.lstm.lstm_forward, lambda *a: t.expect(lambda ref: ref.lstm.lstm_forward(*a)), args,
                    grad_args=range(6), names=("x", "h0", "c0", "W_ih", "W_hh", "b"), outputs=("hs", "h_last", "c_last"))


@check("lstm.batch_independence")
def batch_independence(t, batch: int = 5, steps: int = 6, d_in: int = 3, hidden: int = 4):
    """Examples in a batch are independent: permuting the batch permutes the outputs, and an example
    run alone gives its row of the batch (no reference needed)."""
    x, h0, c0, W_ih, W_hh, b = lstm_inputs(t.rng, batch, steps, d_in, hidden, "float64")
    perm = torch.from_numpy(t.rng.permutation(batch))
    whole = unpack_forward(t, t.student.lstm.lstm_forward(x, h0, c0, W_ih, W_hh, b), "lstm_forward")
    for rows, what in ((perm, "on a permuted batch"), (perm[:1], "on one example alone")):
        part = unpack_forward(t, t.student.lstm.lstm_forward(x[rows], h0[rows], c0[rows], W_ih, W_hh, b), "lstm_forward")
        whose = "must be the matching rows of the whole batch's (do examples mix?)"
        t.close_each("the outputs", [t.part(name, got, full[rows], f"lstm_forward {what}: {name} {whose}")
                                     for name, got, full in zip(("hs", "h_last", "c_last"), part, whole)])
