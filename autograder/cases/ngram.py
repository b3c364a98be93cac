"""Cases for component `ngram` (ngram.py). Probabilities are checked against a brute-force count of the
padded corpus (ref.oracles.ngram), independent of any model class."""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..diagnose import sample_shows
from ..judge import LIKELY, CaseFailed, type_name
from . import check
from ..chi_square import chi_square_p_value

USES = ("numpy",)  # what its cases build in the worker: no tensors, so no torch in the worker or the grader
FILE = "ngram.py"  # the student API's file that holds this component: the rubric and submissions know it from here

BOS, EOS = "<s>", "</s>"
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "ran", "to", "big", "red", "hat"]
# What makes a value NaN or Inf here, said in place of the judge's default (overflow in exp, which this model has not).
NONFINITE = ("An n-gram model has no exp to overflow: a log-probability is -inf only where a factor P(w | h) is 0, "
             "and a NaN or Inf probability comes from a division by a count of 0.")

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


@check("ngram.padding")
def padding(t, n: int):
    """Three sentences at once, so that a likely mistake is named only when it explains all three."""
    sentences = [["the", "cat", "sat"], [], ["a"]]
    want = t.expect(lambda ref: [ref.ngram.pad_sentence(tokens, n) for tokens in sentences])
    got = [t.student.ngram.pad_sentence(tokens, n) for tokens in sentences]
    t.equal(got, want, f"[pad_sentence(tokens, n={n}) for tokens in {sentences}]", hints={
        "n BOS tokens instead of n - 1": lambda ref: ref.oracles.ngram.padded(sentences, n, bos=n),
        "the EOS token is missing": lambda ref: ref.oracles.ngram.padded(sentences, n, eos=False),
        "BOS and EOS are swapped": lambda ref: ref.oracles.ngram.padded(sentences, n, swapped=True),
    })


@check("ngram.counts")
def counts(t, n: int):
    corpus = random_corpus(t.rng)
    want = t.expect(lambda ref: dict(ref.ngram.count_ngrams(corpus, n)))
    got = t.student.ngram.count_ngrams(corpus, n)
    t.equal(got, want, f"count_ngrams(corpus of {len(corpus)} sentences, n={n})", hints={
        "sentences are not padded with BOS/EOS": lambda ref: ref.oracles.ngram.counts(corpus, n, pad=False),
        "counts stop before the EOS n-gram": lambda ref: ref.oracles.ngram.counts(corpus, n, eos=False),
        "the n-grams cross sentence boundaries (the padded sentences were joined into one stream): count the windows of "
        "each padded sentence on its own": lambda ref: ref.oracles.ngram.counts(corpus, n, across=True),
    })


@check("ngram.slide_example")
def slide_example(t):
    lm = t.student.ngram.NGramLM(3)
    lm.fit(SLIDE_CORPUS)
    words, counts = ["corn", "grass", "hay", "oats"], np.array([4, 3, 2, 1])
    labels = [f"P({word} | cows eat)" for word in words]
    want = t.expect(lambda ref: np.array([ref.ngram.NGramLM(3).fit(SLIDE_CORPUS).prob(word, ["cows", "eat"]) for word in words]))
    assert np.allclose(want, counts / 11), "the reference disagrees with the slide"
    got = t.numbers([lm.prob(word, ["cows", "eat"]) for word in words], labels)
    t.close(got, want, "P(word | cows eat) on the slide's corpus", labels=labels, nonfinite=NONFINITE, hints={
        "divided by the count of all n-grams instead of C(h)": lambda ref: counts / SLIDE_TRIGRAMS,
        "add-one smoothing applied although k = 0": lambda ref: (counts + 1) / (11 + SLIDE_VOCAB),
    })


@check("ngram.vocab")
def vocab(t, n: int):
    corpus = random_corpus(t.rng)
    want = t.expect(lambda ref: ref.ngram.NGramLM(n).fit(corpus).vocab)
    lm = t.student.ngram.NGramLM(n)
    lm.fit(corpus)
    words = {w for s in corpus for w in s}
    t.equal(t.student.value(lm.vocab), want, "vocab after fit", hints={
        "EOS is missing from vocab": lambda ref: words,
        "BOS is in vocab": lambda ref: words | {BOS, EOS},
    })


@check("ngram.probabilities")
def probabilities(t, n: int, k: float = 0.0):
    """prob() against a brute-force count of the padded corpus, for MLE and add-k."""
    corpus = random_corpus(t.rng)
    lm = t.student.ngram.NGramLM(n, k)
    lm.fit(corpus)
    asked = queries(t.rng, corpus, n)
    labels = [f"prob({word!r}, context={context})" for word, context in asked]
    got = t.numbers([lm.prob(word, context) for word, context in asked], labels)
    want = t.expect(lambda ref: np.array(ref.oracles.ngram.probs(corpus, n, k, asked)))
    t.close(got, want, f"prob(word, context) on {len(asked)} queries with n={n}, k={k:g}", labels=labels, nonfinite=NONFINITE,
            hints=prob_hints(corpus, n, k, asked))


