"""Oracles and mistakes for component `ngram`: probabilities by scanning the padded corpus."""
from __future__ import annotations

import math
from collections import Counter

BOS, EOS = "<s>", "</s>"


def padded(sentences: list[list[str]], n: int, *, bos: int | None = None, eos: bool = True, swapped: bool = False) -> list[list[str]]:
    """Each sentence padded with `bos` BOS tokens (default n - 1) and an EOS, BOS and EOS swapped or EOS left out."""
    start, end = (EOS, BOS) if swapped else (BOS, EOS)
    return [[start] * (n - 1 if bos is None else bos) + s + [end] * eos for s in sentences]


def counts(corpus: list[list[str]], n: int, *, pad: bool = True, eos: bool = True, across: bool = False) -> dict:
    """n-gram counts of the corpus, with a mistake: sentences not padded, the EOS n-grams left out, or the padded
    sentences joined into one stream (`across`), whose windows cross from one sentence into the next."""
    sentences = padded(corpus, n) if pad else corpus
    if across:
        sentences = [[token for s in sentences for token in s]]
    found = Counter(tuple(s[i:i + n]) for s in sentences for i in range(len(s) - n + 1))
    return {g: c for g, c in found.items() if eos or g[-1] != EOS}


def brute_prob(corpus, n: int, k: float, word: str, context: list[str], vocab_delta: int = 0, *, lower_order: bool = False,
               unseen_zero: bool = False, unseen_ngram_zero: bool = False, whole: bool = False) -> float:
    """P(word | context) by scanning the padded corpus: an oracle independent of any model class.
    `vocab_delta` shifts |vocab| to reproduce the classic off-by-one vocabularies; `lower_order` takes C(h) from
    count_ngrams(corpus, n - 1), as a textbook's C(w_{i-1}) suggests (its padding has one BOS fewer, and it counts the
    last n - 1 tokens, which nothing follows); `unseen_zero` gives an unseen history 0 whatever k is, and
    `unseen_ngram_zero` an unseen n-gram; `whole` takes
    the whole context as the history when n = 1, as context[-(n - 1):] does there (-0 is 0)."""
    history = tuple(context) if whole and n == 1 else tuple(([BOS] * (n - 1) + list(context))[len(context):])
    c_hw = c_h = 0
    for sentence in padded(corpus, n):
        for i in range(n - 1, len(sentence)):
            if tuple(sentence[i - n + 1:i]) == history:
                c_h += 1
                c_hw += sentence[i] == word
    if lower_order:  # the windows of length n - 1 of sentences padded with n - 2 BOS ([BOS] * -1 is empty, as in Python)
        shorter = [[BOS] * (n - 2) + s + [EOS] for s in corpus]
        c_h = sum(tuple(s[i:i + n - 1]) == history for s in shorter for i in range(len(s) - n + 2))
    vocab_size = len({w for s in corpus for w in s} | {EOS}) + vocab_delta
    if k == 0 or (unseen_zero and not c_h) or (unseen_ngram_zero and not c_hw):
        return c_hw / c_h if c_h else 0.0
    return (c_hw + k) / (c_h + k * vocab_size)


def probs(corpus, n: int, k: float, asked: list[tuple[str, list[str]]], *, vocab_delta: int = 0, head: bool = False,
          **mistake) -> list[float]:
    """brute_prob of each (word, context); `head` takes the history from the start of the context (a mistake), and
    `mistake` switches on one of brute_prob's."""
    return [brute_prob(corpus, n, k, word, context[: n - 1] if head else context, vocab_delta, **mistake) for word, context in asked]


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
               sign: float = -1.0, base: float = math.e) -> float:
    """base ** (sign * total natural-log probability / N), N the tokens (EOS included unless told otherwise) or the
    sentences; per="sentences' mean" is the mean of each sentence's own perplexity."""
    logprobs = sentence_logprobs(corpus, n, k, held_out)
    if per == "sentences' mean":
        return sum(math.exp(-lp / (len(s) + 1)) for lp, s in zip(logprobs, held_out)) / len(held_out)
    tokens = sum(len(s) + count_eos for s in held_out) if per == "token" else len(held_out)
    return base ** (sign * sum(logprobs) / tokens)


def transition_probs(model, transitions: Counter) -> dict:
    """The reference model's next-token distribution for every history among `transitions`."""
    return {h: model.next_token_distribution(list(h)) for h in {h for h, _ in transitions}}
