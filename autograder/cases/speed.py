"""Timing cases: the student's speed against the reference's on the same inputs (timing.py).

Inputs are built inside each worker from a seed (Make "randn"/"randint"), the
same in both, so large GPU shapes never cross the pipe. Shapes come per device:
a GPU gets shapes that fill it, a CPU modest ones.
"""
from __future__ import annotations

import torch

from ..sandbox.wire import Make
from ..timing import compare_speed
from . import check


def _seed(t) -> int:
    """The case's seed, kept to 31 bits so that offsets per input set stay far inside torch's range."""
    return t.seed % (1 << 31)


def _randn(t, shape: list[int]):
    """make_inputs piece: a float32 normal tensor of `shape`, the i-th of the case, on the case's device."""
    return lambda w, i, k: w.put(Make("randn", [shape, _seed(t) + 1000 * i + k, "float32", t.speed.device]))


def _shape(t, cpu: list[int], gpu: list[int]) -> list[int]:
    return gpu if t.speed.device == "cuda" else cpu


@check("attention.speed", timing=True)
def attention_speed(t, which: str = "sdpa", cpu: list[int] = [4, 4, 128, 32], gpu: list[int] = [16, 16, 1024, 64]):
    """scaled_dot_product_attention(Q, K, V) on (B, h, T, dk), or multi_head_self_attention(x, W_q, W_k,
    W_v, W_o, h, causal=True) on x (B, T, h * dk)."""
    B, h, T, dk = _shape(t, cpu, gpu)
    if which == "sdpa":
        qkv = _randn(t, [B, h, T, dk])
        make = lambda w, i: [qkv(w, i, k) for k in range(3)] + [None]  # noqa: E731
        what, name = f"scaled_dot_product_attention on (B, h, T, dk) = {(B, h, T, dk)}", "scaled_dot_product_attention"
    else:
        x, W = _randn(t, [B, T, h * dk]), _randn(t, [h * dk, h * dk])
        make = lambda w, i: [x(w, i, 0)] + [W(w, i, k) for k in range(1, 5)] + [h, True]  # noqa: E731
        what, name = f"multi_head_self_attention, causal, on x {(B, T, h * dk)} with {h} heads", "multi_head_self_attention"
    student, reference = t.speed.reference_pair(t.student)
    compare_speed(t, what, getattr(student.attention, name), getattr(reference.attention, name), make)


@check("lstm.speed", timing=True)
def lstm_speed(t, cpu: list[int] = [8, 64, 32, 64], gpu: list[int] = [64, 256, 256, 512]):
    """lstm_forward(x, h0, c0, W_ih, W_hh, b) with (B, T, I, H) from the device's shape."""
    B, T, I, H = _shape(t, cpu, gpu)
    x, state, W_ih, W_hh, b = (_randn(t, s) for s in ([B, T, I], [B, H], [4 * H, I], [4 * H, H], [4 * H]))
    make = lambda w, i: [x(w, i, 0), state(w, i, 1), state(w, i, 2), W_ih(w, i, 3), W_hh(w, i, 4), b(w, i, 5)]  # noqa: E731
    student, reference = t.speed.reference_pair(t.student)
    compare_speed(t, f"lstm_forward with (B, T, I, H) = {(B, T, I, H)}", student.lstm.lstm_forward, reference.lstm.lstm_forward, make)


@check("transformer.speed", timing=True)
def transformer_speed(t, cpu: list[int] = [8, 64, 256, 64, 2, 4], gpu: list[int] = [16, 512, 8192, 512, 8, 8]):
    """TransformerLM forward and backward on (B, T) token ids: [B, T, vocab, d_model, layers, heads], d_ff = 4 d_model,
    both models holding the same weights."""
    B, T, V, d, L, h = _shape(t, cpu, gpu)
    config = {"vocab_size": V, "context_length": T, "d_model": d, "num_layers": L, "num_heads": h, "d_ff": 4 * d}
    torch.manual_seed(_seed(t))
    weights = t.expect(lambda ref: ref.transformer.TransformerLM(**config).state_dict())
    student, reference = t.speed.reference_pair(t.student)
    models = {}
    for w in (student, reference):
        models[w] = w.call(w.transformer.TransformerLM, keep=True, **config)
        models[w].to(t.speed.device, keep=True)
        models[w].load_state_dict(weights, keep=True)  # keep: its return value is no plain data
    ids = lambda w, i: [w.put(Make("randint", [[B, T], _seed(t) + i, V, t.speed.device]))]  # noqa: E731
    compare_speed(t, f"TransformerLM forward and backward on ids {(B, T)}, {config}", models[student], models[reference], ids,
                  backward=True)
