"""solutions/rnn.py and solutions/lstm.py against independent oracles: PyTorch's own
nn.RNN, nn.LSTM and F.cross_entropy, with the same weights copied in."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import SOLUTIONS

from autograder.reference import Reference

ref = Reference(SOLUTIONS)
B, T, I, H, V = 3, 11, 5, 7, 13


def randn(*shape, scale=0.5, generator):
    return (scale * torch.randn(*shape, generator=generator, dtype=torch.float64)).requires_grad_()


def grads(*tensors):
    out = [t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    return out


def assert_close(got, want):
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.fixture
def g():
    return torch.Generator().manual_seed(0)


def test_rnn_forward_and_grads_match_torch_rnn(g):
    x, h0 = randn(B, T, I, generator=g), randn(B, H, generator=g)
    W_xh, W_hh, b_h = randn(H, I, generator=g), randn(H, H, generator=g), randn(H, generator=g)
    oracle = nn.RNN(I, H, nonlinearity="tanh", batch_first=True).double()
    with torch.no_grad():  # torch adds two biases: ours in b_ih, zero in b_hh
        oracle.weight_ih_l0.copy_(W_xh)
        oracle.weight_hh_l0.copy_(W_hh)
        oracle.bias_ih_l0.copy_(b_h)
        oracle.bias_hh_l0.zero_()
    hs, h_last = ref.rnn.rnn_forward(x, h0, W_xh, W_hh, b_h)
    want_hs, want_h = oracle(x, h0.unsqueeze(0))
    assert hs.shape == (B, T, H) and h_last.shape == (B, H) and hs.dtype == torch.float64
    assert_close(hs, want_hs)
    assert_close(h_last, want_h[0])

    d_hs, d_h = torch.randn(B, T, H, generator=g, dtype=torch.float64), torch.randn(B, H, generator=g, dtype=torch.float64)
    ((hs * d_hs).sum() + (h_last * d_h).sum()).backward()
    got = grads(x, h0, W_xh, W_hh, b_h)
    ((want_hs * d_hs).sum() + (want_h[0] * d_h).sum()).backward()
    want = grads(x, h0) + [oracle.weight_ih_l0.grad, oracle.weight_hh_l0.grad, oracle.bias_ih_l0.grad]
    for a, b in zip(got, want):
        assert_close(a, b)
    assert_close(got[-1], oracle.bias_hh_l0.grad)  # both biases get the same gradient


def test_rnn_step_is_one_step_and_keeps_float32(g):
    x, h = torch.randn(B, I, generator=g), torch.randn(B, H, generator=g)
    W_xh, W_hh, b_h = torch.randn(H, I, generator=g), torch.randn(H, H, generator=g), torch.randn(H, generator=g)
    before = [t.clone() for t in (x, h, W_xh, W_hh, b_h)]
    out = ref.rnn.rnn_step(x, h, W_xh, W_hh, b_h)
    assert out.dtype == torch.float32 and out.shape == (B, H)
    torch.testing.assert_close(out, torch.tanh(x @ W_xh.T + h @ W_hh.T + b_h))
    for a, b in zip(before, (x, h, W_xh, W_hh, b_h)):
        assert torch.equal(a, b)


def test_lstm_forward_and_grads_match_torch_lstm(g):
    x, h0, c0 = randn(B, T, I, generator=g), randn(B, H, generator=g), randn(B, H, generator=g)
    W_ih, W_hh = randn(4 * H, I, generator=g), randn(4 * H, H, generator=g)
    b_ih, b_hh = randn(4 * H, generator=g), randn(4 * H, generator=g)
    oracle = nn.LSTM(I, H, batch_first=True).double()
    with torch.no_grad():
        oracle.weight_ih_l0.copy_(W_ih)
        oracle.weight_hh_l0.copy_(W_hh)
        oracle.bias_ih_l0.copy_(b_ih)
        oracle.bias_hh_l0.copy_(b_hh)
    b = (b_ih + b_hh).detach().requires_grad_()  # torch's two biases, split
    hs, (h_last, c_last) = ref.lstm.lstm_forward(x, h0, c0, W_ih, W_hh, b)
    want_hs, (want_h, want_c) = oracle(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
    assert hs.shape == (B, T, H) and h_last.shape == c_last.shape == (B, H)
    assert_close(hs, want_hs)
    assert_close(h_last, want_h[0])
    assert_close(c_last, want_c[0])

    d_hs = torch.randn(B, T, H, generator=g, dtype=torch.float64)
    d_c = torch.randn(B, H, generator=g, dtype=torch.float64)
    ((hs * d_hs).sum() + (c_last * d_c).sum()).backward()
    got = grads(x, h0, c0, W_ih, W_hh, b)
    ((want_hs * d_hs).sum() + (want_c[0] * d_c).sum()).backward()
    want = grads(x, h0, c0) + [oracle.weight_ih_l0.grad, oracle.weight_hh_l0.grad, oracle.bias_ih_l0.grad]
    for a, b in zip(got, want):
        assert_close(a, b)


def test_lstm_step_keeps_float32_and_inputs(g):
    args = [torch.randn(*s, generator=g) for s in [(B, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,)]]
    before = [a.clone() for a in args]
    h, c = ref.lstm.lstm_step(*args)
    assert h.dtype == c.dtype == torch.float32 and h.shape == c.shape == (B, H)
    cell = nn.LSTMCell(I, H)
    with torch.no_grad():
        cell.weight_ih.copy_(args[3])
        cell.weight_hh.copy_(args[4])
        cell.bias_ih.copy_(args[5])
        cell.bias_hh.zero_()
        want_h, want_c = cell(args[0], (args[1], args[2]))
    torch.testing.assert_close(h, want_h)
    torch.testing.assert_close(c, want_c)
    for a, b in zip(before, args):
        assert torch.equal(a, b)


def make_rnnlm(g, E=6):
    model = ref.rnn.RNNLM(V, E, H).double()
    assert set(model.state_dict()) == {"embedding.weight", "W_xh", "W_hh", "b_h", "W_hy", "b_y"}
    shapes = {"embedding.weight": (V, E), "W_xh": (H, E), "W_hh": (H, H), "b_h": (H,), "W_hy": (V, H), "b_y": (V,)}
    state = {k: 0.5 * torch.randn(*s, generator=g, dtype=torch.float64) for k, s in shapes.items()}
    model.load_state_dict(state, strict=True)
    return model, state


def test_rnnlm_matches_embedding_rnn_linear(g):
    model, state = make_rnnlm(g)
    E = state["W_xh"].shape[1]
    emb, rnn, head = nn.Embedding(V, E).double(), nn.RNN(E, H, batch_first=True).double(), nn.Linear(H, V).double()
    with torch.no_grad():
        emb.weight.copy_(state["embedding.weight"])
        rnn.weight_ih_l0.copy_(state["W_xh"])
        rnn.weight_hh_l0.copy_(state["W_hh"])
        rnn.bias_ih_l0.copy_(state["b_h"])
        rnn.bias_hh_l0.zero_()
        head.weight.copy_(state["W_hy"])
        head.bias.copy_(state["b_y"])
    ids = torch.randint(0, V, (B, T), generator=g)
    h0 = torch.randn(B, H, generator=g, dtype=torch.float64)
    for start in (None, h0):
        logits, h_last = model(ids, start)
        want_hs, want_h = rnn(emb(ids), None if start is None else start.unsqueeze(0))
        assert logits.shape == (B, T, V) and logits.dtype == torch.float64
        assert_close(logits, head(want_hs))
        assert_close(h_last, want_h[0])


def test_rnn_lm_loss_is_shifted_cross_entropy(g):
    model, _ = make_rnnlm(g)
    ids = torch.randint(0, V, (B, T), generator=g)
    loss = ref.rnn.rnn_lm_loss(model, ids)
    logits, _ = model(ids)
    want = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    assert loss.shape == () and loss.dtype == torch.float64
    assert_close(loss, want)
    # the gradient flows to every parameter through time
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_rnnlm_default_state_follows_parameter_dtype(g):
    model = ref.rnn.RNNLM(V, 4, H)  # float32 by default
    logits, h_last = model(torch.randint(0, V, (B, T), generator=g))
    assert logits.dtype == h_last.dtype == torch.float32
    assert logits.shape == (B, T, V) and h_last.shape == (B, H)
