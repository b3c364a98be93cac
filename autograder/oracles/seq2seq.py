"""Oracles and mistakes for component `seq2seq`: the encoder-decoder with attention written again, with the
reference model's own modules (embeddings, GRU, GRUCell, Linear) and one classic mistake switched on; and
the weights that make EOS the argmax at known steps, for the greedy decoding cases."""
from __future__ import annotations

import torch
import torch.nn.functional as F

PAD, BOS, EOS = 0, 1, 2


def attend(s, Hs, mask, *, dim: int = -1, use_mask: bool = True, scale: float = 1.0):
    """(context, weights) of dot-product attention with a mistake: the softmax over `dim`, the mask ignored,
    or the scores divided by `scale`."""
    scores = torch.einsum("bsh,bh->bs", Hs, s) / scale
    if use_mask:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = torch.softmax(scores, dim=dim)
    return torch.einsum("bs,bsh->bh", weights, Hs), weights


def encode(m, src, *, s0: str = "last"):
    """(Hs, mask, s0) of model `m`, s0 the state at each example's last token ("last"), or the GRU's final
    state, which has read the PADs too ("final")."""
    mask = src != PAD
    Hs, h_n = m.encoder(m.src_embed(src))
    last = Hs[torch.arange(len(src)), mask.sum(1) - 1]
    return Hs, mask, {"last": last, "final": h_n[0]}[s0]


def decode_step(m, y_prev, s_prev, Hs, mask, *, query: str = "previous", out_order: str = "s_c", in_order: str = "e_c",
                **attend_mistake):
    """(logits, s, weights) of one decoder step with a mistake: the output layer's context from the new state
    s_t (query="new", Luong's order; the decoder's input keeps the context of s_{t-1}), [c, s] into the output
    layer (out_order="c_s"), [c, embedding] into the cell (in_order="c_e"), or one of attend's."""
    c, weights = attend(s_prev, Hs, mask, **attend_mistake)
    embedded = m.tgt_embed(y_prev)
    s = m.decoder(torch.cat([embedded, c] if in_order == "e_c" else [c, embedded], -1), s_prev)
    if query == "new":
        c, weights = attend(s, Hs, mask, **attend_mistake)
    return m.out(torch.cat([s, c] if out_order == "s_c" else [c, s], -1)), s, weights


def forward(m, src, tgt_in, *, s0: str = "last", teacher: bool = True, **step_mistake):
    """(logits, weights) of teacher forcing with a mistake: encode's, decode_step's, or the model fed its own
    argmax from step 1 on instead of tgt_in (teacher=False)."""
    Hs, mask, s = encode(m, src, s0=s0)
    logits, weights, y = [], [], tgt_in[:, 0]
    for t in range(tgt_in.shape[1]):
        step_logits, s, w = decode_step(m, y, s, Hs, mask, **step_mistake)
        logits.append(step_logits)
        weights.append(w)
        y = tgt_in[:, t + 1] if teacher and t + 1 < tgt_in.shape[1] else step_logits.argmax(-1)
    return torch.stack(logits, 1), torch.stack(weights, 1)


def loss(logits, tgt, *, targets: str = "next", ignore_pad: bool = True, reduce: str = "mean") -> float:
    """The mean cross-entropy of teacher-forced `logits` (B, T, V) over the non-PAD targets, with a mistake: scored
    against the inputs tgt[:, :-1] themselves (targets="same") instead of tgt[:, 1:], the PAD targets counted, or
    reduced another way: the sum divided by the batch size ("batch"), each step's mean summed over the steps
    ("step_sum", a loop of `loss += criterion(logits[:, t], tgt[:, t + 1])`) or averaged over them ("step_mean"),
    or each sentence's mean averaged over the sentences ("sentence_mean")."""
    y = tgt[:, 1:] if targets == "next" else tgt[:, :-1]
    nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=PAD if ignore_pad else -100, reduction="none").view(y.shape)
    kept = (y != PAD) if ignore_pad else torch.ones_like(y, dtype=torch.bool)
    per_step, per_sentence = nll.sum(0) / kept.sum(0), nll.sum(1) / kept.sum(1)
    return {"mean": lambda: nll.sum() / kept.sum(), "batch": lambda: nll.sum() / len(y), "step_sum": per_step.sum,
            "step_mean": per_step.mean, "sentence_mean": per_sentence.mean}[reduce]().item()


def argmax_tokens(m, src, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, gaps), each (B, steps): greedy decoding run for `steps` steps whatever comes, and at each step
    the EOS logit minus the largest other logit."""
    Hs, mask, s = encode(m, src)
    y = torch.full((len(src),), BOS)
    tokens, gaps = [], []
    for _ in range(steps):
        logits, s, _ = decode_step(m, y, s, Hs, mask)
        y = logits.argmax(-1)
        tokens.append(y)
        gaps.append(logits[:, EOS] - torch.cat([logits[:, :EOS], logits[:, EOS + 1:]], -1).max(-1).values)
    return torch.stack(tokens, 1), torch.stack(gaps, 1)


@torch.no_grad()
def greedy(m, src, max_len: int, *, stop: str = "each") -> list[list[int]]:
    """Greedy decoding with a mistake: stop="never" keeps every token (EOS and what follows) until every
    example has emitted EOS or has max_len tokens; stop="batch" ends every example once any emits EOS;
    stop="each" is right."""
    tokens, _ = argmax_tokens(m, src, max_len)
    eos = (tokens == EOS).int()
    first = torch.where(eos.any(1), eos.argmax(1), max_len).tolist()  # each example's first EOS step, or max_len
    rows = tokens.tolist()
    if stop == "never":
        return [row[: min(max(first) + 1, max_len)] for row in rows]
    steps = min(min(first) + 1, max_len) if stop == "batch" else max_len
    return [row[: min(steps, f)] for row, f in zip(rows, first)]


@torch.no_grad()
def stop_at_known_steps(m, src, max_len: int, margin: float = 0.05) -> list[int]:
    """Shift the EOS bias of `m`'s output layer so that, under greedy decoding, the examples of `src` emit EOS at
    steps as varied as possible (one at least after some tokens, one at least never within max_len), no argmax
    that matters within `margin` / 2 of a tie with EOS. Returns each example's output length. Raising EOS
    changes no argmax before an example's first EOS, so its tokens up to there stay as they were."""
    m.out.bias[EOS] -= 1e3  # first, EOS never wins: the gaps along the paths greedy decoding takes
    _, gaps = argmax_tokens(m, src, max_len)
    best, shift = (0, 0), None
    for level in gaps.flatten().sort().values.tolist():
        lift = margin - level  # gaps >= level win once lifted
        wins = gaps + lift > 0
        ends = torch.where(wins.any(1), wins.int().argmax(1), max_len)  # each example's first EOS step, or max_len
        upto = torch.arange(max_len) <= ends[:, None]  # the steps whose argmax decides the output
        if ((gaps + lift).abs() < margin / 2)[upto].any():
            continue
        inside = int(((ends > 0) & (ends < max_len)).sum())
        varied = (len(set(ends.tolist())), inside)
        if inside and (ends == max_len).any() and varied > best:
            best, shift = varied, lift
    if shift is None:
        raise ValueError("no EOS bias stops some examples of this batch and not others: draw another model")
    m.out.bias[EOS] += shift
    return [len(row) for row in greedy(m, src, max_len)]
