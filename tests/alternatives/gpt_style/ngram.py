"""A correct `ngram` in another style: nested defaultdict(Counter) tables filled by a sliding window, probabilities
from precomputed history totals, and vectorised inverse-CDF sampling (np.searchsorted on the cumulative
probabilities at rng.random())."""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Sequence

import numpy as np

BOS = "<s>"
EOS = "</s>"


def pad_sentence(tokens: list[str], n: int) -> list[str]:
    return (n - 1) * [BOS] + tokens[:] + [EOS]


def count_ngrams(sentences: list[list[str]], n: int) -> dict[tuple[str, ...], int]:
    counts: defaultdict = defaultdict(int)
    for tokens in sentences:
        window: tuple[str, ...] = ()
        for token in pad_sentence(tokens, n):
            window = (window + (token,))[-n:]
            if len(window) == n:
                counts[window] += 1
    return dict(counts)


class NGramLM:
    def __init__(self, n: int, k: float = 0.0):
        self.n = n
        self.k = k
        self.vocab: set[str] = set()
        self.table: defaultdict = defaultdict(Counter)
        self.total: dict[tuple[str, ...], int] = {}

    def fit(self, sentences: list[list[str]]) -> NGramLM:
        self.table = defaultdict(Counter)
        for gram, count in count_ngrams(sentences, self.n).items():
            self.table[gram[:-1]][gram[-1]] = count
        self.total = {history: sum(nexts.values()) for history, nexts in self.table.items()}
        self.vocab = set()
        for tokens in sentences:
            self.vocab.update(tokens)
        self.vocab = (self.vocab | {EOS}) - {BOS}
        return self

    def _history(self, context: Sequence[str]) -> tuple[str, ...]:
        padded = [BOS] * (self.n - 1) + list(context)
        return tuple(padded[len(padded) - (self.n - 1):])

    def prob(self, word: str, context: Sequence[str]) -> float:
        history = self._history(context)
        seen = self.table[history][word] if history in self.table else 0
        total = self.total.get(history, 0)
        if self.k > 0:
            return (seen + self.k) / (total + self.k * len(self.vocab))
        return seen / total if total else 0.0

    def next_token_distribution(self, context: Sequence[str]) -> dict[str, float]:
        return {word: self.prob(word, context) for word in self.vocab}

    def sentence_logprob(self, tokens: list[str]) -> float:
        history, total = [], 0.0
        for word in tokens + [EOS]:
            p = self.prob(word, history)
            if p == 0:
                return -math.inf
            total += math.log(p)
            history.append(word)
        return total

    def perplexity(self, sentences: list[list[str]]) -> float:
        logprob = 0.0
        for tokens in sentences:
            logprob += self.sentence_logprob(tokens)
        return math.exp(-logprob / sum(len(tokens) + 1 for tokens in sentences))

    def sample(self, rng: np.random.Generator, max_len: int = 50) -> list[str]:
        words: list[str] = []
        while len(words) < max_len:
            dist = self.next_token_distribution(words)
            order = sorted(dist)
            cumulative = np.cumsum([dist[w] for w in order])
            index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
            word = order[min(index, len(order) - 1)]
            if word == EOS:
                return words
            words.append(word)
        return words
