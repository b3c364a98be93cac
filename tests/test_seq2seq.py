"""The seq2seq component: the grader's oracles, which the hints and the greedy decoding cases rely on, agree with the
reference (its plausible bugs: tests/test_mistakes.py; correct code in other styles: tests/test_correct_alternatives.py)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import SOLUTIONS

from autograder.cases.seq2seq import sources, targets
from autograder.gradients import fill_parameters
from autograder.reference import Reference

REF = Reference(SOLUTIONS)
ORACLES = REF.oracles.seq2seq


def random_model(rng, **sizes):
    sizes = {"src_vocab": 9, "tgt_vocab": 11, "d_emb": 4, "d_hidden": 6} | sizes
    return fill_parameters(rng, REF.seq2seq.Seq2Seq(**sizes).double())


@pytest.mark.parametrize("seed", range(3))
def test_the_oracles_agree_with_the_reference(seed):
    rng = np.random.default_rng(seed)
    model, src, tgt = random_model(rng), sources(rng, 5, 7, 9), targets(rng, 5, 6, 11)
    with torch.no_grad():
        for got, want in zip(ORACLES.forward(model, src, tgt[:, :-1]), model(src, tgt[:, :-1])):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        assert ORACLES.loss(model(src, tgt[:, :-1])[0], tgt) == pytest.approx(REF.seq2seq.seq2seq_loss(model, src, tgt).item(), rel=1e-12)
    assert ORACLES.greedy(model, src, 9) == REF.seq2seq.greedy_decode(model, src, 9)


def test_the_eos_bias_makes_examples_stop_where_the_oracle_says():
    """stop_at_known_steps reports the lengths the reference's greedy decoding then gives: some examples stop after
    a few tokens, one at least only at max_len; stopping the whole batch, or never, gives other tokens."""
    rng, found = np.random.default_rng(0), 0
    for _ in range(10):
        model, src = random_model(rng), sources(rng, 5, 6, 9)
        try:
            lengths = ORACLES.stop_at_known_steps(model, src, 8)
        except ValueError:
            continue
        found += 1
        got = REF.seq2seq.greedy_decode(model, src, 8)
        assert [len(row) for row in got] == lengths and 8 in lengths and any(0 < n < 8 for n in lengths)
        assert ORACLES.greedy(model, src, 8, stop="batch") != got != ORACLES.greedy(model, src, 8, stop="never")
    assert found >= 5


def test_the_loss_reductions_are_the_loops_they_name():
    """oracles.seq2seq.loss's wrong reductions, each against the code a student writes for it."""
    rng = np.random.default_rng(1)
    model, src, tgt = random_model(rng), sources(rng, 5, 7, 9), targets(rng, 5, 6, 11)
    with torch.no_grad():
        logits = model(src, tgt[:, :-1])[0]
    y = tgt[:, 1:]
    steps = [F.cross_entropy(logits[:, t], y[:, t], ignore_index=0) for t in range(y.shape[1])]
    nll = F.cross_entropy(logits.transpose(1, 2), y, ignore_index=0, reduction="none")
    assert ORACLES.loss(logits, tgt, reduce="step_sum") == pytest.approx(sum(steps).item(), rel=1e-12)
    assert ORACLES.loss(logits, tgt, reduce="step_mean") == pytest.approx(torch.stack(steps).mean().item(), rel=1e-12)
    assert ORACLES.loss(logits, tgt, reduce="batch") == pytest.approx(nll.sum().item() / 5, rel=1e-12)
    assert ORACLES.loss(logits, tgt, reduce="sentence_mean") == pytest.approx((nll.sum(1) / (y != 0).sum(1)).mean().item(), rel=1e-12)
