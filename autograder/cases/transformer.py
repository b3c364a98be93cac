"""Cases for component `transformer`: the modules and the language model (generation and training: generation.py).

Every module gets random, non-symmetric weights (LayerNorm's weight around 1, its bias non-zero) loaded into
both the reference and the student's module by state-dict name, so names, shapes, values and every gradient
are graded together. Sizes are chosen so mistakes show: several heads with dk != d_model, d_ff != d_model,
T < context_length as well as T == context_length, and LayerNorm inputs small enough that eps matters.
Hints recompute classic mistakes with the reference's own submodules and weights.
"""
from __future__ import annotations

import math

from ..gradients import check_gradients, fill_parameters, load_reference_weights
from ..rounding import rounded
from ..sandbox.host.process import StudentRaised
from . import check
from .attention import NONFINITE
from .common import call_leaving_inputs, tensor, torch_dtype
from ..tensors import deferred

torch = deferred("torch")

FILE = "transformer.py"  # the student API's file that holds this component: the rubric and submissions know it from here


def modules(t, build, dtype: str):
    """(student, reference): `build(namespace)` builds the module from either side's transformer.py; the
    reference gets random weights, LayerNorm weights (the only 1-D weights) shifted to around 1, and the
    student's module gets the same weights."""
    def weighted(ref):
        module = fill_parameters(t.rng, build(ref.transformer).to(torch_dtype(dtype)))
        with torch.no_grad():
            for name, p in module.named_parameters():
                if name.endswith("weight") and p.dim() == 1:
                    p.add_(1.0)
        return module

    reference = t.expect(weighted)
    student = build(t.student.transformer)
    load_reference_weights(t, student, reference)
    return student, reference


def values_and_gradients(t, student, reference, x: torch.Tensor, what: str, hints: dict, nonfinite: str | None = None) -> None:
    """The output (with hints for known mistakes), the input left as it was, then the gradients of a
    floating input and of every parameter. `nonfinite`: what makes this module's values NaN or Inf."""
    with torch.no_grad():
        want = t.expect(lambda ref: rounded(reference, x))
    t.close(call_leaving_inputs(t, student, [x], ("x",), what), want, what, hints=hints, nonfinite=nonfinite)
    grad_args = [0] if x.is_floating_point() else []
    check_gradients(t, student, reference, [x], grad_args=grad_args, names=["x"], outputs=[what], parameters=(student, reference))


# The modules a TransformerLM is made of, by the check that grades each: every case built on one names its failures.
PARTS = ("transformer.layer_norm", "transformer.feed_forward", "transformer.attention", "transformer.block", "transformer.lm")


def random_ids(t, batch: int, steps: int, vocab: int) -> torch.Tensor:
    return torch.from_numpy(t.rng.integers(0, vocab, size=(batch, steps)))


# ---- the modules -----------------------------------------------------------------------------------


@check("transformer.layer_norm", subject="LayerNorm")
def layer_norm_case(t, batch: int = 2, steps: int = 5, d_model: int = 8, eps: float | None = None, scale: float = 0.05, dtype: str = "float64"):
    """Over the last axis of a 3-D input. A small input `scale` makes var comparable to eps, so eps misplaced
    or missing shows; each row has its own offset, so the mean must be subtracted."""
    kwargs = {} if eps is None else {"eps": eps}
    student, reference = modules(t, lambda tf: tf.LayerNorm(d_model, **kwargs), dtype)
    x = tensor(t.rng, batch, steps, d_model, dtype=dtype, scale=scale) + tensor(t.rng, batch, steps, 1, dtype=dtype)
    e = 1e-5 if eps is None else eps
    wrong = lambda eps=e, **mistake: lambda ref: ref.oracles.transformer.layer_norm(reference, x, eps, **mistake)  # noqa: E731
    hints = {
        "the unbiased variance (divide by d_model - 1; torch.var's default unbiased=True)": wrong(unbiased=True),
        "eps added outside the square root (sqrt(var) + eps)": wrong(where="outside"),
        "x.std(-1) + eps: torch.std is unbiased by default (divide by d_model - 1), and eps belongs inside the square root, "
        "sqrt(var + eps), with the biased variance": wrong(unbiased=True, where="outside"),
        "eps is missing (sqrt(var))": wrong(where="missing"),
        "normalised over the sequence axis (dim 1) instead of the last": wrong(dims=(1,)),
        "normalised over the last two axes instead of the last one": wrong(dims=(1, 2)),
    }
    if eps is not None:
        hints["the eps argument is ignored (always 1e-5)"] = wrong(eps=1e-5)
    values_and_gradients(t, student, reference, x, f"LayerNorm({d_model}{'' if eps is None else f', eps={eps:g}'}) on x of shape "
                         f"{tuple(x.shape)}, {dtype}", hints)


