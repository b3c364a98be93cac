"""Cases for component `seq2seq` (seq2seq.py): an encoder-decoder GRU with dot-product attention.

Models get random, non-symmetric float64 weights, loaded into the reference and into the student's Seq2Seq by
state-dict name, so names, shapes, values and every gradient are graded together. Sizes differ wherever the
API allows (E != H, source and target vocabularies, S != T), sources are right-padded to varied lengths (one
fills every column, another is shorter; one encode case ends every source with PAD, where a packed encoder unpacked
without total_length comes up short), and the states attended to are at scale 1, so a mask that is ignored,
a softmax over the wrong axis, a scaled score or a context taken from the wrong state all show. Greedy decoding
runs models whose EOS bias makes the examples stop at different, known steps, one never within max_len.
The training case trains the student's model with the grader's own loop on reversing short sequences and
judges it by the student's own greedy decoding of unseen ones.
"""
from __future__ import annotations

import math

import numpy as np

from ..gradients import check_gradients, fill_parameters, load_reference_weights
from ..rounding import rounded
from . import check
from .attention import masked_weights_are_zero
from .common import call_leaving_inputs, tensor, tensors, torch_dtype
from .generation import InWorker, seeded, trainable
from ..tensors import deferred

torch = deferred("torch")

FILE = "seq2seq.py"  # the student API's file that holds this component: the rubric and submissions know it from here

PAD, BOS, EOS = 0, 1, 2
VOCABS = {"src_vocab": 9, "tgt_vocab": 11}  # the vocabularies differ, and cases take E != H


# ---- inputs -----------------------------------------------------------------------------------------


def sources(rng: np.random.Generator, batch: int, length: int, vocab: int) -> torch.Tensor:
    """(B, S) right-padded sources of tokens in [3, vocab): one example fills all S positions and, when B > 1,
    another is shorter, so PAD shows; the others have 1 to S tokens."""
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length
    if batch > 1 and length > 1:
        lengths[1] = rng.integers(1, length)
    lengths = rng.permutation(lengths)
    tokens = rng.integers(3, vocab, size=(batch, length))
    return torch.from_numpy(np.where(np.arange(length) < lengths[:, None], tokens, PAD))


def targets(rng: np.random.Generator, batch: int, steps: int, vocab: int) -> torch.Tensor:
    """(B, steps + 1) targets BOS, y_1 .. y_n, EOS, then PAD, with n from 0 to steps - 1: one example fills every
    column and, when B > 1, another ends early, so PAD targets show."""
    lengths = rng.integers(0, steps, size=batch)
    lengths[0] = steps - 1
    if batch > 1 and steps > 1:
        lengths[1] = rng.integers(0, steps - 1)
    lengths = rng.permutation(lengths)
    tgt = np.full((batch, steps + 1), PAD)
    tgt[:, 0] = BOS
    for row, n in zip(tgt, lengths):
        row[1:n + 1] = rng.integers(3, vocab, size=n)
        row[n + 1] = EOS
    return torch.from_numpy(tgt)


def sizes(d_emb: int, d_hidden: int) -> dict:
    return VOCABS | {"d_emb": d_emb, "d_hidden": d_hidden}


def models(t, size: dict, dtype: str = "float64"):
    """(student, reference) Seq2Seq models with the same random weights."""
    reference = t.expect(lambda ref: fill_parameters(t.rng, ref.seq2seq.Seq2Seq(**size).to(torch_dtype(dtype))))
    student = t.student.seq2seq.Seq2Seq(**size)
    load_reference_weights(t, student, reference)
    return student, reference


def describe(size: dict, dtype: str = "float64") -> str:
    return "Seq2Seq(" + ", ".join(f"{k}={v}" for k, v in size.items()) + f"), {dtype}"


# ---- likely mistakes, for the feedback's hints ---------------------------------------------------------

def attend_mistakes(hidden: int) -> dict:
    """What oracles.seq2seq.attend is told, for each mistake of attention."""
    return {
        "the softmax runs over the batch axis (dim=0); it must normalise over the source positions (dim=-1)": {"dim": 0},
        "the mask is ignored: PAD positions get attention weight": {"use_mask": False},
        "the scores are divided by sqrt(H); the lecture's dot-product score is not scaled": {"scale": math.sqrt(hidden)},
    }


