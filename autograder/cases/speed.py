"""Timing cases: the student's speed against the reference's on the same inputs (timing.py).

Inputs are built inside each worker from a seed (Make "randn"/"randint"), the
same in both, so large GPU shapes never cross the pipe. Shapes come per device:
a GPU gets shapes that fill it, a CPU modest ones. Weights are drawn as an
initialised layer has them (standard deviation 1/sqrt(fan-in)), so every timed
computation is as well conditioned as in training and correct implementations
differ only by float32 rounding: with unit weights an LSTM's pre-activations
are ~10 standard deviations wide and 64 steps amplify the rounding of one
operation order into differences no float32 bound can tell from a wrong answer.
benchmarks/checksums.py builds its inputs here too.
"""
from __future__ import annotations

from ..sandbox.worker.wire import Make
from ..timing import compare_speed
from . import check
from ..tensors import deferred

torch = deferred("torch")

LSTM_OUTPUTS = ("hs", "h_last", "c_last")


def _seed(t) -> int:
    """The case's seed, kept to 31 bits so that offsets per input set stay far inside torch's range."""
    return t.seed % (1 << 31)


def _randn(shape: list[int], seed: int, device: str, std: float = 1.0) -> Make:
    """A float32 tensor of `shape` with normal entries of standard deviation `std`, built in the worker."""
    return Make("randn", [shape, seed, "float32", device, float(std)])


def lstm_inputs(seed: int, device: str, B: int, T: int, I: int, H: int) -> list[Make]:
    """lstm_forward's arguments x, h0, c0, W_ih, W_hh, b; unit inputs and states, weights and bias as
    torch.nn.LSTM's initialisation scales them (~1/sqrt(fan-in)), so the gates sit in their working range."""
    shapes = ([B, T, I], [B, H], [B, H], [4 * H, I], [4 * H, H], [4 * H])
    stds = (1.0, 1.0, 1.0, I ** -0.5, H ** -0.5, H ** -0.5)
    return [_randn(s, seed + k, device, std) for k, (s, std) in enumerate(zip(shapes, stds))]


def attention_inputs(seed: int, device: str, which: str, B: int, h: int, T: int, dk: int) -> list:
    """sdpa: Q, K, V (B, h, T, dk), unit entries (the 1/sqrt(dk) scaling keeps the scores unit-sized), no mask;
    mhsa: x (B, T, h * dk) and W_q, W_k, W_v, W_o at 1/sqrt(d), then h heads and causal=True."""
    if which == "sdpa":
        return [_randn([B, h, T, dk], seed + k, device) for k in range(3)] + [None]
    d = h * dk
    return [_randn([B, T, d], seed, device)] + [_randn([d, d], seed + k, device, d ** -0.5) for k in range(1, 5)] + [h, True]


def transformer_config(B: int, T: int, V: int, d: int, L: int, h: int) -> dict:
    return {"vocab_size": V, "context_length": T, "d_model": d, "num_layers": L, "num_heads": h, "d_ff": 4 * d}


def transformer_inputs(seed: int, device: str, B: int, T: int, V: int, *_) -> list[Make]:
    """Token ids (B, T); the weights are the reference's own initialisation (GPT-2's 0.02), loaded into both models."""
    return [Make("randint", [[B, T], seed, V, device])]


def _shape(t, cpu: list[int], gpu: list[int]) -> list[int]:
    return gpu if t.speed.device == "cuda" else cpu


def _placed(t, inputs, *shape):
    """make_inputs for compare_speed: the i-th argument list of `inputs`, built in worker w."""
    return lambda w, i: [w.put(a) if isinstance(a, Make) else a for a in inputs(_seed(t) + 1000 * i, t.speed.device, *shape)]


@check("attention.speed", timing=True)
def attention_speed(t, which: str = "sdpa", cpu: list[int] = [4, 4, 128, 32], gpu: list[int] = [16, 16, 1024, 64]):
    """scaled_dot_product_attention(Q, K, V) on (B, h, T, dk), or multi_head_self_attention(x, W_q, W_k,
    W_v, W_o, h, causal=True) on x (B, T, h * dk)."""
    B, h, T, dk = _shape(t, cpu, gpu)
    if which == "sdpa":
        what, name = f"scaled_dot_product_attention on (B, h, T, dk) = {(B, h, T, dk)}", "scaled_dot_product_attention"
    else:
        what, name = f"multi_head_self_attention, causal, on x {(B, T, h * dk)} with {h} heads", "multi_head_self_attention"
    student, reference = t.speed.reference_pair(t.student)
    return compare_speed(t, what, getattr(student.attention, name), getattr(reference.attention, name),
                  _placed(t, attention_inputs, which, B, h, T, dk), outputs=("output",))


@check("lstm.speed", timing=True)
def lstm_speed(t, cpu: list[int] = [32, 64, 128, 256], gpu: list[int] = [64, 256, 256, 512]):
    """lstm_forward(x, h0, c0, W_ih, W_hh, b) with (B, T, I, H) from the device's shape."""
    B, T, I, H = _shape(t, cpu, gpu)
    student, reference = t.speed.reference_pair(t.student)
    return compare_speed(t, f"lstm_forward with (B, T, I, H) = {(B, T, I, H)}", student.lstm.lstm_forward, reference.lstm.lstm_forward,
                  _placed(t, lstm_inputs, B, T, I, H), outputs=LSTM_OUTPUTS)


@check("transformer.speed", timing=True)
def transformer_speed(t, cpu: list[int] = [8, 64, 256, 64, 2, 4], gpu: list[int] = [16, 512, 8192, 512, 8, 8]):
    """TransformerLM forward and backward on (B, T) token ids: [B, T, vocab, d_model, layers, heads], d_ff = 4 d_model,
    both models holding the same weights."""
    shape = _shape(t, cpu, gpu)
    config = transformer_config(*shape)
    torch.manual_seed(_seed(t))
    weights = t.expect(lambda ref: ref.transformer.TransformerLM(**config).state_dict())
    student, reference = t.speed.reference_pair(t.student)
    models = {}
    for w in (student, reference):
        models[w] = w.call(w.transformer.TransformerLM, keep=True, **config)
        models[w].to(t.speed.device, keep=True)
        models[w].load_state_dict(weights, keep=True)  # keep: its return value is no plain data
    return compare_speed(t, f"TransformerLM forward and backward on ids {tuple(shape[:2])}, {config}", models[student], models[reference],
                  _placed(t, transformer_inputs, *shape), backward=True, outputs=transformer_outputs(weights))


def transformer_outputs(weights: dict) -> tuple[str, ...]:
    """What the worker checksums for a model: the logits, then the gradient of every parameter by name (the
    reference's parameters are its whole state dict)."""
    return ("logits", *(f"the gradient of {name}" for name in sorted(weights)))
