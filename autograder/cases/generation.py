"""Cases for component `transformer`: generation (greedy, temperature, top-k) and training.

Generation runs the student's `generate` on the student's TransformerLM holding the reference's float64
weights. Greedy output must equal the reference's token for token. Sampling is graded through a spy on
torch.multinomial: the probabilities passed at each step are compared with the reference's for the prefix
the student actually had, so no two runs need to draw alike; a chi-square test over many seeded draws
then checks that the tokens really are drawn from those probabilities with the generator passed in.
Prompts and max_new_tokens take the sequence past context_length, so the crop to the last
context_length tokens matters everywhere.

Training runs the grader's own loop (AdamW on cross-entropy, batches drawn by the grader) on the
student's model in the worker, one remote call per operation, and the same loop on the reference here,
from the same weights and batches; the student's losses must fall as the reference's do. The run is
short (TRAIN_STEPS), so two probes on the first batch, which cost one forward and backward each, catch
what a short run cannot: a weight that no gradient reaches, and positions that see later tokens.
"""
from __future__ import annotations

import builtins
import functools
import math
from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np

from ..diagnose import sample_shows
from ..gradients import fill_parameters, load_reference_weights
from ..judge import LIKELY
from ..sandbox.host.process import StudentRaised
from . import check
from ..chi_square import chi_square_p_value
from .transformer import PARTS, lm_logits, lm_modules
from ..tensors import deferred

torch = deferred("torch")

# A small float64 model: V, context_length, d_model, num_layers, num_heads, d_ff.
VOCAB, CONTEXT = 13, 8
SIZES = {"d_model": 16, "num_layers": 2, "num_heads": 2, "d_ff": 32}


def tiny_lm(t, vocab: int = VOCAB, context_length: int = CONTEXT):
    """(student, reference) pre-LN TransformerLMs with the same random float64 weights."""
    return lm_modules(t, vocab, context_length, norm_first=True, dtype="float64", **SIZES)


def random_prompt(t, length: int, vocab: int) -> torch.Tensor:
    return torch.from_numpy(t.rng.integers(0, vocab, size=length))


def generated(t, got: torch.Tensor, prompt: torch.Tensor, vocab: int, what: str) -> torch.Tensor:
    """The student's output (an int64 tensor of T0 + max_new_tokens ids: returns.py checked that where it came back), or
    a failure unless it is the prompt followed by ids in [0, V)."""
    if not torch.equal(got[: len(prompt)], prompt):
        t.fail(f"{what}: the output must start with the prompt, unchanged.")
    if got.min() < 0 or got.max() >= vocab:
        t.fail(f"{what}: the new tokens must be ids in [0, {vocab}); got {got[len(prompt):].tolist()}.")
    return got


# ---- greedy ---------------------------------------------------------------------------------------------


def divided_by_zero(t, what: str, exc: StudentRaised) -> None:
    """A failure that says why, when generate(..., temperature=0) raised because it divided by the temperature."""
    if exc.type_name == "ZeroDivisionError" or "probability tensor contains" in exc.message:
        t.fail(f"{what}: {exc.describe()}\n{LIKELY}temperature 0 is not a temperature to divide by: logits / 0 are "
               "inf and NaN, which torch.multinomial refuses. temperature == 0 means greedy decoding: check it first and "
               "take the argmax of the logits, without dividing and without sampling.")


@check("transformer.generate_greedy", builds_on=PARTS)
def generate_greedy(t, prompt_len: int = 5, max_new_tokens: int = 10):
    """temperature=0: the reference's tokens exactly (float64 weights, so no near-ties)."""
    model, reference = tiny_lm(t)
    prompt = random_prompt(t, prompt_len, VOCAB)
    want = t.expect(lambda ref: ref.transformer.generate(reference, prompt, max_new_tokens, temperature=0.0))
    what = f"generate(model, prompt of {prompt_len} tokens, max_new_tokens={max_new_tokens}, temperature=0) with context_length={CONTEXT}"
    try:
        got = t.student.transformer.generate(model, prompt, max_new_tokens, temperature=0.0)
    except StudentRaised as exc:
        if exc.type_name == "ValueError":
            t.fail(f"{what}: your code raised ValueError ({exc.message}) once the sequence was longer than context_length: "
                   "feed the model only the last context_length tokens.")
        divided_by_zero(t, what, exc)
        raise
    got = generated(t, got, prompt, VOCAB, what)
    wrong = lambda **mistake: lambda ref: ref.oracles.generation.greedy(reference, prompt, max_new_tokens, **mistake)  # noqa: E731
    t.close(got, want, f"{what}: the tokens", hints={
        "the context is cropped to its first context_length tokens instead of its last": wrong(crop="first"),
        "the context is cropped to its last context_length - 1 tokens (ids[-(n - 1):], an off-by-one); "
        "the model takes the last context_length": wrong(crop="short"),
        "the next token is read from the logits at position 0 instead of the last position": wrong(position=0),
    })