def step_mistakes(hidden: int) -> dict:
    """What oracles.seq2seq.decode_step is told, for each mistake of one decoder step."""
    return attend_mistakes(hidden) | {
        "the context comes from the new state s_t (Luong's order): the previous state s_{t-1} attends, before the update": {"query": "new"},
        "the output layer reads cat[c, s]; it must read cat[s, c], the new state first": {"out_order": "c_s"},
        "the decoder cell reads cat[c, embedding]; it must read cat[embedding, c], the embedding first": {"in_order": "c_e"},
    }


# ---- attend -------------------------------------------------------------------------------------------


def attend_inputs(rng, batch: int, src_len: int, hidden: int, dtype: str):
    """s (B, H) and Hs (B, S, H) at scale 1, so that scores are O(H) and the softmax is far from uniform, and the
    padding mask of random sources."""
    mask = sources(rng, batch, src_len, 5) != PAD
    return tensor(rng, batch, hidden, dtype=dtype, scale=1.0), tensor(rng, batch, src_len, hidden, dtype=dtype, scale=1.0), mask


@check("seq2seq.attend", subject="attend")
def attend(t, batch: int = 4, src_len: int = 7, hidden: int = 5, dtype: str = "float64"):
    """Weights and context against the reference (inputs left as they were), masked weights exactly 0, then the
    gradients of s and Hs."""
    s, Hs, mask = attend_inputs(t.rng, batch, src_len, hidden, dtype)
    want = t.expect(lambda ref: rounded(ref.seq2seq.attend, s, Hs, mask))
    what = f"attend with s {tuple(s.shape)}, Hs {tuple(Hs.shape)} and a (B, S) padding mask, {dtype}"
    got = tensors(t, call_leaving_inputs(t, t.student.seq2seq.attend, [s, Hs, mask], ("s", "Hs", "mask"), what), what, ("context", "weights"))
    for i, name in ((1, "weights"), (0, "context")):
        t.close(got[i], want[i], f"{what}: {name}", hints={
            msg: (lambda ref, kw=kw, i=i: ref.oracles.seq2seq.attend(s, Hs, mask, **kw)[i]) for msg, kw in attend_mistakes(hidden).items()})
    masked_weights_are_zero(t, got[1], mask, f"{what}: weights")
    check_gradients(t, t.student.seq2seq.attend, lambda *a: t.expect(lambda ref: ref.seq2seq.attend(*a)), [s, Hs, mask],
                    grad_args=range(2), names=("s", "Hs"), outputs=("context", "weights"))


@check("seq2seq.attend_distributions")
def attend_distributions(t, batch: int = 4, src_len: int = 8, hidden: int = 6):
    """Each row of weights is >= 0 and sums to 1, PAD positions get exactly 0, and the context is the weighted sum
    of the states (the student's own outputs only). The states at PAD positions score about +1e5, so a finite
    'large negative' fill leaks weight onto them."""
    s, Hs, mask = attend_inputs(t.rng, batch, src_len, hidden, "float64")
    s[:, 0] = 1.0
    Hs[..., 0] = torch.where(mask, Hs[..., 0], 1e5)
    what = f"attend with Hs {tuple(Hs.shape)} whose PAD positions score about 1e5, float64"
    context, weights = tensors(t, t.student.seq2seq.attend(s, Hs, mask), what, ("context", "weights"))
    if tuple(context.shape) != tuple(s.shape) or tuple(weights.shape) != tuple(mask.shape) or {context.dtype, weights.dtype} != {Hs.dtype}:
        t.fail(f"{what}: expected float64 context of shape {tuple(s.shape)} and weights of shape {tuple(mask.shape)}, got "
               f"{context.dtype} {tuple(context.shape)} and {weights.dtype} {tuple(weights.shape)}.")
    if not torch.isfinite(weights).all():
        t.fail(f"{what}: {int((~torch.isfinite(weights)).sum())} weights are NaN or Inf.")
    if (weights < 0).any():
        t.fail(f"{what}: {int((weights < 0).sum())} weights are negative; softmax weights are >= 0.")
    masked_weights_are_zero(t, weights, mask, f"{what}: weights")
    t.close(weights.sum(-1), torch.ones(batch, dtype=torch.float64),
            f"{what}: the sum of each row of weights over the source positions (must be 1; is the softmax over dim=-1?)")
    t.close(context, torch.einsum("bs,bsh->bh", weights, Hs), f"{what}: the context must be the sum of Hs[:, i] weighted by your weights")


