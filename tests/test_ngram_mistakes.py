"""Plausible n-gram bugs lose points in `ngram` only, in the cases meant to catch them."""
import pytest
from conftest import assert_caught_in_component_only

# (what the student got wrong, anchor in solutions/ngram.py, replacement, checks that must fail, phrase of the feedback)
MISTAKES = [
    ("n BOS instead of n - 1", "return [BOS] * (n - 1) + list(tokens) + [EOS]", "return [BOS] * n + list(tokens) + [EOS]",
     {"ngram.padding", "ngram.counts"}, "n BOS tokens instead of n - 1"),
    ("no EOS when padding", "return [BOS] * (n - 1) + list(tokens) + [EOS]", "return [BOS] * (n - 1) + list(tokens)",
     {"ngram.padding", "ngram.counts"}, "the EOS token is missing"),
    ("EOS left out of vocab", "for tokens in sentences for w in tokens} | {EOS}", "for tokens in sentences for w in tokens}",
     {"ngram.vocab", "ngram.distribution"}, "EOS is missing from vocab"),
    ("BOS counted in |vocab|", "(c_h + self.k * len(self.vocab))", "(c_h + self.k * (len(self.vocab) + 1))",
     {"ngram.probabilities", "ngram.perplexity"}, "|vocab| counts BOS"),
    ("history from the start of the context", "h = tuple(padded[len(context) :])", "h = tuple(padded[: self.n - 1])",
     {"ngram.probabilities", "ngram.slide_example"}, "prob("),
    ("unseen history divides by zero", "return c_hw / c_h if c_h > 0 else 0.0", "return c_hw / c_h",
     {"ngram.probabilities"}, "ZeroDivisionError"),
    ("add-one although k = 0", "return c_hw / c_h if c_h > 0 else 0.0", "return (c_hw + 1) / (c_h + len(self.vocab))",
     {"ngram.slide_example", "ngram.probabilities"}, "add-one smoothing applied although k = 0"),
    ("EOS factor missing from the log-probability", "for i in range(self.n - 1, len(padded)):", "for i in range(self.n - 1, len(padded) - 1):",
     {"ngram.sentence_logprob"}, "the EOS factor is missing"),
    ("perplexity N without EOS", "N = sum(len(tokens) + 1 for tokens in sentences)", "N = sum(len(tokens) for tokens in sentences)",
     {"ngram.perplexity"}, "N does not count one EOS per sentence"),
    ("sampling ignores the probabilities", "p=[dist[c] for c in candidates]", "p=None",
     {"ngram.sampling"}, "chi-square"),
    ("sampling keeps the EOS", "            if w == EOS:\n                break\n", "            if w == EOS:\n                words.append(w)\n                break\n",
     {"ngram.sampling"}, "BOS and EOS must not be in the result"),
    ("sampling from a fresh global RNG", "w = candidates[rng.choice(", "w = candidates[np.random.choice(",
     {"ngram.sampling"}, "seeded alike gave different sentences"),
    ("pad_sentence appends to its input", "return [BOS] * (n - 1) + list(tokens) + [EOS]", "tokens.append(EOS)\n    return [BOS] * (n - 1) + tokens",
     {"ngram.inputs_unchanged"}, "must not be modified"),
]


@pytest.mark.parametrize("mistake, old, new, must_fail, feedback", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistake_is_caught_in_its_component_only(rubric, tmp_path, mistake, old, new, must_fail, feedback):
    assert_caught_in_component_only(rubric, tmp_path, "ngram", old, new, must_fail, feedback)
