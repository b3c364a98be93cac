"""The word2vec cases: the reference agrees with the grader's independent oracles, the grader's planted
similarity and analogy queries tell every classic mistake from the right answer whatever the seed, every known
mistake (solutions/mistakes.yaml) loses points in `word2vec` only, in the cases meant to catch it (correct code in other styles: tests/test_correct_alternatives.py, and
benchmarks/alternatives.py under many secrets)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import SOLUTIONS

from autograder.cases import word2vec as cases
from autograder.oracles import word2vec as oracles
from autograder.reference import Reference

ref = Reference(SOLUTIONS)
SEEDS = range(40)


@pytest.mark.parametrize("seed", range(10))
def test_the_reference_agrees_with_the_oracles(seed):
    rng = np.random.default_rng(seed)
    sentences = cases.random_sentences(rng, vocab=9) + [[], [3]]
    for window in (1, 2, 4):
        np.testing.assert_array_equal(ref.word2vec.skipgram_pairs(sentences, window), oracles.pairs(sentences, window))
    for score in (1.0, 1000.0):
        args = cases.sgns_batch(rng, 9, 5, 4, 3, score)
        loss, dW, dC = oracles.sgns(*args)
        assert ref.word2vec.sgns_loss(*args) == pytest.approx(loss, rel=1e-12)
        for got, want in zip(ref.word2vec.sgns_gradients(*args), (dW, dC)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)
    args = cases.sgns_batch(rng, 7, 6, 3, 4)
    for got, want in zip(ref.word2vec.sgd_step(*args, 0.3), oracles.sgd(*args, 0.3)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("query, topn", [("most_similar", 1), ("most_similar", 5), ("analogy", 1), ("analogy", 3)])
def test_planted_embeddings_have_the_planted_answer_and_no_mistake_gives_it(query, topn):
    """The cases' own constructions on many seeds: the reference finds the planted answer, and keeping the query
    words, ranking by dot product or (for most_similar) least similar first never does."""
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        if query == "most_similar":
            E, word, planted = cases.neighbour_query(rng, topn, 16, 8)
            answer = ref.word2vec.most_similar(E, word, topn)
            wrong = {m: oracles.neighbours(E, word, topn, mistake=m) for m in ("self", "dot", "ascending")}
        else:
            E, (a, b, c), planted = cases.analogy_query(rng, topn, 16, 8)
            answer = ref.word2vec.analogy(E, a, b, c, topn)
            wrong = {m: oracles.analogies(E, a, b, c, topn, mistake=m) for m in ("keep", "dot", "reversed")}
        assert answer == planted, (query, seed)
        assert all(w != planted for w in wrong.values()), (query, seed, wrong)


def test_the_newer_mistake_oracles_compute_what_the_wrong_code_computes():
    """The hints of issue 34 (pairs that compare words or wrap around, logs clamped at eps): each oracle gives what
    the wrong code itself gives, so a hint names exactly that code."""
    sentences = cases.SENTENCES
    wrapped = [[s[i], s[j]] for s in sentences for i in range(len(s)) for j in range(i - 1, i + 2) if j != i and j < len(s)]
    np.testing.assert_array_equal(oracles.pairs(sentences, 1, wrap=True), np.array(wrapped).reshape(-1, 2))
    same = [[s[i], s[j]] for s in sentences for i in range(len(s)) for j in range(max(0, i - 2), min(len(s), i + 3)) if s[j] != s[i]]
    np.testing.assert_array_equal(oracles.pairs(sentences, 2, same_word=True), np.array(same).reshape(-1, 2))
    W, C, centers, contexts, negatives = args = cases.sgns_batch(np.random.default_rng(0), 8, 6, 4, 5, 1000.0)
    w = W[centers]
    pos, neg = np.sum(C[contexts] * w, axis=1), np.einsum("bkd,bd->bk", C[negatives], w)
    with np.errstate(over="ignore"):
        sigmoid = 1 / (1 + np.exp(-pos)), 1 / (1 + np.exp(-neg))
        clipped = np.mean(-np.log(np.clip(sigmoid[0], 1e-10, 1)) - np.log(np.clip(1 - sigmoid[1], 1e-10, 1)).sum(axis=1))
    assert oracles.clamped_loss(*args, eps=1e-10) == pytest.approx(clipped, rel=1e-9)
    assert oracles.clamped_loss(*args, eps=1e-10) < ref.word2vec.sgns_loss(*args) / 10  # capped: the case tells them apart