def prob_hints(corpus, n: int, k: float, asked: list[tuple[str, list[str]]]) -> dict:
    """The classic wrong probabilities of the (word, context) pairs asked."""
    wrong = lambda **mistake: lambda ref: np.array(ref.oracles.ngram.probs(corpus, n, k, asked, **mistake))  # noqa: E731
    return {
        "|vocab| counts BOS": wrong(vocab_delta=1),
        "|vocab| leaves out EOS": wrong(vocab_delta=-1),
        "the history is taken from the start of the context, not its last n - 1 tokens": wrong(head=True),
        "C(h) is taken from count_ngrams(sentences, n - 1), whose padding has one BOS fewer, so the history of n - 1 BOS "
        "never occurs: C(h) is the sum of C(h, w) over the words w": wrong(lower_order=True),
        "an unseen history gives 0 although k > 0: add-k smoothing gives every word k / (k * |vocab|) = 1 / |vocab| there":
            wrong(unseen_zero=True),
        "an n-gram never seen gives 0 although k > 0: add-k smoothing gives it k / (C(h) + k * |vocab|)": wrong(unseen_ngram_zero=True),
        "for n = 1 the history must be empty, but context[-(n - 1):] is the whole context when n = 1 (-0 is 0)": wrong(whole=True),
    }


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
            t.fail(f"{what}: expected a dict from word to probability, got {type_name(got)}.")
        t.equal(set(got), set(want), f"{what}: its words (they must be exactly vocab)", hints={
            "BOS is among the words": lambda ref: set(want) | {BOS},
            "EOS is missing from the words": lambda ref: set(want) - {EOS},
        })
        words = sorted(want)
        labels = [f"the probability of {word!r}" for word in words]
        t.close(t.numbers([got[word] for word in words], labels), np.array([want[word] for word in words]), what, labels=labels,
                nonfinite=NONFINITE, hints=prob_hints(corpus, n, k, [(word, context) for word in words]))


@check("ngram.sentence_logprob")
def sentence_logprob(t, n: int, k: float = 0.0):
    corpus = random_corpus(t.rng)
    sentences = [corpus[i] for i in t.rng.choice(len(corpus), size=6, replace=False)] + [["cat", "zebra"], []]
    lm = t.student.ngram.NGramLM(n, k)
    lm.fit(corpus)
    labels = [f"sentence_logprob({tokens})" for tokens in sentences]
    got = t.numbers([lm.sentence_logprob(tokens) for tokens in sentences], labels)
    want = t.expect(lambda ref: np.array([ref.ngram.NGramLM(n, k).fit(corpus).sentence_logprob(tokens) for tokens in sentences]))
    what = f"sentence_logprob(tokens) of {len(sentences)} sentences with n={n}, k={k:g}"
    close_or_zero(t, got, want, what, labels, hints={
        "the EOS factor is missing": lambda ref: np.array(ref.oracles.ngram.sentence_logprobs(corpus, n, k, sentences, eos=False)),
        "log base 2 instead of the natural log": lambda ref: np.array(ref.oracles.ngram.sentence_logprobs(corpus, n, k, sentences, base=2)),
        "the product of probabilities, not its log": lambda ref: np.array(ref.oracles.ngram.sentence_logprobs(corpus, n, k, sentences, log=False)),
    })


@check("ngram.perplexity")
def perplexity(t, n: int, k: float = 0.0, unseen: bool = False):
    """Against exp(-sum log p / N) from brute-force probabilities."""
    corpus = random_corpus(t.rng)
    held_out = random_corpus(t.rng, sentences=6) + ([["cat", "zebra"]] if unseen else [])
    want = t.expect(lambda ref: ref.oracles.ngram.perplexity(corpus, n, k, held_out))
    lm = t.student.ngram.NGramLM(n, k)
    lm.fit(corpus)
    what = f"perplexity on {len(held_out)} held-out sentences with n={n}, k={k:g}"
    wrong = lambda **mistake: lambda ref: ref.oracles.ngram.perplexity(corpus, n, k, held_out, **mistake)  # noqa: E731
    got = float(t.numbers([lm.perplexity(held_out)], [what])[0])
    close_or_zero(t, got, want, what, ["the perplexity"], hints={
        "N does not count one EOS per sentence": wrong(count_eos=False),
        "averaged per sentence instead of per token": wrong(per="sentence"),
        "the log-probability is not negated": wrong(sign=1.0),
        "2 ** (...) of natural-log probabilities: the power's base must be the log's (exp for math.log)": wrong(base=2.0),
        "the mean of the sentences' perplexities, not one perplexity over all held-out tokens": wrong(per="sentences' mean"),
    })


