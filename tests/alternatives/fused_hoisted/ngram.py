"""A correct `ngram` in another style: a dict of per-history Counters, n-grams cut with zip, log-space
sentence probabilities summed with math.fsum, and sampling by inverse CDF on one rng.random() per word."""
from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

BOS = "<s>"
EOS = "</s>"


def pad_sentence(tokens: list[str], n: int) -> list[str]:
    padded = [BOS for _ in range(n - 1)]
    padded.extend(tokens)
    padded.append(EOS)
    return padded


def count_ngrams(sentences: list[list[str]], n: int) -> dict[tuple[str, ...], int]:
    counts: dict[tuple[str, ...], int] = {}
    for tokens in sentences:
        padded = pad_sentence(tokens, n)
        for gram in zip(*(padded[i:] for i in range(n))):
            counts[gram] = counts.get(gram, 0) + 1
    return counts


class NGramLM:
    def __init__(self, n: int, k: float = 0.0):
        self.n, self.k = n, k
        self.vocab: set[str] = set()
        self.following: dict[tuple[str, ...], Counter] = {}  # history -> Counter of the words after it
        self.totals: dict[tuple[str, ...], int] = {}  # history -> C(h)

    def fit(self, sentences: list[list[str]]) -> NGramLM:
        self.following = {}
        for gram, count in count_ngrams(sentences, self.n).items():
            self.following.setdefault(gram[:-1], Counter())[gram[-1]] += count
        self.totals = {h: sum(words.values()) for h, words in self.following.items()}
        self.vocab = set().union(*sentences, [EOS]) - {BOS}
        return self

    def _history(self, context: Sequence[str]) -> tuple[str, ...]:
        if self.n == 1:
            return ()
        return tuple(pad_sentence(list(context), self.n)[-self.n:-1])  # pad_sentence adds one EOS at the end

    def _fraction(self, word: str, history: tuple[str, ...]) -> tuple[float, float]:
        """(numerator, denominator) of P(word | history); the denominator is 0 only for an unseen history under MLE."""
        seen = self.following.get(history, Counter())[word]
        total = self.totals.get(history, 0)
        return seen + self.k, total + self.k * len(self.vocab)

    def prob(self, word: str, context: Sequence[str]) -> float:
        top, bottom = self._fraction(word, self._history(context))
        return top / bottom if bottom else 0.0

    def next_token_distribution(self, context: Sequence[str]) -> dict[str, float]:
        return {word: self.prob(word, context) for word in self.vocab}

    def _log_factors(self, tokens: list[str]) -> list[float]:
        padded = pad_sentence(tokens, self.n)
        logs = []
        for i in range(self.n - 1, len(padded)):
            top, bottom = self._fraction(padded[i], tuple(padded[i - self.n + 1:i]))
            logs.append(math.log(top) - math.log(bottom) if top > 0 else -math.inf)
        return logs

    def sentence_logprob(self, tokens: list[str]) -> float:
        logs = self._log_factors(tokens)
        return -math.inf if -math.inf in logs else math.fsum(logs)

    def perplexity(self, sentences: list[list[str]]) -> float:
        logs = [log for tokens in sentences for log in self._log_factors(tokens)]
        if -math.inf in logs:
            return math.inf
        return math.exp(-math.fsum(logs) / len(logs))  # one factor per predicted token, EOS included

    def sample(self, rng: np.random.Generator, max_len: int = 50) -> list[str]:
        words: list[str] = []
        while len(words) < max_len:
            dist = self.next_token_distribution(words)
            u, cumulative, drawn = rng.random(), 0.0, None
            for word in sorted(dist):
                if dist[word] > 0:
                    drawn = word
                cumulative += dist[word]
                if u < cumulative:
                    break
            if drawn == EOS:  # a rounding shortfall of the cumulative sum falls on the last possible word
                break
            words.append(drawn)
        return words
