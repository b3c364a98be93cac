"""Cases for component `lstm` (lstm.py).

The gates must come in PyTorch's order i, f, g, o. Weights are random and
non-symmetric, h0 and c0 are never zero, and sequences are long, so a swapped
gate order, a missing tanh on the cell or an ignored initial state all show.
"""
from __future__ import annotations

import torch

from ..gradients import check_gradients
from ..rounding import exact, rounded
from . import check
from .common import call_leaving_inputs, tensor, tensors

FILE = "lstm.py"  # the student API's file that holds this component: the rubric and submissions know it from here


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


MISTAKES = {
    "the gates are split in the lecture's order i, f, o, g; PyTorch's (and ours) is i, f, g, o": {"order": "ifog"},
    "tanh is missing on the cell state (h_t = o * c_t)": {"cell_tanh": False},
    "the forget gate scales the candidate and the input gate the old cell (c_t = f * g + i * c_prev)": {"swap_fg": True},
    "sigmoid instead of tanh for the candidate g": {"g_act": torch.sigmoid},
    "h0 and c0 are ignored (the recurrence starts from zeros)": {"zero_state": True},
}


@check("lstm.step")
def step(t, batch: int = 3, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    x, h0, c0, W_ih, W_hh, b = lstm_inputs(t.rng, batch, 1, d_in, hidden, dtype)
    x_t = x[:, 0]
    h_t, c_t = t.expect(lambda ref: rounded(ref.lstm.lstm_step, x_t, h0, c0, W_ih, W_hh, b))
    what = f"lstm_step with B={batch}, I={d_in}, H={hidden}, {dtype}"
    got_h, got_c = tensors(t, t.student.lstm.lstm_step(x_t, h0, c0, W_ih, W_hh, b), what, ("h_t", "c_t"))
    step_mistakes = {m: kw for m, kw in MISTAKES.items() if "zero_state" not in kw}
    for i, (name, got, want) in enumerate((("c_t", got_c, c_t), ("h_t", got_h, h_t))):
        hints = {m: (lambda ref, kw=kw, i=i: ref.oracles.lstm.step(x_t, h0, c0, W_ih, W_hh, b, **kw)[1 - i]) for m, kw in step_mistakes.items()}
        t.close(got, want, f"{what}: {name}", hints=hints)


@check("lstm.forward")
def forward(t, batch: int = 3, steps: int = 15, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    """Values over a long sequence, and the inputs are left as they were."""
    args = lstm_inputs(t.rng, batch, steps, d_in, hidden, dtype)
    hs, (h_last, c_last) = t.expect(lambda ref: rounded(ref.lstm.lstm_forward, *args))
    what = f"lstm_forward over T={steps} steps, {dtype}"
    got = call_leaving_inputs(t, t.student.lstm.lstm_forward, args, ("x", "h0", "c0", "W_ih", "W_hh", "b"), what)
    got_hs, got_h, got_c = unpack_forward(t, got, what)
    t.close(got_hs, hs, f"{what}: hs", hints={m: (lambda ref, kw=kw: ref.oracles.lstm.forward(*args, **kw)) for m, kw in MISTAKES.items()})
    t.close(got_h, h_last, f"{what}: h_last", hints={"h_last and c_last are swapped: return (hs, (h, c))": lambda ref: exact(c_last)})
    t.close(got_c, c_last, f"{what}: c_last")


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
        for name, got, full in zip(("hs", "h_last", "c_last"), part, whole):
            t.close(got, full[rows], f"lstm_forward {what}: {name} must be the matching rows of the whole batch's (do examples mix?)")