@check("transformer.generate_output", builds_on=PARTS)
def generate_output(t, prompt_len: int = 11, max_new_tokens: int = 4):
    """The result's type, shape and dtype for a prompt longer than the context, greedy and sampled;
    the whole prompt comes first, and the prompt passed in is left as it was."""
    model, _ = tiny_lm(t)
    prompt = random_prompt(t, prompt_len, VOCAB)
    placed = t.student.put(prompt)
    for temperature in (0.0, 1.0):
        what = f"generate(model, prompt of {prompt_len} tokens, max_new_tokens={max_new_tokens}, temperature={temperature:g})"
        try:
            got = t.student.transformer.generate(model, placed, max_new_tokens, temperature, generator=t.student.torch_generator(t.seed % 2**32))
        except StudentRaised as exc:
            if temperature == 0:
                divided_by_zero(t, what, exc)
            raise
        generated(t, got, prompt, VOCAB, what)
        t.unchanged(t.student.value(placed), prompt, f"{what}: the prompt afterwards (it must not be modified in place)")


# ---- sampling -------------------------------------------------------------------------------------------


def reference_probs(t, model, prefix: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """What the reference passes to torch.multinomial for the token after `prefix`."""
    return t.expect(lambda ref: ref.oracles.generation.multinomial_probs(ref, model, prefix, temperature, top_k))


SAMPLING_MISTAKES = {  # feedback -> oracles.generation.sampling_probs's mistake; the top-k ones apply with top_k only
    "the temperature is ignored": "no_temperature",
    "the logits are multiplied by the temperature instead of divided by it": "times_temperature",
}
TOP_K_MISTAKES = {
    "top_k is ignored": "no_top_k",
    "top-k keeps k + 1 logits": "k_plus_one",
    "top-k keeps exactly k tokens, dropping those tied with the k-th logit": "exactly_k",
    "the logits outside the top k are set to 0 instead of -inf before the softmax": "zero_fill",
    "the probabilities outside the top k are zeroed after the softmax but not renormalised": "not_renormalised",
}


def sampling_hints(t, model, prefix: torch.Tensor, temperature: float, top_k: int | None) -> dict:
    """Probabilities with one classic mistake each, from the reference model's logits for `prefix`."""
    with torch.no_grad():
        logits = t.expect(lambda ref: model(prefix[-model.context_length:][None])[0, -1])
    mistakes = SAMPLING_MISTAKES | (TOP_K_MISTAKES if top_k else {})
    hints = {msg: (lambda ref, m=m: ref.oracles.generation.sampling_probs(logits, temperature, top_k, m)) for msg, m in mistakes.items()}
    if top_k:
        hints[TOP_K_ONLY] = lambda ref: ref.oracles.generation.top_k_only(logits, temperature, top_k)
    return hints


TOP_K_ONLY = ("torch.multinomial gets the top-k probabilities only (softmax of torch.topk's values): pass all V "
              "probabilities, 0 outside the top k, so that the token it draws is the id itself")


@check("transformer.generate_sampling", builds_on=PARTS)
def generate_sampling(t, temperature: float, top_k: int | None = None, tie: bool = False, prompt_len: int = 5, max_new_tokens: int = 10):
    """One torch.multinomial call per new token, each with the reference's probabilities for the prefix the
    student had at that step (the cropped context, softmax(logits / T), top-k keeping ties), and every
    new token one those probabilities allow. `tie` makes two logits tie at the k-th place at every step."""
    model, reference = tiny_lm(t)
    if tie:
        t.expect(lambda ref: ref.oracles.generation.tie_at_kth(t.rng, reference, top_k))
        load_reference_weights(t, model, reference)
    prompt = random_prompt(t, prompt_len, VOCAB)
    spy = t.student.spy("torch.multinomial")
    what = (f"generate(model, prompt of {prompt_len} tokens, max_new_tokens={max_new_tokens}, temperature={temperature:g}, "
            f"top_k={top_k}) with context_length={CONTEXT}")
    got = t.student.transformer.generate(model, prompt, max_new_tokens, temperature, top_k, generator=t.student.torch_generator(t.seed % 2**32))
    got = generated(t, got, prompt, VOCAB, what)
    calls = t.student.value(spy.calls)
    if len(calls) != max_new_tokens:
        t.fail(f"{what}: torch.multinomial was called {len(calls)} times; call it exactly once per new token, as "
               "torch.multinomial(probs, 1, generator=generator) (not probs.multinomial, torch.distributions or numpy).")
    for i, probs in enumerate(calls):
        prefix = got[: prompt_len + i]
        want = reference_probs(t, reference, prefix, temperature, top_k)
        if type(probs) is torch.Tensor and probs.shape == (1, VOCAB):
            probs = probs[0]
        step = f"{what}: the probabilities passed to torch.multinomial for new token {i} (after {len(prefix)} tokens)"
        t.close(probs, want, step, hints=sampling_hints(t, reference, prefix, temperature, top_k))
        if want[got[len(prefix)]] == 0:
            t.fail(f"{step}: new token {i} is one they give probability 0; append what torch.multinomial returned.")


@check("transformer.generate_distribution", builds_on=PARTS)
def generate_distribution(t, temperature: float, top_k: int | None = None, draws: int = 2000, vocab: int = 6, prompt_len: int = 5):
    """Single new tokens from one prompt, each with its own seeded generator, follow the reference's
    distribution (chi-square, p < 1e-6 fails: a correct solution fails once in a million); and two
    generators seeded alike give the same continuation."""
    model, reference = tiny_lm(t, vocab)
    prompt = random_prompt(t, prompt_len, vocab)
    probs = reference_probs(t, reference, prompt, temperature, top_k)
    what = f"generate(model, prompt, 1, temperature={temperature:g}, top_k={top_k}, generator)"
    seeds = [t.seed % 2**32 + i for i in range(draws)]
    drawn = Counter()
    calls = [([model, prompt, 1, temperature, top_k], {"generator": t.student.torch_generator(seed)}) for seed in seeds]
    for got in t.student.map(t.student.transformer.generate, calls):
        drawn[int(generated(t, got, prompt, vocab, what)[-1])] += 1
    impossible = [token for token in drawn if probs[token] == 0]
    if impossible:
        t.fail(f"{what} drew token {impossible[0]}, which top-k excludes (probability 0).")
    if len(drawn) == 1 and probs.max() < 0.99:
        t.fail(f"{what}: {draws} generators seeded differently all gave the same token: draw with "
               "torch.multinomial(probs, 1, generator=generator), not argmax and not a fixed seed.")
    observed, expected = Counter({((), token): n for token, n in drawn.items()}), {(): dict(enumerate(probs.tolist()))}
    p_value = chi_square_p_value(observed, expected)
    if p_value < 1e-6:
        t.fail(f"{what}: {draws} draws (one per seed) do not follow softmax(logits / temperature) restricted to the top k "
               f"(chi-square p = {p_value:.1e}): draw the token torch.multinomial returns."
               + sample_shows(observed, expected, visible=t.visible, name=lambda token: f"token {token}"))
    again = [t.student.transformer.generate(model, prompt, CONTEXT, temperature, top_k, generator=t.student.torch_generator(seeds[0]))
             for _ in range(2)]
    if not torch.equal(*again):
        t.fail(f"{what}: two generators seeded alike gave different continuations: draw only from the generator passed in.")


# ---- training -------------------------------------------------------------------------------------------

CORPUS = Path(__file__).with_name("data") / "corpus.txt"
TRAIN_SIZES = {"context_length": 32, "d_model": 32, "num_layers": 2, "num_heads": 2, "d_ff": 64}
# 80 AdamW steps at lr 3e-3 on batches of 32 windows (was 300). Measured in-process on 4 seeds
# with the grader's loop (held-out loss on every 4th held-out window, HELD_STRIDE; unigram baseline 2.958):
# - grader's weights: the correct alternatives (tests/alternatives) track the reference to < 1e-3 nats, training
#   and held-out; logits that ignore the tokens stay at 2.98 held-out against the reference's 2.49-2.53.
# - own initialisation: the reference ends at 2.48-2.51 held-out; fused_hoisted's initialisation (std-1
#   embeddings) trails it by 0.05-0.13 and gpt_style's by at most 0.03, well inside margin 0.4; all-zero weights stay at
#   4.0, normal(0, 1) weights reach 3.2-3.4 and normal(0, 3) 10+, so they fail; normal(0, 0.3) (2.78-2.82) passes.
# A short run no longer tells a detached sub-module (attention trails by < 0.02 at 80 steps, by 0.26 only after
# 300) or a causal-mask leak (it needs about 200 steps to learn to copy): `reached` and `unseen` probe those.
TRAIN_STEPS, TRAIN_BATCH, TRAIN_LR = 80, 32, 3e-3
HELD_STRIDE = 4  # every 4th held-out window: 586 targets, a quarter of the evaluation's time


@functools.cache
def corpus() -> tuple[int, torch.Tensor, torch.Tensor]:
    """(V, train ids, held-out ids): characters of the course's own corpus, the last 10% held out."""
    text = CORPUS.read_text(encoding="utf-8")
    chars = sorted(set(text))
    ids = torch.tensor([chars.index(c) for c in text])
    cut = len(ids) * 9 // 10
    return len(chars), ids[:cut], ids[cut:]


class Here:
    """The training loop's operations run in this process (the reference)."""

    torch, builtins = torch, builtins

    @staticmethod
    def keep(fn, *args, **kwargs):
        return fn(*args, **kwargs)

    fetch = keep


class InWorker:
    """The training loop's operations run in the worker, on the student's objects, which stay there."""

    def __init__(self, student):
        self.student, self.torch, self.builtins = student, student.torch, student.builtins

    def keep(self, fn, *args, **kwargs):
        return self.student.call(fn, *args, keep=True, **kwargs)

    def fetch(self, fn, *args, **kwargs):
        return self.student.call(fn, *args, **kwargs)


def train(on, model, batches: list[tuple[torch.Tensor, torch.Tensor]], lr: float) -> list[float]:
    """The grader's loop, the same for both sides: AdamW, mean cross-entropy over every position. The loss
    is computed here from the model's logits, so the student's loss functions play no part."""
    optimizer = on.keep(on.torch.optim.AdamW, on.keep(model.parameters), lr=lr)
    losses = []
    for x, y in batches:
        logits = on.keep(model, x)
        loss = on.keep(on.torch.nn.functional.cross_entropy, on.keep(logits.flatten, 0, 1), y.flatten())
        on.fetch(loss.backward)
        on.fetch(optimizer.step)
        on.fetch(optimizer.zero_grad)
        losses.append(on.fetch(loss.item))
    return losses


def last_logits(on, model, windows: torch.Tensor):
    """The logits at the last position of each window, computed without an autograd graph."""
    forward = on.keep(on.keep(on.torch.no_grad), model)
    return on.fetch(on.keep(forward, windows).select, 1, -1)


def small_init(rng: np.random.Generator, model):
    """GPT-2-like weights drawn by the grader: normal(0, 0.02), LayerNorms at weight 1 and bias 0."""
    fill_parameters(rng, model, scale=0.02)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln" in f".{name}":
                p.fill_(1.0 if name.endswith("weight") else 0.0)
    return model


def first_gradients(on, model, x: torch.Tensor, y: torch.Tensor) -> dict:
    """{parameter name: its gradient (None when unused)} of the mean cross-entropy on one batch, taken with
    torch.autograd.grad, so nothing is accumulated in .grad before training."""
    named = on.keep(on.builtins.dict, on.keep(model.named_parameters))
    names, params = on.fetch(on.builtins.list, named), on.keep(on.builtins.list, on.keep(named.values))
    loss = on.keep(on.torch.nn.functional.cross_entropy, on.keep(on.keep(model, x).flatten, 0, 1), y.flatten())
    return dict(zip(names, on.fetch(on.torch.autograd.grad, loss, params, allow_unused=True)))


def reached(t, model, reference, x: torch.Tensor, y: torch.Tensor, what: str) -> None:
    """From the grader's weights, every weight whose gradient is not zero in the reference must get a gradient
    that is not zero either (a detached or unused sub-module learns nothing, however long the run)."""
    got = first_gradients(InWorker(t.student), model, x, y)
    want = t.expect(lambda ref: {k: float(g.norm()) for k, g in first_gradients(Here, reference, x, y).items() if g is not None})
    cut = [name for name, norm in want.items() if norm > 0 and not (type(got.get(name)) is torch.Tensor and bool(got[name].ne(0).any()))]
    if cut:
        t.fail(f"{what}: no gradient reaches {', '.join(cut)} on the first training batch (its gradient is None or zero, "
               "the reference's is not), so training never changes it: is it detached (.detach(), .data, torch.no_grad()) "
               "or left out of forward?")


def unseen(t, model, x: torch.Tensor, logits: torch.Tensor, what: str) -> None:
    """Changing the tokens after the middle of each window leaves the logits before it where they were: a mask
    that leaks only at the training sizes would show as a training loss far below the reference's, but only
    after a few hundred steps."""
    p = x.shape[1] // 2
    changed = x.clone()
    changed[:, p + 1:] = (x[:, p + 1:] + torch.from_numpy(t.rng.integers(1, logits.shape[-1], size=tuple(changed[:, p + 1:].shape)))) % logits.shape[-1]
    before, after = logits[:, :p + 1].detach(), lm_logits(t, model, changed, logits.shape[-1], what)[:, :p + 1].detach()
    moved = float((after - before).abs().max())
    if not moved <= 1e-4 * (1 + float(before.abs().max())):  # float32 rounding at most; an unmasked position moves by far more
        t.fail(f"{what}: the logits at positions 0..{p} moved (by up to {moved:.2g}) when only the tokens after position {p} "
               "changed: position p may see tokens 0..p only. Does the causal mask hold at this sequence length?")


def trainable(t, model, reference) -> None:
    """Every weight of the reference's is a parameter of the student's model that requires grad."""
    got = t.student.call(t.student.builtins.dict, t.student.call(model.named_parameters, keep=True))
    names = t.expect(lambda ref: [name for name, _ in reference.named_parameters()])
    frozen = [name for name in names if not (type(got.get(name)) is torch.Tensor and got[name].requires_grad)]
    if frozen:
        t.fail(f"Not trainable: {', '.join(frozen)} (missing from named_parameters() under these names, or requires_grad "
               "is False), so the optimiser would never change them. Create every weight as an nn.Parameter or through "
               "nn.Linear / nn.Embedding, on a submodule registered as an attribute or in an nn.ModuleList.")


@check("transformer.training", builds_on=PARTS, data=(CORPUS,), imports=("torch._dynamo",))  # AdamW's first construction imports it: 0.9 s
def training(t, steps: int = TRAIN_STEPS, batch: int = TRAIN_BATCH, lr: float = TRAIN_LR, init: Literal["grader", "own"] = "grader",
             margin: float = 0.1):
    """The grader's loop trains the student's TransformerLM and the reference on the course corpus, from the
    same weights (init="grader": drawn by the grader; "own": each model's own initialisation after the same
    torch.manual_seed) on the same batches. The student's training loss (mean of the last 20 steps) and
    held-out loss must come within `margin` nats of the reference's, and the held-out loss must beat
    character frequencies. A model that does not learn (no gradient reaching its weights, frozen or
    unregistered parameters, logits that ignore the input) fails; so does an untrainable initialisation, and
    so do positions that see the tokens after them in a training batch."""
    vocab, train_ids, held = corpus()
    n = TRAIN_SIZES["context_length"]

    def build(tf):
        return tf.TransformerLM(vocab, **TRAIN_SIZES)

    if init == "grader":
        reference = t.expect(lambda ref: small_init(t.rng, build(ref.transformer)))
        model = build(t.student.transformer)
        load_reference_weights(t, model, reference)
    else:
        reference = t.expect(lambda ref: seeded(t.seed % 2**32, lambda: build(ref.transformer)))
        t.student.torch.manual_seed(t.seed % 2**32)
        model = build(t.student.transformer)
    trainable(t, model, reference)
    windows = train_ids[torch.from_numpy(t.rng.integers(0, len(train_ids) - n, size=(steps, batch, 1))) + torch.arange(n + 1)]
    batches = [(w[:, :-1], w[:, 1:]) for w in windows]
    what = f"TransformerLM(V={vocab}, " + ", ".join(f"{k}={v}" for k, v in TRAIN_SIZES.items()) + ")"
    on_batch = f"{what} on a batch of shape {tuple(batches[0][0].shape)}"
    logits = lm_logits(t, model, batches[0][0], vocab, on_batch)
    if not logits.requires_grad:
        t.fail(f"{what}: the logits do not require grad, so no gradient can reach the weights "
               "(torch.no_grad(), .detach(), .data or numpy in forward?).")
    unseen(t, model, batches[0][0], logits, on_batch)
    if init == "grader":  # from its own initialisation a correct model may start with zero gradients (zeroed projections)
        reached(t, model, reference, *batches[0], on_batch)

    ref_losses = t.expect(lambda ref: train(Here, reference, batches, lr))  # on one thread, as grade() runs the reference
    losses = train(InWorker(t.student), model, batches, lr)
    run = f"{what} trained by the grader ({steps} AdamW steps, lr {lr:g}, batches of {batch} windows of {n} characters"
    run += ", from the grader's weights)" if init == "grader" else ", from your own initialisation)"
    final, ref_final = float(np.mean(losses[-20:])), float(np.mean(ref_losses[-20:]))
    shown = t.visible
    if not final <= ref_final + margin:
        t.fail(f"{run}: the training loss went from {losses[0]:.3f} to {final:.3f} (mean of the last 20 steps); "
               + (f"the reference's went from {ref_losses[0]:.3f} to {ref_final:.3f}, " if shown else "")
               + f"and a correct model ends within {margin:g} of the reference's."
               + (" It hardly moved: does a gradient reach every weight?" if abs(final - losses[0]) < 0.1 else ""))

    held_windows, targets = held[:-1].unfold(0, n, 1)[::HELD_STRIDE], held[n:][::HELD_STRIDE]
    last = last_logits(InWorker(t.student), model, held_windows)
    if type(last) is not torch.Tensor or tuple(last.shape) != (len(targets), vocab):
        t.fail(f"{what}: on a batch of {len(targets)} held-out windows of {n} tokens, expected logits of shape {(len(targets), n, vocab)}.")
    loss = torch.nn.functional.cross_entropy(last.double(), targets).item()
    ref_loss = torch.nn.functional.cross_entropy(t.expect(lambda ref: last_logits(Here, reference, held_windows)).double(), targets).item()
    unigram = unigram_loss(train_ids, targets, vocab)
    if not loss <= min(ref_loss + margin, unigram):
        t.fail(f"{run}: on held-out text (each character given the {n} before it) its perplexity is {math.exp(loss):.2f}; "
               + (f"the reference's is {math.exp(ref_loss):.2f}, " if shown else "")
               + f"character frequencies alone give {math.exp(unigram):.2f}, and a correct model comes within {margin:g} nats "
               "of the reference's cross-entropy."
               + (" Its training loss ended well below the reference's: do positions see the tokens after them (causal mask)?"
                  if final < ref_final - margin else ""))


def seeded(seed: int, make):
    """make() right after torch.manual_seed(seed), leaving the global RNG as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make()


def unigram_loss(train_ids: torch.Tensor, targets: torch.Tensor, vocab: int) -> float:
    """The baseline: add-one character frequencies of the training text, on the held-out targets."""
    p = (torch.bincount(train_ids, minlength=vocab).double() + 1) / (len(train_ids) + vocab)
    return -p[targets].log().mean().item()
