"""Plausible RNN and LSTM bugs lose points in their own component only, in the cases meant to catch them."""
import pytest
from conftest import SOLUTIONS, assert_caught_in_component_only

RNN_STEP = "return torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h)"
RNN_LOOP = "    for t in range(x.shape[1]):\n        h = rnn_step(x[:, t], h, W_xh, W_hh, b_h)  # (B, H)\n"
RNN_UPDATE = "h = rnn_step(x[:, t], h, W_xh, W_hh, b_h)  # (B, H)"
RNN_LOSS = "logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)"
# From the first self.W_xh to the last (the __init__ and forward of RNNLM): renamed everywhere, as a student would.
_rnn = (SOLUTIONS / "rnn.py").read_text()
RNNLM_USES_OF_W_XH = _rnn[_rnn.index("self.W_xh") : _rnn.rindex("self.W_xh") + len("self.W_xh")]

# (what the student got wrong, anchor in solutions/rnn.py, replacement, checks that must fail, phrase of the feedback)
RNN_MISTAKES = [
    ("W_hh not transposed", RNN_STEP, RNN_STEP.replace("h_prev @ W_hh.T", "h_prev @ W_hh"),
     {"rnn.step", "rnn.forward"}, "Likely mistake: W_hh is not transposed"),
    ("bias missing", RNN_STEP, RNN_STEP.replace(" + b_h", ""),
     {"rnn.step"}, "Likely mistake: the bias is missing"),
    ("tanh missing", RNN_STEP, "return x_t @ W_xh.T + h_prev @ W_hh.T + b_h",
     {"rnn.step", "rnn.forward"}, "Likely mistake: tanh is missing"),
    ("h0 ignored in rnn_forward", "h = h0  # (B, H)", "h = torch.zeros_like(h0)  # (B, H)",
     {"rnn.forward", "rnn.lm_forward"}, "Likely mistake: h0 is ignored (the recurrence starts from zeros)"),
    ("hs holds h0 and drops the last state", f"        {RNN_UPDATE}\n        hs.append(h)\n", f"        hs.append(h)\n        {RNN_UPDATE}\n",
     {"rnn.forward"}, "Likely mistake: hs is one step late"),
    ("h detached inside the loop", RNN_UPDATE, RNN_UPDATE.replace("b_h)", "b_h).detach()"),
     {"rnn.forward_gradients", "rnn.lm_gradients", "rnn.loss"}, "hs is detached from the autograd graph"),
    ("h_prev detached going into each step (truncated BPTT)", RNN_UPDATE, RNN_UPDATE.replace("t], h,", "t], h.detach(),"),
     {"rnn.forward_gradients", "rnn.lm_gradients", "rnn.loss"}, "the gradient of x: values differ from the reference"),
    ("RNNLM parameter W_hx instead of W_xh", RNNLM_USES_OF_W_XH, RNNLM_USES_OF_W_XH.replace("self.W_xh", "self.W_hx"),
     {"rnn.lm_forward", "rnn.lm_gradients", "rnn.loss"}, "missing W_xh; unexpected W_hx"),
    ("RNNLM h0 = None zeros without the parameters' dtype", "dtype=self.W_hh.dtype, device=self.W_hh.device)", "device=self.W_hh.device)",
     {"rnn.lm_forward", "rnn.loss"}, "expected m1 and m2 to have the same dtype"),
    ("loss not shifted", RNN_LOSS, "logits.reshape(-1, V), ids.reshape(-1)",
     {"rnn.loss"}, "Likely mistake: the logits are not shifted"),
    ("loss shifted the wrong way", RNN_LOSS, "logits[:, 1:].reshape(-1, V), ids[:, :-1].reshape(-1)",
     {"rnn.loss"}, "Likely mistake: shifted the wrong way"),
    ("loss summed instead of averaged", RNN_LOSS, RNN_LOSS + ', reduction="sum"',
     {"rnn.loss"}, "Likely mistake: the sum over predictions instead of the mean"),
    ("time-major by reshape instead of transpose (examples mix)", RNN_LOOP,
     "    for x_t in x.reshape(x.shape[1], x.shape[0], -1):\n        h = rnn_step(x_t, h, W_xh, W_hh, b_h)  # (B, H)\n",
     {"rnn.forward", "rnn.batch_independence"}, "(do examples mix?)"),
    ("hidden states centred over the batch (examples mix, yet permuting commutes)", RNN_UPDATE, RNN_UPDATE + "\n        h = h - h.mean(0)",
     {"rnn.batch_independence"}, "on one example alone"),
    ("RNNLM output bias missing", "logits = hs @ self.W_hy.T + self.b_y", "logits = hs @ self.W_hy.T",
     {"rnn.lm_forward"}, "Likely mistake: the output bias b_y is missing"),
    ("RNNLM ignores a given h0", "        if h0 is None:\n", "        if True:\n",
     {"rnn.lm_forward"}, "Likely mistake: the given h0 is ignored"),
    ("RNNLM h0 = None zeros in float64 in a float32 model", "dtype=self.W_hh.dtype, device", "dtype=torch.float64, device",
     {"rnn.lm_forward"}, "expected m1 and m2 to have the same dtype"),
]