# ---- the model ------------------------------------------------------------------------------------------


@check("seq2seq.encode", subject="Seq2Seq.encode")
def encode(t, batch: int = 5, src_len: int = 7, d_emb: int = 4, d_hidden: int = 6, pad_columns: int = 0):
    """Hs at the non-PAD positions (a packed sequence may leave anything at PAD), the mask exactly, and s0, the
    state at each source's last token; the source left as it was. `pad_columns` all-PAD columns end the batch, so
    no source fills every column: a packed encoder unpacked without total_length=S returns fewer positions."""
    size = sizes(d_emb, d_hidden)
    model, reference = models(t, size)
    src = sources(t.rng, batch, src_len, size["src_vocab"])
    src = torch.cat([src, torch.full((batch, pad_columns), PAD)], 1)
    with torch.no_grad():
        Hs, mask, s0 = t.expect(lambda ref: reference.encode(src))
    what = f"{describe(size)}.encode on right-padded sources of shape {tuple(src.shape)}"
    if pad_columns:
        what += f" whose last {pad_columns} column{'s are' if pad_columns > 1 else ' is'} PAD in every source"
    got = tensors(t, call_leaving_inputs(t, model.encode, [src], ("src",), what), what, ("Hs", "mask", "s0"))
    t.close(got[1], mask, f"{what}: mask (src != PAD, True at the tokens)")
    kept = mask[..., None]
    t.close(got[0].detach().masked_fill(~kept, 0.0), Hs.masked_fill(~kept, 0.0), f"{what}: Hs at the non-PAD positions (PAD positions are not graded)")
    t.close(got[2].detach(), s0, f"{what}: s0", hints={
        "s0 is the GRU's final state, which has read the PADs too: take Hs at each example's last non-PAD position":
            lambda ref: ref.oracles.seq2seq.encode(reference, src, s0="final")[2].detach()})


def step_inputs(t, batch: int, src_len: int, size: dict):
    """y_prev (B,), s_prev (B, H), Hs (B, S, H) at scale 1, and a padding mask."""
    y_prev = torch.from_numpy(t.rng.integers(0, size["tgt_vocab"], size=batch))
    s_prev = tensor(t.rng, batch, size["d_hidden"], dtype="float64", scale=1.0)
    Hs = tensor(t.rng, batch, src_len, size["d_hidden"], dtype="float64", scale=1.0)
    return [y_prev, s_prev, Hs, sources(t.rng, batch, src_len, 5) != PAD]


@check("seq2seq.decode_step", subject="Seq2Seq.decode_step", builds_on=("seq2seq.attend",))
def decode_step(t, batch: int = 4, src_len: int = 6, d_emb: int = 4, d_hidden: int = 6):
    """logits, s and weights of one step against the reference (inputs left as they were), then the gradients of
    s_prev, Hs and every parameter."""
    size = sizes(d_emb, d_hidden)
    model, reference = models(t, size)
    args = step_inputs(t, batch, src_len, size)
    with torch.no_grad():
        want = t.expect(lambda ref: reference.decode_step(*args))
    what = f"{describe(size)}.decode_step with Hs of shape {tuple(args[2].shape)} and a padding mask"
    got = tensors(t, call_leaving_inputs(t, model.decode_step, args, ("y_prev", "s_prev", "Hs", "mask"), what), what, ("logits", "s", "weights"))
    for i, name in ((2, "weights"), (1, "s"), (0, "logits")):
        t.close(got[i].detach(), want[i], f"{what}: {name}", hints={
            msg: (lambda ref, kw=kw, i=i: ref.oracles.seq2seq.decode_step(reference, *args, **kw)[i].detach())
            for msg, kw in step_mistakes(d_hidden).items()})
    # the decoder's side only: the encoder and src_embed play no part in one step
    decoder_side = t.expect(lambda ref: torch.nn.ModuleDict({name: reference.get_submodule(name) for name in ("tgt_embed", "decoder", "out")}))
    check_gradients(t, model.decode_step, lambda *a: reference.decode_step(*a), args, grad_args=(1, 2), names=("s_prev", "Hs"),
                    outputs=("logits", "s", "weights"), parameters=(model, decoder_side))


