"""A correct `ngram` computed exactly: probabilities as fractions.Fraction (one rounding, at the end), log
probabilities summed with math.fsum, counts in one Counter of n-grams and one of histories, and sampling with
rng.choice over a numpy array of the words."""
from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Sequence

import numpy as np

BOS = "<s>"
EOS = "</s>"


def pad_sentence(tokens: list[str], n: int) -> list[str]:
    return [BOS] * max(n - 1, 0) + [*tokens, EOS]


def count_ngrams(sentences: list[list[str]], n: int) -> dict[tuple[str, ...], int]:
    grams = Counter()
    for tokens in sentences:
        padded = tuple(pad_sentence(tokens, n))
        grams.update(padded[start:start + n] for start in range(len(padded) - n + 1))
    return grams


class NGramLM:
    def __init__(self, n: int, k: float = 0.0):
        self.n = n
        self.k = k
        self.vocab: set[str] = set()
        self.grams: Counter = Counter()
        self.histories: Counter = Counter()

    def fit(self, sentences: list[list[str]]) -> NGramLM:
        self.grams = Counter(count_ngrams(sentences, self.n))
        self.histories = Counter()
        for gram, count in self.grams.items():
            self.histories[gram[:-1]] += count
        self.vocab = {word for tokens in sentences for word in tokens if word != BOS}
        self.vocab.add(EOS)
        return self

    def _exact(self, word: str, context: Sequence[str]) -> Fraction:
        history = tuple([BOS] * (self.n - 1) + list(context))[len(context):] if self.n > 1 else ()
        k = Fraction(self.k)
        denominator = self.histories[history] + k * len(self.vocab)
        return (self.grams[history + (word,)] + k) / denominator if denominator else Fraction(0)

    def prob(self, word: str, context: Sequence[str]) -> float:
        return float(self._exact(word, context))

    def next_token_distribution(self, context: Sequence[str]) -> dict[str, float]:
        return dict((word, self.prob(word, context)) for word in self.vocab)

    def _logs(self, tokens: list[str]) -> list[float]:
        padded = pad_sentence(tokens, self.n)
        exact = [self._exact(padded[i], padded[:i]) for i in range(self.n - 1, len(padded))]
        return [math.log(p) if p else -math.inf for p in exact]

    def sentence_logprob(self, tokens: list[str]) -> float:
        logs = self._logs(tokens)
        return -math.inf if min(logs) == -math.inf else math.fsum(logs)

    def perplexity(self, sentences: list[list[str]]) -> float:
        logs = [value for tokens in sentences for value in self._logs(tokens)]
        return math.inf if min(logs) == -math.inf else math.exp(-math.fsum(logs) / len(logs))

    def sample(self, rng: np.random.Generator, max_len: int = 50) -> list[str]:
        words: list[str] = []
        for _ in range(max_len):
            dist = self.next_token_distribution(words)
            choices = np.array(sorted(dist))
            word = str(rng.choice(choices, p=[dist[w] for w in choices]))
            if word == EOS:
                break
            words.append(word)
        return words
