"""solutions/attention.py and solutions/transformer.py against independent oracles:
PyTorch's F.scaled_dot_product_attention, nn.MultiheadAttention,
nn.TransformerEncoderLayer and F.layer_norm, with the same weights copied in, in
float64. (PyTorch's boolean attn_mask / key_padding_mask mean True = NOT
allowed in nn.MultiheadAttention, the opposite of ours, so they are inverted.)"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import SOLUTIONS

from autograder.reference import Reference

ref = Reference(SOLUTIONS)
B, T, d, h, d_ff, V = 2, 7, 12, 3, 20, 11
f64 = torch.float64


def assert_close(got, want):
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.fixture
def g():
    return torch.Generator().manual_seed(0)


def randn(*shape, generator, scale=0.5, grad=False):
    return (scale * torch.randn(*shape, generator=generator, dtype=f64)).requires_grad_(grad)


def mha_oracle(W_q, W_k, W_v, W_o):
    oracle = nn.MultiheadAttention(d, h, bias=False, batch_first=True).double()
    with torch.no_grad():
        oracle.in_proj_weight.copy_(torch.cat([W_q, W_k, W_v]))
        oracle.out_proj.weight.copy_(W_o)
    return oracle


# ---------------------------------------------------------------- attention.py


def test_sdpa_matches_torch_with_a_broadcast_mask_values_and_grads(g):
    Q, K, Vv = randn(B, h, 5, 4, generator=g, grad=True), randn(B, h, 6, 4, generator=g, grad=True), randn(B, h, 6, 3, generator=g, grad=True)
    mask = torch.rand(B, 1, 5, 6, generator=g) < 0.6
    mask[..., 0] = True  # no all-masked rows: torch's answer for those is not ours
    got = ref.attention.scaled_dot_product_attention(Q, K, Vv, mask)
    want = F.scaled_dot_product_attention(Q, K, Vv, attn_mask=mask)
    assert got.shape == (B, h, 5, 3) and got.dtype == f64
    assert_close(got, want)
    dy = torch.randn(got.shape, generator=g, dtype=f64)
    g_got = torch.autograd.grad((got * dy).sum(), (Q, K, Vv))
    g_want = torch.autograd.grad((want * dy).sum(), (Q, K, Vv))
    for a, b in zip(g_got, g_want):
        assert_close(a, b)


def test_sdpa_unmasked_and_causal_match_torch(g):
    Q, K, Vv = randn(4, 6, 5, generator=g), randn(4, 6, 5, generator=g), randn(4, 6, 2, generator=g)
    assert_close(ref.attention.scaled_dot_product_attention(Q, K, Vv), F.scaled_dot_product_attention(Q, K, Vv))
    causal = ref.attention.causal_mask(6)
    assert_close(
        ref.attention.scaled_dot_product_attention(Q, K, Vv, causal),
        F.scaled_dot_product_attention(Q, K, Vv, is_causal=True),
    )


def test_sdpa_all_masked_row_is_zero_and_gradients_finite(g):
    Q, K, Vv = randn(1, 3, 4, generator=g, grad=True), randn(1, 5, 4, generator=g, grad=True), randn(1, 5, 2, generator=g, grad=True)
    mask = torch.ones(1, 3, 5, dtype=torch.bool)
    mask[0, 1] = False
    out = ref.attention.scaled_dot_product_attention(Q, K, Vv, mask)
    assert torch.equal(out[0, 1], torch.zeros(2, dtype=f64))
    for grad in torch.autograd.grad(out.sum(), (Q, K, Vv)):
        assert torch.isfinite(grad).all()


def test_causal_mask_is_lower_triangular():
    m = ref.attention.causal_mask(5)
    assert m.dtype == torch.bool and m.shape == (5, 5)
    assert torch.equal(m, torch.tril(torch.ones(5, 5)).bool())


def test_dot_product_attention_against_a_hand_loop(g):
    S, H, Dv = 5, 4, 3
    q, k, v = randn(B, H, generator=g), randn(B, S, H, generator=g), randn(B, S, Dv, generator=g)
    mask = torch.tensor([[True, False, True, True, False], [False] * S])
    ctx, w = ref.attention.dot_product_attention(q, k, v, mask)
    scores = torch.einsum("bh,bsh->bs", q, k)[0, [0, 2, 3]]
    want_w = torch.zeros(S, dtype=f64)
    want_w[[0, 2, 3]] = torch.softmax(scores, 0)
    assert_close(w[0], want_w)
    assert_close(ctx[0], want_w @ v[0])
    assert torch.equal(w[1], torch.zeros(S, dtype=f64)) and torch.equal(ctx[1], torch.zeros(Dv, dtype=f64))
    ctx, w = ref.attention.dot_product_attention(q, k, v)
    assert_close(w, torch.softmax(torch.einsum("bh,bsh->bs", q, k), -1))


@pytest.mark.parametrize("causal", [True, False])
def test_multi_head_self_attention_matches_nn_multihead_attention(g, causal):
    x = randn(B, T, d, generator=g, grad=True)
    Ws = [randn(d, d, generator=g, grad=True) for _ in range(4)]
    oracle = mha_oracle(*Ws)
    attn_mask = ~ref.attention.causal_mask(T) if causal else None
    got = ref.attention.multi_head_self_attention(x, *Ws, num_heads=h, causal=causal)
    want, _ = oracle(x, x, x, attn_mask=attn_mask, need_weights=False)
    assert got.shape == (B, T, d)
    assert_close(got, want)
    dy = torch.randn(got.shape, generator=g, dtype=f64)
    g_got = torch.autograd.grad((got * dy).sum(), [x, *Ws])
    g_want = torch.autograd.grad((want * dy).sum(), [x, oracle.in_proj_weight, oracle.out_proj.weight])
    assert_close(g_got[0], g_want[0])
    assert_close(torch.cat(g_got[1:4]), g_want[1])
    assert_close(g_got[4], g_want[2])


def test_multi_head_cross_attention_matches_with_padding_mask(g):
    Tq, Tk = 4, 6
    x, mem = randn(B, Tq, d, generator=g), randn(B, Tk, d, generator=g)
    Ws = [randn(d, d, generator=g) for _ in range(4)]
    memory_mask = torch.tensor([[True] * Tk, [True] * 3 + [False] * 3])
    got = ref.attention.multi_head_cross_attention(x, mem, *Ws, num_heads=h, memory_mask=memory_mask)
    want, _ = mha_oracle(*Ws)(x, mem, mem, key_padding_mask=~memory_mask, need_weights=False)
    assert got.shape == (B, Tq, d)
    assert_close(got, want)
    got = ref.attention.multi_head_cross_attention(x, mem, *Ws, num_heads=h)
    assert_close(got, mha_oracle(*Ws)(x, mem, mem, need_weights=False)[0])


# -------------------------------------------------------------- transformer.py


def test_layer_norm_matches_f_layer_norm(g):
    ln = ref.transformer.LayerNorm(d).double()
    assert sorted(ln.state_dict()) == ["bias", "weight"]
    with torch.no_grad():
        ln.weight.copy_(randn(d, generator=g))
        ln.bias.copy_(randn(d, generator=g))
    x = randn(B, T, d, generator=g, scale=3.0)
    assert_close(ln(x), F.layer_norm(x, (d,), ln.weight, ln.bias, eps=1e-5))


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_block_matches_encoder_layer(g, norm_first):
    torch.manual_seed(0)
    block = ref.transformer.TransformerBlock(d, h, d_ff, norm_first=norm_first, causal=True).double()
    oracle = nn.TransformerEncoderLayer(
        d, h, d_ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first, bias=False
    ).double()
    # bias=False also drops the LayerNorm biases in torch: ours stay at zero.
    assert "norm1.bias" not in dict(oracle.named_parameters())
    with torch.no_grad():
        for ln in (block.ln1, block.ln2):
            ln.weight.copy_(1 + randn(d, generator=g, scale=0.1))
        oracle.self_attn.in_proj_weight.copy_(torch.cat([block.attn.q_proj.weight, block.attn.k_proj.weight, block.attn.v_proj.weight]))
        oracle.self_attn.out_proj.weight.copy_(block.attn.output_proj.weight)
        oracle.linear1.weight.copy_(block.ffn.w1.weight)
        oracle.linear2.weight.copy_(block.ffn.w2.weight)
        oracle.norm1.weight.copy_(block.ln1.weight)
        oracle.norm2.weight.copy_(block.ln2.weight)
    x = randn(B, T, d, generator=g, scale=1.0)
    causal = ~torch.tril(torch.ones(T, T, dtype=torch.bool))
    assert_close(block(x), oracle(x, src_mask=causal, is_causal=True))


def test_transformer_lm_state_dict_names_and_shapes():
    lm = ref.transformer.TransformerLM(V, 8, d, 2, h, d_ff, norm_first=True)
    keys = lm.state_dict()
    assert keys["token_embeddings.weight"].shape == (V, d)
    assert keys["position_embeddings.weight"].shape == (8, d)
    assert keys["lm_head.weight"].shape == (V, d)
    assert {"layers.0.attn.q_proj.weight", "layers.1.ffn.w2.weight", "ln_final.bias", "layers.1.ln2.weight"} <= set(keys)
    assert not any(k.endswith(".bias") and "ln" not in k for k in keys)
    post = ref.transformer.TransformerLM(V, 8, d, 2, h, d_ff, norm_first=False)
    assert not any(k.startswith("ln_final") for k in post.state_dict())
    assert len(post.state_dict()) == len(keys) - 2
    with pytest.raises(ValueError):
        lm(torch.zeros(1, 9, dtype=torch.long))


def test_transformer_lm_is_causal_and_matches_a_manual_forward(g):
    torch.manual_seed(1)
    lm = ref.transformer.TransformerLM(V, 8, d, 2, h, d_ff).double()
    ids = torch.randint(0, V, (B, 6), generator=g)
    logits = lm(ids)
    assert logits.shape == (B, 6, V) and logits.dtype == f64
    x = lm.token_embeddings(ids) + lm.position_embeddings.weight[:6]
    for block in lm.layers:
        x = block(x)
    assert_close(logits, lm.lm_head(lm.ln_final(x)))
    ids2 = ids.clone()
    ids2[:, 4:] = (ids2[:, 4:] + 1) % V
    assert_close(lm(ids2)[:, :4], logits[:, :4])


def test_generate_greedy_matches_a_hand_loop():
    torch.manual_seed(2)
    lm = ref.transformer.TransformerLM(V, 5, d, 2, h, d_ff).double()
    with torch.no_grad():
        lm.lm_head.weight.mul_(50)  # sharp logits, no near-ties
    prompt = torch.tensor([1, 2, 3], dtype=torch.long)
    out = ref.transformer.generate(lm, prompt, 6, temperature=0.0)
    seq = prompt.tolist()
    with torch.no_grad():
        for _ in range(6):
            seq.append(int(lm(torch.tensor([seq[-5:]]))[0, -1].argmax()))
    assert out.dtype == torch.long and out.tolist() == seq


def test_generate_samples_from_top_k_with_one_multinomial_call_per_token(monkeypatch):
    torch.manual_seed(3)
    lm = ref.transformer.TransformerLM(V, 5, d, 1, h, d_ff).double()
    seen = []
    real = torch.multinomial

    def spy(probs, num_samples, *args, **kwargs):
        seen.append(probs.detach().clone())
        return real(probs, num_samples, *args, **kwargs)

    monkeypatch.setattr(torch, "multinomial", spy)
    prompt = torch.tensor([4, 0], dtype=torch.long)
    out = ref.transformer.generate(lm, prompt, 4, temperature=0.7, top_k=3, generator=torch.Generator().manual_seed(0))
    assert out.shape == (6,) and len(seen) == 4
    for i, probs in enumerate(seen):
        with torch.no_grad():
            logits = lm(out[: 2 + i][-5:].unsqueeze(0))[0, -1] / 0.7
        top = logits.topk(3)
        want = torch.zeros(V, dtype=f64)
        want[top.indices] = torch.softmax(top.values, 0)
        assert_close(probs.reshape(-1), want)
        assert probs.reshape(-1)[out[2 + i]] > 0