def forward_hints(reference, src, tgt_in, hidden: int, i: int) -> dict:
    """Output i (0: logits, 1: weights) of teacher forcing with each likely mistake."""
    mistakes = step_mistakes(hidden) | {
        "s0 is the GRU's final state, which has read the PADs too: start from the state at each source's last token": {"s0": "final"},
        "no teacher forcing: the decoder reads its own argmax from step 1 on; it must read tgt_in[:, t] at step t": {"teacher": False},
    }
    return {msg: (lambda ref, kw=kw: ref.oracles.seq2seq.forward(reference, src, tgt_in, **kw)[i].detach()) for msg, kw in mistakes.items()}


@check("seq2seq.forward", subject="Seq2Seq.forward", builds_on=("seq2seq.encode", "seq2seq.decode_step"))
def forward(t, batch: int = 4, src_len: int = 6, tgt_len: int = 5, d_emb: int = 4, d_hidden: int = 6, dtype: str = "float64"):
    """Teacher forcing: logits (B, T, V) and weights (B, T, S) against the reference, then the gradient of every
    parameter through every step."""
    size = sizes(d_emb, d_hidden)
    model, reference = models(t, size, dtype)
    src = sources(t.rng, batch, src_len, size["src_vocab"])
    tgt_in = targets(t.rng, batch, tgt_len, size["tgt_vocab"])[:, :-1]
    with torch.no_grad():
        want = t.expect(lambda ref: rounded(reference, src, tgt_in))
    what = f"{describe(size, dtype)} forward on sources {tuple(src.shape)} and tgt_in {tuple(tgt_in.shape)}"
    got = tensors(t, call_leaving_inputs(t, model, [src, tgt_in], ("src", "tgt_in"), what), what, ("logits", "weights"))
    for i, name in ((0, "logits"), (1, "weights")):
        t.close(got[i].detach(), want[i], f"{what}: {name}", hints=forward_hints(reference, src, tgt_in, d_hidden, i))
    check_gradients(t, model, reference, [src, tgt_in], grad_args=(), names=(), outputs=("logits", "weights"), parameters=(model, reference))


@check("seq2seq.padding", subject="handling of PAD (trailing PADs must change nothing)", builds_on=("seq2seq.encode", "seq2seq.attend"))
def padding(t, batch: int = 4, src_len: int = 6, tgt_len: int = 5, extra: int = 3, d_emb: int = 4, d_hidden: int = 6):
    """PAD at the end of the sources changes nothing: with `extra` more PAD columns the logits stay where they were
    and the new positions get weight exactly 0; and the most padded example, alone and without its PADs, gives its
    row of the batch. Compares the student with itself (the reference's weights loaded, so the model is not blind)."""
    size = sizes(d_emb, d_hidden)
    model, _ = models(t, size)
    src = sources(t.rng, batch, src_len, size["src_vocab"])
    tgt_in = targets(t.rng, batch, tgt_len, size["tgt_vocab"])[:, :-1]
    what = f"{describe(size)} forward on sources {tuple(src.shape)}"
    logits, weights = tensors(t, model(src, tgt_in), what, ("logits", "weights"))
    padded = torch.cat([src, torch.full((batch, extra), PAD)], 1)
    more_logits, more_weights = tensors(t, model(padded, tgt_in), what, ("logits", "weights"))
    t.close(more_logits.detach(), logits.detach(), f"{what} and on the same sources with {extra} more PAD columns: the logits must not "
            "change (are PAD positions masked, and does the decoder start from the state at each source's last token?)")
    masked_weights_are_zero(t, more_weights.detach(), (padded != PAD)[:, None, :].expand(-1, tgt_len, -1), f"{what} with {extra} more PAD columns: weights")
    lengths = (src != PAD).sum(1)
    b = int(lengths.argmin())
    alone, _ = tensors(t, model(src[b:b + 1, :int(lengths[b])], tgt_in[b:b + 1]), what, ("logits", "weights"))
    t.close(alone.detach(), logits[b:b + 1].detach(), f"{what}: example {b} alone, without its PADs, must give its row of the batch's "
            "logits (its PADs must change nothing)")


