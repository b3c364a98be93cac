"""Cases for component `ngram` (ngram.py)."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from . import check
from .common import chi_square_p_value

BOS, EOS = "<s>", "</s>"
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "ran", "to", "big", "red", "hat"]

# The lecture's example: after "cows eat" come corn 4x, grass 3x, hay 2x, oats 1x, straw 1x.
SLIDE_CORPUS = (
    [["cows", "eat", "corn"]] * 4 + [["cows", "eat", "grass"]] * 3 + [["cows", "eat", "hay"]] * 2
    + [["cows", "eat", "oats"], ["the", "cows", "eat", "straw"], ["cows", "sleep"]]
)
SLIDE_VOCAB = len({w for s in SLIDE_CORPUS for w in s}) + 1  # + EOS
SLIDE_TRIGRAMS = sum(len(s) + 1 for s in SLIDE_CORPUS)


def random_corpus(rng: np.random.Generator, sentences: int = 40, max_len: int = 8) -> list[list[str]]:
    """Zipf-like word frequencies so some n-grams repeat and others are rare; one empty sentence."""
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()
    corpus = [[WORDS[i] for i in rng.choice(len(WORDS), size=rng.integers(1, max_len + 1), p=weights)] for _ in range(sentences)]
    corpus.insert(int(rng.integers(0, sentences)), [])
    return corpus


def queries(rng: np.random.Generator, corpus: list[list[str]], n: int, count: int = 40) -> list[tuple[str, list[str]]]:
    """(word, context) pairs: seen and unseen histories, short contexts, long contexts, unseen words."""
    out = []
    for _ in range(count):
        sentence = corpus[int(rng.integers(len(corpus)))] + [EOS]
        i = int(rng.integers(len(sentence)))
        context = sentence[:i] if rng.random() < 0.7 else [WORDS[j] for j in rng.integers(0, len(WORDS), size=int(rng.integers(0, n + 2)))]
        word = sentence[i] if rng.random() < 0.6 else (WORDS + ["zebra"])[int(rng.integers(len(WORDS) + 1))]
        out.append((word, context))
    return out


def brute_prob(corpus, n: int, k: float, word: str, context: list[str], vocab_delta: int = 0) -> float:
    """P(word | context) by scanning the padded corpus: an oracle independent of any model class.

    `vocab_delta` shifts |vocab| to reproduce the classic off-by-one vocabularies.
    """
    history = tuple(([BOS] * (n - 1) + list(context))[len(context):])
    c_hw = c_h = 0
    for sentence in corpus:
        padded = [BOS] * (n - 1) + sentence + [EOS]
        for i in range(n - 1, len(padded)):
            if tuple(padded[i - n + 1:i]) == history:
                c_h += 1
                c_hw += padded[i] == word
    vocab_size = len({w for s in corpus for w in s} | {EOS}) + vocab_delta
    if k == 0:
        return c_hw / c_h if c_h else 0.0
    return (c_hw + k) / (c_h + k * vocab_size)


@check("ngram.padding")
def padding(t, n: int):
    sentences = [["the", "cat", "sat"], [], ["a"]]
    for tokens in sentences:
        want = t.expect(lambda ref: ref.ngram.pad_sentence(tokens, n))
        got = t.student.ngram.pad_sentence(tokens, n)
        t.equal(got, want, f"pad_sentence({tokens}, n={n})", hints={
            "n BOS tokens instead of n - 1": lambda: [BOS] * n + tokens + [EOS],
            "the EOS token is missing": lambda: [BOS] * (n - 1) + tokens,
            "BOS and EOS are swapped": lambda: [EOS] * (n - 1) + tokens + [BOS],
        })


@check("ngram.counts")
def counts(t, n: int):
    corpus = random_corpus(t.rng)
    want = t.expect(lambda ref: dict(ref.ngram.count_ngrams(corpus, n)))
    got = t.student.ngram.count_ngrams(corpus, n)
    t.equal(got, want, f"count_ngrams(corpus of {len(corpus)} sentences, n={n})", hints={
        "sentences are not padded with BOS/EOS": lambda: dict(Counter(tuple(s[i:i + n]) for s in corpus for i in range(len(s) - n + 1))),
        "counts stop before the EOS n-gram": lambda: {g: c for g, c in want.items() if g[-1] != "</s>"},
    })


@check("ngram.slide_example")
def slide_example(t):
    lm = t.student.ngram.NGramLM(3)
    lm.fit(SLIDE_CORPUS)
    for word, share in [("corn", 4 / 11), ("grass", 3 / 11), ("hay", 2 / 11), ("oats", 1 / 11)]:
        want = t.expect(lambda ref: ref.ngram.NGramLM(3).fit(SLIDE_CORPUS).prob(word, ["cows", "eat"]))
        assert math.isclose(want, share), "the reference disagrees with the slide"
        t.close(lm.prob(word, ["cows", "eat"]), want, f"P({word} | cows eat) on the slide's corpus", hints={
            "divided by the count of all n-grams instead of C(h)": lambda: share * 11 / SLIDE_TRIGRAMS,
            "add-one smoothing applied although k = 0": lambda: (share * 11 + 1) / (11 + SLIDE_VOCAB),
        })


@check("ngram.vocab")
def vocab(t, n: int):
    corpus = random_corpus(t.rng)
    want = t.expect(lambda ref: ref.ngram.NGramLM(n).fit(corpus).vocab)
    lm = t.student.ngram.NGramLM(n)
    lm.fit(corpus)
    words = {w for s in corpus for w in s}
    t.equal(t.student.value(lm.vocab), want, "vocab after fit", hints={
        "EOS is missing from vocab": lambda: words,
        "BOS is in vocab": lambda: words | {BOS, EOS},
    })


@check("ngram.probabilities")
def probabilities(t, n: int, k: float = 0.0):
    """prob() against a brute-force count of the padded corpus, for MLE and add-k."""
    corpus = random_corpus(t.rng)
    lm = t.student.ngram.NGramLM(n, k)
    lm.fit(corpus)
    for word, context in queries(t.rng, corpus, n):
        want = t.expect(lambda ref: brute_prob(corpus, n, k, word, context))
        t.close(lm.prob(word, context), want, f"prob({word!r}, context={context}) with n={n}, k={k:g}", hints={
            "|vocab| counts BOS": lambda: brute_prob(corpus, n, k, word, context, vocab_delta=1),
            "|vocab| leaves out EOS": lambda: brute_prob(corpus, n, k, word, context, vocab_delta=-1),
            "the history is taken from the start of the context, not its last n - 1 tokens": lambda: brute_prob(
                corpus, n, k, word, context[: n - 1]),
        })


@check("ngram.distribution")
def distribution(t, n: int, k: float = 0.0):
    corpus = random_corpus(t.rng)
    lm = t.student.ngram.NGramLM(n, k)
    lm.fit(corpus)
    for _, context in queries(t.rng, corpus, n, count=8):
        want = t.expect(lambda ref: ref.ngram.NGramLM(n, k).fit(corpus).next_token_distribution(context))
        got = lm.next_token_distribution(context)
        what = f"next_token_distribution({context}) with n={n}, k={k:g}"
        if not isinstance(got, dict):
            t.fail(f"{what}: expected a dict from word to probability, got {type(got).__name__}.")
        t.equal(set(got), set(want), f"{what}: its words (they must be exactly vocab)", hints={
            "BOS is among the words": lambda: set(want) | {BOS},
            "EOS is missing from the words": lambda: set(want) - {EOS},
        })
        for word in sorted(want):
            t.close(got[word], want[word], f"{what}[{word!r}]")


@check("ngram.sentence_logprob")
def sentence_logprob(t, n: int, k: float = 0.0):
    corpus = random_corpus(t.rng)
    sentences = [corpus[i] for i in t.rng.choice(len(corpus), size=6, replace=False)] + [["cat", "zebra"], []]
    lm = t.student.ngram.NGramLM(n, k)
    lm.fit(corpus)
    for tokens in sentences:
        want = t.expect(lambda ref: ref.ngram.NGramLM(n, k).fit(corpus).sentence_logprob(tokens))
        padded = [BOS] * (n - 1) + tokens + [EOS]
        factors = [brute_prob(corpus, n, k, padded[i], padded[n - 1:i]) for i in range(n - 1, len(padded))]
        t.close(lm.sentence_logprob(tokens), want, f"sentence_logprob({tokens}) with n={n}, k={k:g}", hints={
            "the EOS factor is missing": lambda: _log_sum(factors[:-1]),
            "log base 2 instead of the natural log": lambda: _log_sum(factors) / math.log(2),
            "the product of probabilities, not its log": lambda: math.exp(_log_sum(factors)),
        })


def _log_sum(probs: list[float]) -> float:
    return -math.inf if min(probs, default=1.0) == 0 else sum(math.log(p) for p in probs)


@check("ngram.perplexity")
def perplexity(t, n: int, k: float = 0.0, unseen: bool = False):
    """Against exp(-sum log p / N) computed here from brute-force probabilities."""
    corpus = random_corpus(t.rng)
    held_out = random_corpus(t.rng, sentences=6) + ([["cat", "zebra"]] if unseen else [])
    logprob = sum(_log_sum([brute_prob(corpus, n, k, p[i], p[n - 1:i]) for i in range(n - 1, len(p))])
                  for p in ([BOS] * (n - 1) + s + [EOS] for s in held_out))
    tokens = sum(len(s) + 1 for s in held_out)
    want = t.expect(lambda ref: math.exp(-logprob / tokens))
    lm = t.student.ngram.NGramLM(n, k)
    lm.fit(corpus)
    t.close(lm.perplexity(held_out), want, f"perplexity on {len(held_out)} held-out sentences with n={n}, k={k:g}", hints={
        "N does not count one EOS per sentence": lambda: math.exp(-logprob / (tokens - len(held_out))),
        "averaged per sentence instead of per token": lambda: math.exp(-logprob / len(held_out)),
        "the log-probability is not negated": lambda: math.exp(logprob / tokens),
    })


@check("ngram.sampling")
def sampling(t, n: int, draws: int = 3000, max_len: int = 6):
    """Chi-square test of every sampled transition against the reference probabilities."""
    corpus = random_corpus(t.rng, sentences=25, max_len=5)
    lm = t.student.ngram.NGramLM(n, 0.5)
    lm.fit(corpus)
    rng = t.student.put(t.student.numpy_rng(t.seed % 2**32))
    transitions: Counter = Counter()
    for _ in range(draws):
        words = lm.sample(rng, max_len=max_len)
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            t.fail(f"sample(rng, max_len={max_len}): expected a list of words, got {type(words).__name__}.")
        if BOS in words or EOS in words:
            t.fail(f"sample(rng, max_len={max_len}) returned {words[:10]}: BOS and EOS must not be in the result.")
        if len(words) > max_len:
            t.fail(f"sample(rng, max_len={max_len}) returned {len(words)} words: stop after max_len words.")
        padded = [BOS] * (n - 1) + words + ([EOS] if len(words) < max_len else [])
        transitions.update((tuple(padded[i - n + 1:i]), padded[i]) for i in range(n - 1, len(padded)))
    probs = t.expect(lambda ref: _transition_probs(ref.ngram.NGramLM(n, 0.5).fit(corpus), transitions, n))
    unknown = [w for (_, w) in transitions if w not in probs[next(iter(probs))]]
    if unknown:
        t.fail(f"sample drew {unknown[0]!r}, which is not in vocab.")
    p_value = chi_square_p_value(transitions, probs)
    if p_value < 1e-6:
        t.fail(f"{draws} samples do not follow the model's distribution (chi-square p = {p_value:.1e}): "
               "draw each word from next_token_distribution of the last n - 1 words (BOS-padded).")
    first = [lm.sample(t.student.numpy_rng(7), max_len=max_len) for _ in range(2)]
    if first[0] != first[1]:
        t.fail("Two generators seeded alike gave different sentences: draw only from the rng you are given.")


def _transition_probs(model, transitions: Counter, n: int) -> dict:
    return {h: model.next_token_distribution(list(h)) for h in {h for h, _ in transitions}}


@check("ngram.inputs_unchanged")
def inputs_unchanged(t):
    corpus = random_corpus(t.rng, sentences=10)
    tokens = t.student.put(list(corpus[0]))
    t.student.ngram.pad_sentence(tokens, 3)
    t.equal(t.student.value(tokens), corpus[0], "the tokens given to pad_sentence (they must not be modified)")
    sentences = t.student.put([list(s) for s in corpus])
    t.student.ngram.count_ngrams(sentences, 2)
    lm = t.student.ngram.NGramLM(2, 1.0)
    lm.fit(sentences)
    lm.perplexity(sentences)
    t.equal(t.student.value(sentences), corpus, "the corpus given to count_ngrams, fit and perplexity (it must not be modified)")
