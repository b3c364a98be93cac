"""Cases for component `rnn` (rnn.py).

Weights are random and non-symmetric, input and hidden sizes differ, h0 is
never zero and sequences are long enough for a wrong recurrence to drift, so
a missing transpose, an ignored h0 or an off-by-one in time all show.
"""
from __future__ import annotations

from ..gradients import check_gradients, fill_parameters, load_reference_weights
from ..rounding import exact, rounded
from . import check
from .common import call_leaving_inputs, tensor, tensors, torch_dtype, with_layout
from ..tensors import deferred

torch = deferred("torch")

FILE = "rnn.py"  # the student API's file that holds this component: the rubric and submissions know it from here


LAYOUT = ("the weights are in PyTorch's layout (d_out, d_in): W_xh is (H, I) and W_hh (H, H), so h_t = tanh(x_t @ W_xh.T "
          "+ h_prev @ W_hh.T + b_h); a weight used untransposed (x_t @ W_xh), or the lecture's column vectors (W_xh @ x_t), "
          "fits only square shapes.")


def rnn_inputs(rng, batch: int, steps: int, d_in: int, hidden: int, dtype: str) -> list[torch.Tensor]:
    """x (B, T, I), h0 (B, H), W_xh (H, I), W_hh (H, H), b_h (H,)."""
    return [tensor(rng, batch, steps, d_in, dtype=dtype, scale=1.0), tensor(rng, batch, hidden, dtype=dtype),
            tensor(rng, hidden, d_in, dtype=dtype), tensor(rng, hidden, hidden, dtype=dtype), tensor(rng, hidden, dtype=dtype)]


def forward_hints(x, h0, W_xh, W_hh, b_h) -> dict:
    wrong = lambda **mistake: lambda ref: ref.oracles.rnn.forward(x, h0, W_xh, W_hh, b_h, **mistake)  # noqa: E731
    return {
        "W_hh is not transposed (h_prev @ W_hh instead of h_prev @ W_hh.T)": wrong(transpose=False),
        "h0 is ignored (the recurrence starts from zeros)": wrong(use_h0=False),
        "tanh is missing": wrong(tanh=False),
        "hs is one step late: hs[:, t] must be the state after reading x[:, t], without h0": wrong(shift=True),
    }


def reference_model(t, vocab: int, embed: int, hidden: int, dtype: str):
    return t.expect(lambda ref: fill_parameters(t.rng, ref.rnn.RNNLM(vocab, embed, hidden).to(torch_dtype(dtype))))


def student_model(t, vocab: int, embed: int, hidden: int, reference):
    model = t.student.rnn.RNNLM(vocab, embed, hidden)
    load_reference_weights(t, model, reference)
    return model