def close_or_zero(t, got, want, what: str, labels: list[str], hints: dict) -> None:
    """t.close of log-probabilities or perplexities (floats), except that where no hint explains the answer and it is
    infinite where the expected one is finite, or the other way round, the message says why in an n-gram model's
    terms: it has no exp to overflow, and a log-probability or perplexity is infinite exactly when a factor is 0."""
    try:
        t.close(got, want, what, labels=labels, hints=hints, nonfinite=NONFINITE)
    except CaseFailed as failed:
        if LIKELY in str(failed):
            raise
        g, w = np.atleast_1d(got), np.atleast_1d(want)
        if (lost := np.isinf(w) & np.isfinite(g)).any():
            t.fail(f"{what}: {labels[int(np.argmax(lost))]} is finite, but one of its factors P(w | h) is 0 under this model "
                   "(an n-gram never seen in training, with k = 0), so it must be infinite: a log clamped to a floor "
                   "(log(max(p, eps)), log(p + eps)) or a skipped zero factor gives a finite number instead.")
        if (made := np.isfinite(w) & np.isinf(g)).any():
            t.fail(f"{what}: {labels[int(np.argmax(made))]} is infinite, but every one of its factors P(w | h) is positive "
                   "under this model, so it is finite: some factor came out 0 (looked up under the wrong history, or not "
                   "smoothed?); an n-gram model has no exp to overflow.")
        raise


@check("ngram.sampling", apart=True)  # thousands of draws through the student's sample: 0.2 s and more
def sampling(t, n: int, draws: int = 3000, max_len: int = 6):
    """Chi-square test of every sampled transition against the reference probabilities."""
    corpus = random_corpus(t.rng, sentences=25, max_len=5)
    lm = t.student.ngram.NGramLM(n, 0.5)
    lm.fit(corpus)
    rng = t.student.put(t.student.numpy_rng(t.seed % 2**32))
    transitions: Counter = Counter()
    for words in t.student.map(lm.sample, [([rng], {"max_len": max_len})] * draws):
        if not isinstance(words, list | tuple):
            t.fail(f"sample(rng, max_len={max_len}): expected a list of words, got {type_name(words)}.")
        if odd := [w for w in words if type(w) is not str]:
            t.fail(f"sample(rng, max_len={max_len}): expected a list of words (str), got a {type(words).__name__} holding {type_name(odd[0])}.")
        words = list(words)
        if BOS in words or EOS in words:
            t.fail(f"sample(rng, max_len={max_len}) returned {words[:10]}: BOS and EOS must not be in the result.")
        if len(words) > max_len:
            t.fail(f"sample(rng, max_len={max_len}) returned {len(words)} words: stop after max_len words.")
        padded = [BOS] * (n - 1) + words + ([EOS] if len(words) < max_len else [])
        transitions.update((tuple(padded[i - n + 1:i]), padded[i]) for i in range(n - 1, len(padded)))
    probs = t.expect(lambda ref: ref.oracles.ngram.transition_probs(ref.ngram.NGramLM(n, 0.5).fit(corpus), transitions))
    unknown = [w for (_, w) in transitions if w not in probs[next(iter(probs))]]
    if unknown:
        t.fail(f"sample drew {unknown[0]!r}, which is not in vocab.")
    p_value = chi_square_p_value(transitions, probs)
    if p_value < 1e-6:
        start = probs.get((BOS,) * (n - 1))
        stuck = {"every word is drawn from the distribution after the sentence's start: the history must move on to the "
                 "last n - 1 words drawn": {h: start for h in probs}} if start is not None and n > 1 else {}
        shows = (f" {LIKELY}after each history every draw was the same word, its most probable one: an argmax is greedy "
                 "decoding, not sampling; draw at random, with rng.choice(words, p=probs).") if always_the_mode(transitions, probs) \
            else sample_shows(transitions, probs, visible=t.visible, fits=stuck)
        t.fail(f"{draws} samples do not follow the model's distribution (chi-square p = {p_value:.1e}): "
               "draw each word from next_token_distribution of the last n - 1 words (BOS-padded)." + shows)
    first = [lm.sample(t.student.numpy_rng(7), max_len=max_len) for _ in range(2)]
    if first[0] != first[1]:
        t.fail("Two generators seeded alike gave different sentences: draw only from the rng you are given.")


def always_the_mode(transitions: Counter, probs: dict) -> bool:
    """Every history was followed, in at least 20 draws in all, by one word only: the most probable one."""
    drawn: dict = {}
    for (h, w), count in transitions.items():
        drawn.setdefault(h, Counter())[w] += count
    return sum(sum(c.values()) for c in drawn.values()) >= 20 and all(
        len(c) == 1 and probs[h][next(iter(c))] == max(probs[h].values()) for h, c in drawn.items())


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
