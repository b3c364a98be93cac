"""Extra n-gram tests, written the gradescope-utils way: a course's existing tests move here almost unchanged.

Each test method is one case. gradescope-utils' decorators say what Gradescope shows: @weight the points,
@visibility, @number and @tags, @partial_credit a share of the points (set_score), @leaderboard a column of
the leaderboard (set_leaderboard_value), @hide_errors a message shown instead of the assertion's. The base
class gives `self.student`, the submission (it runs in the sandbox; every call goes through the grader),
`self.expect(lambda ref: ...)`, a reference value, `self.rng`, the case's generator, and `self.close`, the
grader's tolerant comparison; a partial score says what earned it in `self.score_reason`. Listed under
`unittests:` of a component in grading.yaml.
"""
import math

from gradescope_utils.autograder_utils.decorators import leaderboard, partial_credit, tags, visibility, weight

from autograder.unittests import TestCase

TRAIN = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "ran"], ["the", "cat", "ran", "far"], []]
HELD_OUT = [["the", "dog", "ran"], ["a", "dog", "sat", "far"], ["the", "bird", "sat"]]


class NGramExtra(TestCase):
    def setUp(self):
        self.lm = self.student.ngram.NGramLM(2, 0.5)
        self.lm.fit(TRAIN)

    @weight(1)
    @tags("smoothing")
    def test_add_k_rows_sum_to_one(self):
        """add-k: each history's next-word probabilities sum to 1"""
        vocab = sorted(self.student.value(self.lm.vocab))
        for context in ([], ["the"], ["cat"], ["bird"]):
            total = sum(self.lm.prob(word, context) for word in vocab)
            self.assertAlmostEqual(total, 1.0, places=9, msg=f"the probabilities after {context} sum to {total}, not 1")

    @partial_credit(2)
    def test_held_out_logprobs(self, set_score=None):
        """sentence_logprob of held-out sentences, one share of the points each"""
        want = self.expect(lambda ref: [ref.ngram.NGramLM(2, 0.5).fit(TRAIN).sentence_logprob(s) for s in HELD_OUT])
        got = [self.lm.sentence_logprob(s) for s in HELD_OUT]
        right = sum(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, want))
        set_score(2 * right / len(HELD_OUT))
        self.score_reason = f"{right} of {len(HELD_OUT)} sentences' log-probabilities match"

    @weight(1)
    @visibility("hidden")
    def test_unseen_history_is_uniform(self):
        """add-k: a history never seen gives every word the same probability"""
        vocab = sorted(self.student.value(self.lm.vocab))
        probs = [self.lm.prob(word, ["zebra"]) for word in vocab]
        self.assertTrue(all(math.isclose(p, 1 / len(vocab)) for p in probs), "after an unseen history, P(w) is not 1/|vocab|")

    @leaderboard("held-out perplexity", "asc")
    def test_perplexity_for_the_leaderboard(self, set_leaderboard_value=None):
        """held-out perplexity against the reference (the leaderboard's column; no points)"""
        value = self.lm.perplexity(HELD_OUT)
        self.close(value, self.expect(lambda ref: ref.ngram.NGramLM(2, 0.5).fit(TRAIN).perplexity(HELD_OUT)), "perplexity(held-out)")
        set_leaderboard_value(round(float(value), 4))  # a 0-d array or tensor is a number too