@check("rnn.step")
def step(t, batch: int = 3, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    x, h0, W_xh, W_hh, b_h = rnn_inputs(t.rng, batch, 1, d_in, hidden, dtype)
    x_t = x[:, 0]
    want = t.expect(lambda ref: rounded(ref.rnn.rnn_step, x_t, h0, W_xh, W_hh, b_h))
    what = f"rnn_step with B={batch}, I={d_in}, H={hidden}, {dtype}"
    got = with_layout(t, lambda: t.student.rnn.rnn_step(x_t, h0, W_xh, W_hh, b_h), what, LAYOUT)
    wrong = lambda **mistake: lambda ref: ref.oracles.rnn.step(x_t, h0, W_xh, W_hh, b_h, **mistake)  # noqa: E731
    t.close(got, want, what, hints={
        "W_hh is not transposed (h_prev @ W_hh instead of h_prev @ W_hh.T)": wrong(transpose=False),
        "the bias is missing": wrong(bias=False),
        "tanh is missing": wrong(tanh=False),
        "h_t has shape (H, B): the lecture's column vectors (W_xh @ x_t.T); here rows are examples, x_t @ W_xh.T":
            lambda ref: exact(want).T,
    })


@check("rnn.forward")
def forward(t, batch: int = 3, steps: int = 12, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    """Values over a long sequence, and the inputs are left as they were."""
    args = rnn_inputs(t.rng, batch, steps, d_in, hidden, dtype)
    hs, h_last = t.expect(lambda ref: rounded(ref.rnn.rnn_forward, *args))
    what = f"rnn_forward over T={steps} steps, {dtype}"
    got = with_layout(t, lambda: call_leaving_inputs(t, t.student.rnn.rnn_forward, args, ("x", "h0", "W_xh", "W_hh", "b_h"), what),
                      what, LAYOUT)
    got_hs, got_last = tensors(t, got, what, ("hs", "h_last"))
    t.close_each("the outputs", [
        t.part("hs", got_hs, hs, f"{what}: hs", hints=forward_hints(*args) | {
            "hs is time-major (T, B, H), as torch.stack's default dim=0 or a (T, B, H) buffer gives: the batch comes first, "
            "torch.stack(hs, dim=1)": lambda ref: exact(hs).transpose(0, 1),
        }),
        t.part("h_last", got_last, h_last, f"{what}: h_last"),
    ])


@check("rnn.forward_gradients")
def forward_gradients(t, batch: int = 3, steps: int = 8, d_in: int = 4, hidden: int = 5, dtype: str = "float64"):
    """Backpropagation through time: gradients of every input and weight after T steps."""
    args = rnn_inputs(t.rng, batch, steps, d_in, hidden, dtype)
    check_gradients(t, t.student.rnn.rnn_forward, lambda *a: t.expect(lambda ref: ref.rnn.rnn_forward(*a)), args,
                    grad_args=range(5), names=("x", "h0", "W_xh", "W_hh", "b_h"), outputs=("hs", "h_last"))


@check("rnn.lm_forward")
def lm_forward(t, batch: int = 3, steps: int = 7, vocab: int = 11, embed: int = 4, hidden: int = 6, with_h0: bool = False, dtype: str = "float64"):
    ref_model = reference_model(t, vocab, embed, hidden, dtype)
    model = student_model(t, vocab, embed, hidden, ref_model)
    ids = torch.from_numpy(t.rng.integers(0, vocab, size=(batch, steps)))
    h0 = [tensor(t.rng, batch, hidden, dtype=dtype)] if with_h0 else []
    with torch.no_grad():
        logits, h_last = t.expect(lambda ref: rounded(ref_model, ids, *h0))
    what = f"RNNLM forward on ids of shape {(batch, steps)}" + (" with h0" if with_h0 else " with h0=None")
    got_logits, got_last = tensors(t, model(ids, *h0), what, ("logits", "h_last"))
    with torch.no_grad():
        from_zeros = t.expect(lambda ref: ref_model(ids)[0])
    t.close_each("the outputs", [
        t.part("logits", got_logits, logits, f"{what}: logits", hints={
            "the output bias b_y is missing": lambda ref: exact(logits) - ref_model.b_y.detach(),
            "the given h0 is ignored (the recurrence starts from zeros)": lambda ref: from_zeros,
        }),
        t.part("h_last", got_last, h_last, f"{what}: h_last"),
    ])


@check("rnn.lm_gradients")
def lm_gradients(t, batch: int = 3, steps: int = 6, vocab: int = 9, embed: int = 4, hidden: int = 5, dtype: str = "float64"):
    """Every parameter's gradient (and h0's) through the whole model."""
    ref_model = reference_model(t, vocab, embed, hidden, dtype)
    model = student_model(t, vocab, embed, hidden, ref_model)
    ids = torch.from_numpy(t.rng.integers(0, vocab, size=(batch, steps)))
    check_gradients(t, model, ref_model, [ids, tensor(t.rng, batch, hidden, dtype=dtype)], grad_args=[1], names=["h0"],
                    outputs=("logits", "h_last"), parameters=(model, ref_model))


@check("rnn.loss")
def loss(t, batch: int = 4, steps: int = 9, vocab: int = 10, embed: int = 4, hidden: int = 5):
    """Teacher forcing: the logits at t are scored against the token at t + 1; then the loss's gradients."""
    ref_model = reference_model(t, vocab, embed, hidden, "float64")
    model = student_model(t, vocab, embed, hidden, ref_model)
    ids = torch.from_numpy(t.rng.integers(0, vocab, size=(batch, steps)))
    with torch.no_grad():
        logits, _ = t.expect(lambda ref: ref_model(ids))
    want = t.expect(lambda ref: ref.rnn.rnn_lm_loss(ref_model, ids).item())
    got = t.student.rnn.rnn_lm_loss(model, ids)
    if type(got) is not torch.Tensor or got.numel() != 1:
        t.fail(f"rnn_lm_loss: expected a scalar tensor, got {type(got).__name__}.")
    dims = {"B, the batch size": batch, "T - 1, the number of predicted positions": steps - 1,
            "B * (T - 1), the number of predictions": batch * (steps - 1)}
    t.close(got.item(), want, f"rnn_lm_loss on ids of shape {(batch, steps)}", dims=dims, hints={
        "the logits are not shifted: position t is scored against its own token": lambda ref: ref.oracles.rnn.loss(logits, ids, mistake="none"),
        "shifted the wrong way: logits[:, 1:] against ids[:, :-1]": lambda ref: ref.oracles.rnn.loss(logits, ids, mistake="back"),
        "the sum over predictions instead of the mean": lambda ref: want * batch * (steps - 1),
        f"averaged over the batch only: each sequence's T - 1 = {steps - 1} predictions are summed (a sum over time steps "
        "of per-step means, or per-sequence sums averaged over the batch); the mean is over all B * (T - 1)":
            lambda ref: want * (steps - 1),
        f"averaged over the time steps only: the B = {batch} sequences are summed; the mean is over all B * (T - 1)":
            lambda ref: want * batch,
        "softmax is applied before F.cross_entropy, which applies log-softmax itself: pass the raw logits":
            lambda ref: ref.oracles.rnn.loss(logits, ids, mistake="softmax"),
        "the target's raw logit is taken as its log-probability (F.nll_loss, or a gather, of the logits): take log_softmax "
        "first, or F.cross_entropy of the logits":
            lambda ref: ref.oracles.rnn.loss(logits, ids, mistake="nll"),
    })
    check_gradients(t, t.student.rnn.rnn_lm_loss, lambda _model, i: t.expect(lambda ref: ref.rnn.rnn_lm_loss(ref_model, i)),
                    [model, ids], grad_args=[], names=[], outputs=["loss"], parameters=(model, ref_model))


@check("rnn.batch_independence")
def batch_independence(t, batch: int = 5, steps: int = 6, d_in: int = 3, hidden: int = 4):
    """Examples in a batch are independent: permuting the batch permutes the outputs, and an example
    run alone gives its row of the batch (no reference needed)."""
    x, h0, W_xh, W_hh, b_h = rnn_inputs(t.rng, batch, steps, d_in, hidden, "float64")
    perm = torch.from_numpy(t.rng.permutation(batch))
    whole = tensors(t, t.student.rnn.rnn_forward(x, h0, W_xh, W_hh, b_h), "rnn_forward", ("hs", "h_last"))
    for rows, what in ((perm, "on a permuted batch"), (perm[:1], "on one example alone")):
        part = tensors(t, t.student.rnn.rnn_forward(x[rows], h0[rows], W_xh, W_hh, b_h), "rnn_forward", ("hs", "h_last"))
        whose = "must be the matching rows of the whole batch's (do examples mix?)"
        t.close_each("the outputs", [t.part(name, got, full[rows], f"rnn_forward {what}: {name} {whose}")
                                     for name, got, full in zip(("hs", "h_last"), part, whole)])