@check("transformer.feed_forward", subject="FeedForward")
def feed_forward(t, batch: int = 2, steps: int = 4, d_model: int = 8, d_ff: int = 20, dtype: str = "float64"):
    student, reference = modules(t, lambda tf: tf.FeedForward(d_model, d_ff), dtype)
    x = tensor(t.rng, batch, steps, d_model, dtype=dtype, scale=1.0)
    wrong = lambda activation: lambda ref: ref.oracles.transformer.feed_forward(reference, x, activation)  # noqa: E731
    values_and_gradients(t, student, reference, x, f"FeedForward({d_model}, {d_ff}) on x of shape {tuple(x.shape)}, {dtype}", {
        "ReLU instead of GELU": wrong("relu"),
        "the tanh approximation of GELU instead of the exact x * Phi(x)": wrong("tanh"),
        "the sigmoid approximation of GELU, x * sigmoid(1.702 x), instead of the exact x * Phi(x)": wrong("sigmoid"),
        "the activation is missing": wrong("none"),
    })


@check("transformer.attention", subject="MultiHeadSelfAttention")
def attention_case(t, batch: int = 2, steps: int = 6, d_model: int = 12, num_heads: int = 3, causal: bool = True, dtype: str = "float64"):
    """MultiHeadSelfAttention with dk = d_model / num_heads != d_model, so a head split or a scale by the
    wrong width shows."""
    student, reference = modules(t, lambda tf: tf.MultiHeadSelfAttention(d_model, num_heads, causal=causal), dtype)
    x = tensor(t.rng, batch, steps, d_model, dtype=dtype, scale=1.0)
    right = "tril" if causal else "none"

    def wrong(mask: str = right, **mistake):
        return lambda ref: ref.oracles.transformer.attention(reference, x, num_heads, mask, **mistake)

    hints = {
        "heads split with view(B, num_heads, T, dk) instead of view(B, T, num_heads, dk).transpose(1, 2)":
            wrong(split_transpose=False, merge_transpose=False),
        "head outputs merged with reshape(B, T, d) without transposing (B, h, T, dk) back first": wrong(merge_transpose=False),
        "the scores are not scaled by 1/sqrt(dk)": wrong(scale=1.0),
        "the scores are scaled by 1/sqrt(d_model) instead of 1/sqrt(dk)": wrong(scale=math.sqrt(d_model)),
    }
    if causal:
        hints["the causal mask is missing"] = wrong("none")
        hints["the mask lets each position see the next one too (tril(1) instead of tril())"] = wrong("next")
        hints["the mask is transposed: it keeps keys j >= i (triu) instead of j <= i"] = wrong("triu")
        hints["the mask is inverted: it hides the past and keeps the future (masked_fill where the mask is True, with "
              "True meaning 'may attend'); the last position, left with no key, gets NaN"] = wrong("inverted")
    else:
        hints["a causal mask is applied although causal=False"] = wrong("tril")
    values_and_gradients(t, student, reference, x, f"MultiHeadSelfAttention({d_model}, {num_heads}, causal={causal}) on x of shape "
                         f"{tuple(x.shape)}, {dtype}", hints, nonfinite=NONFINITE)


