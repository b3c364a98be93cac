"""Oracles and mistakes for generation: greedy decoding with a mistake, and the probabilities the reference
passes to torch.multinomial, right or with a classic mistake."""
from __future__ import annotations

import math
from unittest import mock

import numpy as np
import torch


def greedy(model, prompt: torch.Tensor, max_new_tokens: int, *, crop: str = "last", position: int = -1) -> torch.Tensor:
    """Greedy decoding with a classic mistake: the context cropped to its first tokens ("first") or to its last
    context_length - 1 ("short"), or the logits read at position 0."""
    ids, n = prompt, model.context_length
    with torch.no_grad():
        for _ in range(max_new_tokens):
            window = {"last": ids[-n:], "first": ids[:n], "short": ids[-(n - 1):]}[crop]
            ids = torch.cat([ids, model(window[None])[0, position].argmax().view(1)])
    return ids


def multinomial_probs(ref, model, prefix: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """What the reference's generate passes to torch.multinomial for the token after `prefix`."""
    seen, real = [], torch.multinomial

    def record(probs, *args, **kwargs):
        seen.append(probs.detach().clone())
        return real(probs, *args, **kwargs)

    with mock.patch.object(torch, "multinomial", record):
        ref.transformer.generate(model, prefix, 1, temperature, top_k)
    return seen[0]


def sampling_probs(logits: torch.Tensor, temperature: float, top_k: int | None, mistake: str) -> torch.Tensor:
    """softmax(logits / temperature) over the top k (ties with the k-th kept), with one mistake: the temperature
    ignored or multiplied, top_k ignored, k + 1 kept, exactly k kept (ties dropped), the rest set to 0
    instead of -inf, or zeroed after the softmax without renormalising."""
    V = len(logits)

    def at_least_kth(k: int) -> torch.Tensor:
        return logits >= logits.sort(descending=True).values[min(k, V) - 1]

    keep = at_least_kth(top_k) if top_k else torch.ones(V, dtype=torch.bool)

    def softmax(scaled, kept=keep, fill=-math.inf):
        return torch.softmax(scaled.masked_fill(~kept, fill), -1)

    scaled = logits / temperature
    return {
        "no_temperature": lambda: softmax(logits),
        "times_temperature": lambda: softmax(logits * temperature),
        "no_top_k": lambda: softmax(scaled, torch.ones(V, dtype=torch.bool)),
        "k_plus_one": lambda: softmax(scaled, at_least_kth(top_k + 1)),
        "exactly_k": lambda: softmax(scaled, torch.zeros(V, dtype=torch.bool).scatter(0, logits.topk(top_k).indices, True)),
        "zero_fill": lambda: softmax(scaled, fill=0.0),
        "not_renormalised": lambda: torch.softmax(scaled, -1) * keep,
    }[mistake]()


def top_k_only(logits: torch.Tensor, temperature: float, top_k: int) -> torch.Tensor:
    """The softmax of torch.topk's k values alone, largest first: what a sampler that draws an index into the top k
    passes to torch.multinomial."""
    return torch.softmax(logits.topk(min(top_k, len(logits))).values / temperature, -1)


def tie_at_kth(rng: np.random.Generator, model, k: int) -> None:
    """Make the logits at every position: k - 1 tokens in (1, 3), two tokens at exactly 0 (tied k-th),
    the rest in (-3, -1). ln_final's output is then 1 exactly on dimension 0 (weight 0, bias 1) and
    input-dependent elsewhere with norm below sqrt(d); the tied rows of lm_head read dimension 0 only."""
    head, ln = model.lm_head.weight, model.ln_final
    V, d = head.shape
    order = rng.permutation(V)
    offsets = torch.full((V,), -2.0, dtype=head.dtype)
    offsets[order[: k - 1]], offsets[order[k - 1: k + 1]] = 2.0, 0.0
    with torch.no_grad():
        ln.weight[0], ln.bias.zero_()[0] = 0.0, 1.0
        rows = head[:, 1:] * ln.weight[1:]
        head[:, 1:] *= 0.9 / math.sqrt(d) / rows.norm(dim=1, keepdim=True)  # |logit - offset| <= 0.9
        head[:, 0] = offsets
        head[order[k - 1: k + 1], 1:] = 0.0