# ---- the loss ----------------------------------------------------------------------------------------------


@check("seq2seq.loss", builds_on=("seq2seq.forward",))
def loss(t, batch: int = 4, src_len: int = 6, tgt_len: int = 6, d_emb: int = 4, d_hidden: int = 6):
    """Teacher forcing: inputs tgt[:, :-1], targets tgt[:, 1:], PAD targets left out of the mean; then the loss's
    gradients."""
    size = sizes(d_emb, d_hidden)
    model, reference = models(t, size)
    src = sources(t.rng, batch, src_len, size["src_vocab"])
    tgt = targets(t.rng, batch, tgt_len, size["tgt_vocab"])
    want = t.expect(lambda ref: ref.seq2seq.seq2seq_loss(reference, src, tgt).item())
    what = f"seq2seq_loss on sources {tuple(src.shape)} and targets {tuple(tgt.shape)} with {int((tgt[:, 1:] == PAD).sum())} PAD targets"
    got = t.student.seq2seq.seq2seq_loss(model, src, tgt)
    if type(got) is not torch.Tensor or got.numel() != 1:
        t.fail(f"{what}: expected a scalar tensor, got {type(got).__name__}.")

    def wrong(inputs: slice = slice(None, -1), **mistake):
        return lambda ref: ref.oracles.seq2seq.loss(reference(src, tgt[:, inputs])[0], tgt, **mistake)

    t.close(got.item(), want, what, hints={
        "teacher forcing shifted by one: the logits at step t are scored against the decoder's own input tgt[:, t], "
        "not the next token tgt[:, t + 1]": wrong(targets="same"),
        "teacher forcing shifted by one: the decoder reads tgt[:, 1:], the very tokens it must predict; it reads tgt[:, :-1]": wrong(slice(1, None)),
        "PAD targets are counted in the mean; leave them out (ignore_index=PAD)": wrong(ignore_pad=False),
        "the sum over the targets instead of their mean": lambda ref: want * int((tgt[:, 1:] != PAD).sum()),
        "the summed loss is divided by the batch size B instead of by the number of non-PAD targets": wrong(reduce="batch"),
        "each step's mean loss is summed over the steps (loss += criterion(logits[:, t], tgt[:, t + 1])): "
        "the loss is one mean over every non-PAD target of the batch": wrong(reduce="step_sum"),
        "each step's mean loss is averaged over the steps, which weighs the few targets of a late step as much as "
        "the many of an early one: the loss is one mean over every non-PAD target of the batch": wrong(reduce="step_mean"),
        "each sentence's mean loss is averaged over the sentences, which weighs a short sentence's targets more: "
        "the loss is one mean over every non-PAD target of the batch": wrong(reduce="sentence_mean"),
    }, dims={"B, the batch size": batch, "T, the number of decoder steps": tgt_len,
             "N, the number of non-PAD targets": int((tgt[:, 1:] != PAD).sum())})
    check_gradients(t, t.student.seq2seq.seq2seq_loss, lambda _model, s, y: t.expect(lambda ref: ref.seq2seq.seq2seq_loss(reference, s, y)),
                    [model, src, tgt], grad_args=(), names=(), outputs=("loss",), parameters=(model, reference))


# ---- greedy decoding -----------------------------------------------------------------------------------------


def decoded(t, got, batch: int, max_len: int, vocab: int, what: str) -> list:
    """The student's tokens, or a failure unless they are B lists of at most max_len int ids in [0, V), none EOS."""
    if not (isinstance(got, list | tuple) and len(got) == batch and all(isinstance(row, list | tuple) for row in got)):
        t.fail(f"{what}: expected a list of {batch} lists of token ids, one per example, got "
               + (f"a {type(got).__name__} of {len(got)}" if isinstance(got, list | tuple) else type(got).__name__) + ".")
    for b, row in enumerate(got):
        if not all(type(token) is int for token in row):
            t.fail(f"{what}: example {b}'s tokens must be Python ints (use .tolist() or .item()), got "
                   f"{sorted({type(token).__name__ for token in row if type(token) is not int})[0]}.")
        if EOS in row:
            t.fail(f"{what}: example {b}'s tokens include EOS (id {EOS}) at index {list(row).index(EOS)}: each example stops at "
                   "its first EOS, which is not included in its list.")
        if len(row) > max_len:
            t.fail(f"{what}: example {b} has {len(row)} tokens; decoding stops after max_len = {max_len}.")
        if any(not 0 <= token < vocab for token in row):
            t.fail(f"{what}: example {b}'s tokens must be ids in [0, {vocab}).")
    return [list(row) for row in got]