@check("transformer.block", subject="TransformerBlock", builds_on=PARTS[:3])
def block_case(t, batch: int = 2, steps: int = 5, d_model: int = 8, num_heads: int = 2, d_ff: int = 16,
               norm_first: bool = True, causal: bool = True, dtype: str = "float64"):
    student, reference = modules(t, lambda tf: tf.TransformerBlock(d_model, num_heads, d_ff, norm_first=norm_first, causal=causal), dtype)
    x = tensor(t.rng, batch, steps, d_model, dtype=dtype, scale=1.0)
    nf = norm_first
    wrong = lambda norm_first=nf, **mistake: lambda ref: ref.oracles.transformer.block(reference, x, norm_first, **mistake)  # noqa: E731
    hints = {
        ("post-LN computed although norm_first=True" if nf else "pre-LN computed although norm_first=False"): wrong(not nf),
        "the residual around attention is missing": wrong(attn_residual=False),
        "the residual around the feed-forward is missing": wrong(ffn_residual=False),
    }
    if nf:
        hints["the residual carries the normalised input (x = ln(x); x = x + sublayer(x))"] = wrong(normed_residual=True)
        hints["LayerNorm also applied to each residual sum (x = ln(x + sublayer(ln(x))))"] = wrong(renorm=True)
    values_and_gradients(t, student, reference, x, f"TransformerBlock({d_model}, {num_heads}, {d_ff}, norm_first={nf}, causal={causal}) "
                         f"on x of shape {tuple(x.shape)}, {dtype}", hints)


# ---- the language model ------------------------------------------------------------------------------


def lm_modules(t, vocab: int, context_length: int, d_model: int, num_layers: int, num_heads: int, d_ff: int, norm_first: bool, dtype: str):
    return modules(t, lambda tf: tf.TransformerLM(vocab, context_length, d_model, num_layers, num_heads, d_ff, norm_first=norm_first), dtype)


def lm_logits(t, model, ids: torch.Tensor, vocab: int, what: str) -> torch.Tensor:
    """The student's logits, or a failure if they are not a (B, T, V) tensor."""
    got = model(ids)
    if type(got) is not torch.Tensor or tuple(got.shape) != (*ids.shape, vocab):
        t.fail(f"{what}: expected logits of shape {(*ids.shape, vocab)}, got "
               + (f"shape {tuple(got.shape)}" if type(got) is torch.Tensor else type(got).__name__) + ".")
    return got


@check("transformer.lm", subject="TransformerLM", builds_on=PARTS[:4])
def lm(t, batch: int = 2, steps: int = 6, vocab: int = 11, context_length: int = 8, d_model: int = 8, num_layers: int = 2,
       num_heads: int = 2, d_ff: int = 16, norm_first: bool = True, dtype: str = "float64"):
    """Logits and the gradient of every parameter (embeddings, each block, ln_final, lm_head)."""
    student, reference = lm_modules(t, vocab, context_length, d_model, num_layers, num_heads, d_ff, norm_first, dtype)
    ids = random_ids(t, batch, steps, vocab)
    nf = norm_first
    wrong = lambda **mistake: lambda ref: ref.oracles.transformer.language_model(reference, ids, nf, **mistake)  # noqa: E731
    hints = {
        "no position embeddings": wrong(positions="none"),
        "the position embeddings of the last T positions (indexed from the wrong end)": wrong(positions="last"),
        "the position embeddings in reverse order": wrong(positions="reversed"),
        f"the blocks run {'post' if nf else 'pre'}-LN (is norm_first passed on to each TransformerBlock?)": wrong(blocks_norm_first=not nf),
    }
    if nf:
        hints["ln_final is missing"] = wrong(final_ln=False)
    values_and_gradients(t, student, reference, ids, f"TransformerLM(V={vocab}, context_length={context_length}, d_model={d_model}, "
                         f"num_layers={num_layers}, num_heads={num_heads}, d_ff={d_ff}, norm_first={nf}) logits on ids of shape "
                         f"{tuple(ids.shape)}, {dtype}", hints)


