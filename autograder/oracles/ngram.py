"""Oracles and mistakes for component `ngram`: probabilities by scanning the padded corpus."""
from __future__ import annotations

import math
from collections import Counter

BOS, EOS = "<s>", "</s>"


def padded(sentences: list[list[str]], n: int, *, bos: int | None = None, eos: bool = True, swapped: bool = False) -> list[list[str]]:
    """Each sentence padded with `bos` BOS tokens (default n - 1) and an EOS, BOS and EOS swapped or EOS left out."""
    start, end = (EOS, BOS) if swapped else (BOS, EOS)
    return [[start] * (n - 1 if bos is None else bos) + s + [end] * eos for s in sentences]


def counts(corpus: list[list[str]], n: int, *, pad: bool = True, eos: bool = True) -> dict:
    """n-gram counts of the corpus, with a mistake: sentences not padded, or the EOS n-grams left out."""
    sentences = padded(corpus, n) if pad else corpus
    found = Counter(tuple(s[i:i + n]) for s in sentences for i in range(len(s) - n + 1))
    return {g: c for g, c in found.items() if eos or g[-1] != EOS}


def brute_prob(corpus, n: int, k: float, word: str, context: list[str], vocab_delta: int = 0) -> float:
    """P(word | context) by scanning the padded corpus: an oracle independent of any model class.
    `vocab_delta` shifts |vocab| to reproduce the classic off-by-one vocabularies."""
    history = tuple(([BOS] * (n - 1) + list(context))[len(context):])
    c_hw = c_h = 0
    for sentence in padded(corpus, n):
        for i in range(n - 1, len(sentence)):
            if tuple(sentence[i - n + 1:i]) == history:
                c_h += 1
                c_hw += sentence[i] == word
    vocab_size = len({w for s in corpus for w in s} | {EOS}) + vocab_delta
    if k == 0:
        return c_hw / c_h if c_h else 0.0
    return (c_hw + k) / (c_h + k * vocab_size)


def probs(corpus, n: int, k: float, asked: list[tuple[str, list[str]]], *, vocab_delta: int = 0, head: bool = False) -> list[float]:
    """brute_prob of each (word, context); `head` takes the history from the start of the context (a mistake)."""
    return [brute_prob(corpus, n, k, word, context[: n - 1] if head else context, vocab_delta) for word, context in asked]


def factors(corpus, n: int, k: float, tokens: list[str]) -> list[float]:
    """The probability of each word of the sentence, EOS included, given the n - 1 before it."""
    p = [BOS] * (n - 1) + tokens + [EOS]
    return [brute_prob(corpus, n, k, p[i], p[n - 1:i]) for i in range(n - 1, len(p))]


def log_sum(probs: list[float]) -> float:
    return -math.inf if min(probs, default=1.0) == 0 else sum(math.log(p) for p in probs)


def sentence_logprobs(corpus, n: int, k: float, sentences: list[list[str]], *, eos: bool = True, base: float = math.e,
                      log: bool = True) -> list[float]:
    """Each sentence's log-probability, with a mistake: the EOS factor left out, another base, or no log at all."""
    sums = [log_sum(factors(corpus, n, k, tokens)[: None if eos else -1]) / math.log(base) for tokens in sentences]
    return sums if log else [math.exp(s) for s in sums]


def perplexity(corpus, n: int, k: float, held_out: list[list[str]], *, count_eos: bool = True, per: str = "token",
               sign: float = -1.0) -> float:
    """exp(sign * total log-probability / N), N the tokens (EOS included unless told otherwise) or the sentences."""
    total = sum(sentence_logprobs(corpus, n, k, held_out))
    tokens = sum(len(s) + count_eos for s in held_out) if per == "token" else len(held_out)
    return math.exp(sign * total / tokens)


def transition_probs(model, transitions: Counter) -> dict:
    """The reference model's next-token distribution for every history among `transitions`."""
    return {h: model.next_token_distribution(list(h)) for h in {h for h, _ in transitions}}