@check("seq2seq.greedy", subject="greedy_decode", builds_on=("seq2seq.encode", "seq2seq.decode_step"))
def greedy(t, batch: int = 5, src_len: int = 6, max_len: int = 8, eos: bool = True, d_emb: int = 4, d_hidden: int = 6):
    """The reference's tokens exactly (float64, no near-ties). With eos, the model's EOS bias makes the examples
    stop at different known steps, one at least only at max_len (oracles.seq2seq.stop_at_known_steps)."""
    size = sizes(d_emb, d_hidden)
    src = sources(t.rng, batch, src_len, size["src_vocab"])

    def build(ref):
        for _ in range(100):  # a batch of models: for a few, no EOS bias separates the examples
            model = fill_parameters(t.rng, ref.seq2seq.Seq2Seq(**size).double())
            try:
                if eos:
                    ref.oracles.seq2seq.stop_at_known_steps(model, src, max_len)
                return model
            except ValueError:
                continue
        raise ValueError("no model stops these sources at varied steps")

    reference = t.expect(build)
    model = t.student.seq2seq.Seq2Seq(**size)
    load_reference_weights(t, model, reference)
    want = t.expect(lambda ref: ref.seq2seq.greedy_decode(reference, src, max_len))
    what = f"greedy_decode(model, sources of shape {tuple(src.shape)}, max_len={max_len})"
    if eos and t.visible:  # the lengths are the reference's answer: never said in a hidden case
        what += f" with a model whose examples output {', '.join(str(len(row)) for row in want)} tokens before their EOS or max_len"
    got = decoded(t, call_leaving_inputs(t, t.student.seq2seq.greedy_decode, [model, src, max_len], ("model", "src", "max_len"), what),
                  batch, max_len, size["tgt_vocab"], what)
    t.equal(got, want, what, hints={
        "decoding stops for the whole batch once one example emits EOS; every other example goes on to its own EOS or max_len":
            lambda ref: ref.oracles.seq2seq.greedy(reference, src, max_len, stop="batch")})


# ---- training --------------------------------------------------------------------------------------------------

TRAIN_SIZES = {"src_vocab": 10, "tgt_vocab": 10, "d_emb": 16, "d_hidden": 32}
TRAIN_LENGTHS = (2, 6)  # source lengths, inclusive
# 150 Adam steps at lr 1e-2, gradients clipped to norm 1, batches of 32: the reference, in-process on 20 seeds,
# reversed 82-98% of 200 unseen sources exactly (mean 92%); without clipping, 62-95%. A decoder that ignores its
# context still reaches 55-60% by memorising the source in s0, so the case asks for less than that: what it grades
# is that the grader's loop can train the model and the student's greedy_decode reads it right.
TRAIN_STEPS, TRAIN_BATCH, TRAIN_LR, TRAIN_CLIP = 150, 32, 1e-2, 1.0


