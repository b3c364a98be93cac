"""The error model of low-precision cases (autograder/rounding.py): expected values from float64, a bound that
every correct float32 implementation meets whatever its order of operations, and that known mistakes miss by
orders of magnitude. In-process: the reference solutions, correct rewrites and mistakes on random instances."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from conftest import SOLUTIONS

from autograder.cases.backprop import random_logits
from autograder.expected import Recorder, Replay
from autograder.gradients import fill_parameters
from autograder.judge import CaseFailed, expect_array
from autograder.reference import Reference
from autograder.rounding import Rounded, rounded

REF = Reference(SOLUTIONS)
INSTANCES = 16  # benchmarks/float32.py measures 1000 through the grader
MISS_SEARCH = 200  # instances searched for one the reference's own float32 result misses (P(none) ~ 1e-6 at 7%)


def error_ratio(got, want: Rounded) -> float:
    """The largest error of `got` against the exact answer, as a share of the bound."""
    g = got.detach().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    truth = want.truth.numpy() if isinstance(want.truth, torch.Tensor) else np.asarray(want.truth)
    return float(np.abs(g.astype(np.float64) - truth).max()) / want.bound


# ---- softmax at |z| ~ 1e4: the log-sum-exp softmax --------------------------------------------


def lse_softmax(z: np.ndarray) -> np.ndarray:
    """Correct, but it rounds m + log(sum) at the size of z: float32 loses |z| * 6e-8 relative here."""
    m = z.max(-1, keepdims=True)
    return np.exp(z - (m + np.log(np.exp(z - m).sum(-1, keepdims=True))))


def test_a_log_sum_exp_softmax_is_within_the_bound_where_the_reference_is_far_more_accurate():
    worst = 0.0
    for seed in range(INSTANCES):
        z = random_logits(np.random.default_rng(seed), (9, 5), 1e4, "float32")
        want = rounded(REF.backprop.softmax, z)
        assert want.dtype == "float32" and want.truth.dtype == np.float64
        worst = max(worst, error_ratio(lse_softmax(z), want))
        assert error_ratio(REF.backprop.softmax(z), want) < 1 / 32  # the reference's own error sets the bound
    assert worst < 0.5, worst
    # With the old rtol 1e-4 against the reference's float32 result, this answer failed (the observation 1).
    assert not np.allclose(lse_softmax(z), REF.backprop.softmax(z), rtol=1e-4, atol=1e-6)


def test_a_softmax_mistake_is_far_outside_the_bound():
    z = random_logits(np.random.default_rng(0), (9, 5), 1.0, "float32")
    want = rounded(REF.backprop.softmax, z)
    e = np.exp(z - z.max(0, keepdims=True))
    assert error_ratio(e / e.sum(0, keepdims=True), want) > 1e3  # along axis 0


# ---- the TransformerLM gradients: the other observation ---------------------------------------------


def reordered_lm(m, ids):
    """TransformerLM in another correct order: var_mean LayerNorm with rsqrt, fused QKV, scaled queries, einsum heads."""
    def ln(mod, x):
        var, mean = torch.var_mean(x, -1, unbiased=False, keepdim=True)
        return (x - mean) * torch.rsqrt(var + mod.eps) * mod.weight + mod.bias

    def attn(a, x):
        B, T, d = x.shape
        h = a.num_heads
        q, k, v = (x @ torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).T).split(d, -1)
        q = q.view(B, T, h, d // h) / math.sqrt(d // h)
        s = torch.einsum("bthd,bshd->bhts", q, k.view(B, T, h, d // h))
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        return torch.einsum("bhts,bshd->bthd", s.softmax(-1), v.view(B, T, h, d // h)).reshape(B, T, d) @ a.output_proj.weight.T

    x = m.token_embeddings.weight[ids] + m.position_embeddings.weight[: ids.shape[1]]
    for block in m.layers:
        x = x + attn(block.attn, ln(block.ln1, x))
        x = x + block.ffn.w2(torch.nn.functional.gelu(block.ffn.w1(ln(block.ln2, x))))
    return ln(m.ln_final, x) @ m.lm_head.weight.T


def backward(forward, model, ids, upstream) -> list[torch.Tensor]:
    """The logits and every parameter's gradient for a random upstream gradient."""
    out = forward(model, ids)
    (out * upstream).sum().backward()
    return [out.detach(), *(p.grad for p in model.parameters())]