@check("transformer.causality", builds_on=PARTS)
def causality(t, batch: int = 2, steps: int = 7, vocab: int = 11, context_length: int = 8, d_model: int = 8, num_layers: int = 2,
              num_heads: int = 2, d_ff: int = 16, norm_first: bool = True):
    """Changing the tokens after position p must leave the logits at positions <= p where they were, and must
    move those at p + 1 (so a model blind to its input does not pass). Only the student's own outputs are
    compared, so no expected value can leak."""
    model, _ = lm_modules(t, vocab, context_length, d_model, num_layers, num_heads, d_ff, norm_first, "float64")
    ids = random_ids(t, batch, steps, vocab)
    what = f"TransformerLM (norm_first={norm_first}) on ids of shape {tuple(ids.shape)}"
    logits = lm_logits(t, model, ids, vocab, what)
    for p in range(steps - 1):
        changed = ids.clone()
        changed[:, p + 1:] = (ids[:, p + 1:] + torch.from_numpy(t.rng.integers(1, vocab, size=(batch, steps - p - 1)))) % vocab
        got = lm_logits(t, model, changed, vocab, what)
        t.close(got[:, : p + 1], logits[:, : p + 1], f"{what}: the logits at positions 0..{p} moved when only the tokens after "
                f"position {p} changed (position p may see tokens 0..p only; is the causal mask missing or off by one?)")
        if torch.equal(got[:, p + 1], logits[:, p + 1]):
            t.fail(f"{what}: changing the token at position {p + 1} did not change the logits there; the model must read its input.")


@check("transformer.context_length", builds_on=PARTS)
def context_length_case(t, batch: int = 2, vocab: int = 11, context_length: int = 6, d_model: int = 8, num_layers: int = 2,
                        num_heads: int = 2, d_ff: int = 16):
    """T == context_length runs; T == context_length + 1 must raise ValueError itself, not fail later inside
    the position embedding."""
    model, _ = lm_modules(t, vocab, context_length, d_model, num_layers, num_heads, d_ff, True, "float64")
    what = f"TransformerLM with context_length={context_length}"
    try:
        lm_logits(t, model, random_ids(t, batch, context_length, vocab), vocab, f"{what}, T = {context_length}")
    except StudentRaised as exc:
        if exc.type_name != "ValueError":
            raise
        t.fail(f"{what}: on T = context_length = {context_length} tokens your code raised ValueError: {exc.message} "
               "(only T > context_length is too long; an off-by-one?).")
    try:
        model(random_ids(t, batch, context_length + 1, vocab))
    except StudentRaised as exc:
        if exc.type_name != "ValueError":
            t.fail(f"{what}, T = {context_length + 1}: expected a ValueError, but your code raised {exc.type_name}: {exc.message} "
                   "(check T against context_length yourself and raise ValueError before looking anything up).")
        return
    t.fail(f"{what}, T = {context_length + 1}: expected a ValueError (T > context_length), but the call returned.")


@check("transformer.batch_independence", builds_on=PARTS)
def batch_independence(t, batch: int = 4, steps: int = 6, vocab: int = 11, context_length: int = 8, d_model: int = 8,
                       num_layers: int = 2, num_heads: int = 2, d_ff: int = 16, norm_first: bool = True):
    """Examples in a batch are independent: permuting the batch permutes the logits, and an example run
    alone gives its row of the batch (the student's own outputs only)."""
    model, _ = lm_modules(t, vocab, context_length, d_model, num_layers, num_heads, d_ff, norm_first, "float64")
    ids = random_ids(t, batch, steps, vocab)
    what = f"TransformerLM (norm_first={norm_first})"
    whole = lm_logits(t, model, ids, vocab, f"{what} on ids of shape {tuple(ids.shape)}")
    perm = torch.from_numpy(t.rng.permutation(batch))
    for rows, part in ((perm, "a permuted batch"), (perm[:1], "one example alone")):
        got = lm_logits(t, model, ids[rows], vocab, f"{what} on {part}")
        t.close(got, whole[rows], f"{what} on {part}: the logits must be the matching rows of the whole batch's (do examples mix?)")