def reversal_batch(rng: np.random.Generator, batch: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(src (B, S), tgt (B, S + 2)): random sources of TRAIN_LENGTHS tokens, right-padded; each target is BOS, the
    source reversed, EOS, PAD."""
    lo, hi = TRAIN_LENGTHS
    lengths = rng.integers(lo, hi + 1, size=batch)
    src, tgt = np.full((batch, hi), PAD), np.full((batch, hi + 2), PAD)
    tgt[:, 0] = BOS
    for i, n in enumerate(lengths):
        src[i, :n] = rng.integers(3, vocab, size=n)
        tgt[i, 1:n + 1], tgt[i, n + 1] = src[i, :n][::-1], EOS
    return torch.from_numpy(src), torch.from_numpy(tgt)


def train(on: InWorker, model, batches: list, lr: float, clip: float) -> list[float]:
    """The grader's loop: Adam on the teacher-forced cross-entropy over the non-PAD targets, computed here from
    the model's logits, so the student's seq2seq_loss plays no part."""
    optimizer = on.keep(on.torch.optim.Adam, on.keep(model.parameters), lr=lr)
    losses = []
    for src, tgt in batches:
        logits = on.keep(on.student.operator.getitem, on.keep(model, src, tgt[:, :-1]), 0)
        loss = on.keep(on.torch.nn.functional.cross_entropy, on.keep(logits.flatten, 0, 1), tgt[:, 1:].flatten(), ignore_index=PAD)
        on.fetch(loss.backward)
        on.fetch(on.torch.nn.utils.clip_grad_norm_, on.keep(model.parameters), clip)
        on.fetch(optimizer.step)
        on.fetch(optimizer.zero_grad)
        losses.append(on.fetch(loss.item))
    return losses


@check("seq2seq.training", builds_on=("seq2seq.forward", "seq2seq.padding", "seq2seq.greedy"), imports=("torch._dynamo",))  # Adam's first construction imports it
def training(t, steps: int = TRAIN_STEPS, batch: int = TRAIN_BATCH, lr: float = TRAIN_LR, accuracy: float = 0.5, unseen: int = 200):
    """The grader's loop trains the student's Seq2Seq, from PyTorch's initialisation of the reference drawn with
    the case's seed, to reverse short sequences; the student's greedy_decode must then reverse at least
    `accuracy` of `unseen` new sources exactly, and the trained model's attention weights must be distributions
    over each source's tokens."""
    V = TRAIN_SIZES["tgt_vocab"]
    reference = t.expect(lambda ref: seeded(t.seed % 2**32, lambda: ref.seq2seq.Seq2Seq(**TRAIN_SIZES)))
    model = t.student.seq2seq.Seq2Seq(**TRAIN_SIZES)
    load_reference_weights(t, model, reference)
    trainable(t, model, reference)
    losses = train(InWorker(t.student), model, [reversal_batch(t.rng, batch, V) for _ in range(steps)], lr, TRAIN_CLIP)
    run = (f"Seq2Seq({', '.join(f'{k}={v}' for k, v in TRAIN_SIZES.items())}) trained by the grader to reverse sequences of "
           f"{TRAIN_LENGTHS[0]} to {TRAIN_LENGTHS[1]} tokens ({steps} Adam steps, lr {lr:g}, batches of {batch}; the loss went from "
           f"{losses[0]:.3f} to {np.mean(losses[-10:]):.3f}, mean of the last 10 steps)")
    src, tgt = reversal_batch(t.rng, unseen, V)
    max_len = TRAIN_LENGTHS[1] + 1
    got = decoded(t, t.student.seq2seq.greedy_decode(model, src, max_len), unseen, max_len, V, f"{run}: greedy_decode(model, src, max_len={max_len})")
    right = [row[1:row.index(EOS)] for row in tgt.tolist()]
    share = float(np.mean([g == r for g, r in zip(got, right)]))
    if share < accuracy:
        t.fail(f"{run}: greedy_decode reversed {share:.0%} of {unseen} new sources exactly; a correct model reverses far more than "
               f"{accuracy:.0%}." + (" The loss hardly moved: does a gradient reach every weight?" if losses[0] - np.mean(losses[-10:]) < 0.3 else ""))
    what = f"{run}: forward on {unseen} new sources"
    _, weights = tensors(t, model(src, tgt[:, :-1]), what, ("logits", "weights"))
    mask = (src != PAD)[:, None, :].expand(-1, tgt.shape[1] - 1, -1)
    if type(weights) is not torch.Tensor or tuple(weights.shape) != tuple(mask.shape) or (weights < 0).any():
        t.fail(f"{what}: expected attention weights >= 0 of shape {tuple(mask.shape)}.")
    masked_weights_are_zero(t, weights.detach(), mask, f"{what}: weights")
    t.close(weights.detach().sum(-1).double(), torch.ones(mask.shape[:2], dtype=torch.float64),
            f"{what}: the sum of each step's weights over the source positions (must be 1)")