LSTM_GATES = "gates = x_t @ W_ih.T + h_prev @ W_hh.T + b  # (B, 4H)"
LSTM_LOOP = "    for t in range(x.shape[1]):\n        h, c = lstm_step(x[:, t], h, c, W_ih, W_hh, b)"
CELL = f"    {LSTM_GATES}"  # the first line of lstm_step's body; a forbidden step is put before it, and returns
ALL_LSTM = {"lstm.step", "lstm.forward", "lstm.forward_gradients", "lstm.batch_independence"}

# (what the student got wrong, anchor in solutions/lstm.py, replacement, checks that must fail, phrase of the feedback)
LSTM_MISTAKES = [
    ("gates in the lecture's order i, f, o, g", "i, f, g, o = gates.chunk(4, dim=-1)", "i, f, o, g = gates.chunk(4, dim=-1)",
     {"lstm.step", "lstm.forward"}, "Likely mistake: the gates are split in the lecture's order i, f, o, g"),
    ("tanh missing on the cell", "h_t = o * torch.tanh(c_t)", "h_t = o * c_t",
     {"lstm.step", "lstm.forward"}, "Likely mistake: tanh is missing on the cell state"),
    ("W_hh not transposed (4H x H: a shape error)", LSTM_GATES, LSTM_GATES.replace("h_prev @ W_hh.T", "h_prev @ W_hh"),
     ALL_LSTM, "mat1 and mat2 shapes cannot be multiplied"),
    ("h0 and c0 ignored", "h, c = h0, c0", "h, c = torch.zeros_like(h0), torch.zeros_like(c0)",
     {"lstm.forward"}, "Likely mistake: h0 and c0 are ignored (the recurrence starts from zeros)"),
    ("c_prev detached going into each step", "lstm_step(x[:, t], h, c, W_ih", "lstm_step(x[:, t], h, c.detach(), W_ih",
     {"lstm.forward_gradients"}, "the gradient of x: values differ from the reference"),
    ("cell updated in place (c0 modified)", "c_t = f * c_prev + i * g  # (B, H)", "c_t = c_prev.mul_(f).add_(i * g)  # (B, H)",
     {"lstm.forward", "lstm.forward_gradients"}, "the argument c0 afterwards (inputs must not be modified in place)"),
    ("time-major by reshape instead of transpose (examples mix)", LSTM_LOOP,
     "    for x_t in x.reshape(x.shape[1], x.shape[0], -1):\n        h, c = lstm_step(x_t, h, c, W_ih, W_hh, b)",
     {"lstm.forward", "lstm.batch_independence"}, "(do examples mix?)"),
    ("forget gate on the candidate", "c_t = f * c_prev + i * g  # (B, H)", "c_t = f * g + i * c_prev  # (B, H)",
     {"lstm.step", "lstm.forward"}, "Likely mistake: the forget gate scales the candidate"),
    ("sigmoid for the candidate g", "torch.tanh(g), torch.sigmoid(o)", "torch.sigmoid(g), torch.sigmoid(o)",
     {"lstm.step", "lstm.forward"}, "Likely mistake: sigmoid instead of tanh for the candidate g"),
    ("final states returned as (c, h)", "return torch.stack(hs, dim=1), (h, c)", "return torch.stack(hs, dim=1), (c, h)",
     {"lstm.forward"}, "Likely mistake: h_last and c_last are swapped"),
    ("a working step through torch.nn.LSTMCell", CELL,
     "    cell = torch.nn.LSTMCell(x_t.shape[1], h_prev.shape[1])\n"
     "    weights = {'weight_ih': W_ih, 'weight_hh': W_hh, 'bias_ih': b, 'bias_hh': torch.zeros_like(b)}\n"
     "    return torch.func.functional_call(cell, weights, (x_t, (h_prev, c_prev)))\n" + CELL,
     ALL_LSTM, "use of torch.nn.LSTMCell"),
    ("a working step through torch.lstm_cell (torch._VF.lstm_cell)", CELL,
     "    return torch.lstm_cell(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n" + CELL,
     ALL_LSTM, "line 42: use of torch._VF.lstm_cell"),  # torch.lstm_cell is the same kernel: the static scan names it
]


@pytest.mark.parametrize("mistake, old, new, must_fail, feedback", RNN_MISTAKES, ids=[m[0] for m in RNN_MISTAKES])
def test_rnn_mistake_is_caught_in_its_component_only(rubric, tmp_path, mistake, old, new, must_fail, feedback):
    assert_caught_in_component_only(rubric, tmp_path, "rnn", old, new, must_fail, feedback)


@pytest.mark.parametrize("mistake, old, new, must_fail, feedback", LSTM_MISTAKES, ids=[m[0] for m in LSTM_MISTAKES])
def test_lstm_mistake_is_caught_in_its_component_only(rubric, tmp_path, mistake, old, new, must_fail, feedback):
    assert_caught_in_component_only(rubric, tmp_path, "lstm", old, new, must_fail, feedback)