def float32_lm(seed: int):
    rng = np.random.default_rng(seed)
    model = fill_parameters(rng, REF.transformer.TransformerLM(11, 8, 8, 2, 2, 16, norm_first=True).float())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 1:
                p.add_(1.0)
    return model, torch.from_numpy(rng.integers(0, 11, size=(2, 6))), torch.from_numpy(rng.normal(size=(2, 6, 11))).float()


def test_a_reordered_float32_transformer_keeps_its_gradients_within_the_bound():
    """Every instance examined stays within the bound, and they include one where the old tolerance around the
    reference's own float32 result failed (about 7% of instances; which ones depends on the CPU's kernels)."""
    worst, reference_missed = 0.0, False
    for seed in range(MISS_SEARCH):
        if seed >= INSTANCES and reference_missed:
            break
        model, ids, upstream = float32_lm(seed)
        want = rounded(lambda m, i, u: backward(lambda a, b: a(b), m, i, u), model, ids, upstream)
        got = backward(reordered_lm, copy.deepcopy(model), ids, upstream)
        worst = max(worst, max(error_ratio(g, w) for g, w in zip(got, want)))
        own = backward(lambda a, b: a(b), copy.deepcopy(model), ids, upstream)
        truth = [w.truth for w in want]
        reference_missed |= not all(torch.allclose(o.double(), t, rtol=1e-4, atol=1e-5) for o, t in zip(own, truth))
    assert worst < 0.5, worst
    assert reference_missed


def test_an_unbiased_variance_in_the_transformer_is_far_outside_the_bound():
    model, ids, upstream = float32_lm(0)
    want = rounded(lambda m, i, u: backward(lambda a, b: a(b), m, i, u), model, ids, upstream)
    unbiased = copy.deepcopy(model)
    for module in unbiased.modules():
        if type(module).__name__ == "LayerNorm":
            module.forward = lambda x, m=module: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + m.eps) * m.weight + m.bias
    got = backward(lambda a, b: a(b), unbiased, ids, upstream)
    assert error_ratio(got[0], want[0]) > 100


# ---- what rounded returns ------------------------------------------------------------------------------------


def test_float64_inputs_give_the_reference_result_itself():
    x = torch.randn(3, 4, dtype=torch.float64)
    out = rounded(torch.tanh, x)
    assert type(out) is torch.Tensor and torch.equal(out, torch.tanh(x))


def test_the_structure_is_kept_and_only_floats_are_rounded():
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    out = rounded(lambda a: (a.sum(), {"ids": np.arange(3), "y": [a * 2]}), x)
    assert isinstance(out[0], Rounded) and out[0].dtype is None  # a number
    assert np.array_equal(out[1]["ids"], np.arange(3))
    assert isinstance(out[1]["y"][0], Rounded) and out[1]["y"][0].dtype == "float32"


def test_the_inputs_and_modules_given_are_left_as_they_were():
    model = torch.nn.Linear(3, 2).float()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(4, 3)
    kept = x.clone()
    rounded(lambda m, a: m(a).sum().backward() or m.weight.grad, model, x)
    assert torch.equal(x, kept) and all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert model.weight.grad is None and model.weight.dtype == torch.float32


def test_a_rounded_value_travels_through_a_recording(tmp_path, rubric):
    case = rubric.component("backprop").cases[0]
    recorder = Recorder(REF)
    z = random_logits(np.random.default_rng(1), (4, 5), 1.0, "float32")
    compute = lambda ref: rounded(ref.backprop.softmax, z)  # noqa: E731  (one call site: the fingerprint names it)
    want = recorder.for_case(case).expect(np.random.default_rng(0), compute)
    recorder.save(tmp_path / "expected.bin")
    got = Replay(tmp_path / "expected.bin").for_case(case).expect(np.random.default_rng(0), compute)
    assert isinstance(got, Rounded) and got.dtype == want.dtype and got.bound == want.bound
    assert np.array_equal(got.truth, want.truth)
    expect_array(REF.backprop.softmax(z), got, "softmax", rtol=0, atol=0, visible=True)
    with pytest.raises(CaseFailed, match="allowed error"):
        expect_array(REF.backprop.softmax(z) * np.float32(1.001), got, "softmax", rtol=0, atol=0, visible=True)
