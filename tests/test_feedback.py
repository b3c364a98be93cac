"""Feedback names what was expected and the likely mistake, and hidden cases leak no expected values."""
import dataclasses
import re

import numpy as np
import pytest
import torch
from conftest import grade_folder, solutions_with

from autograder.judge import CaseFailed, expect_array, expect_equal, expect_identical, expect_number
from autograder.rounding import Rounded

TOL = {"rtol": 1e-6, "atol": 1e-9}
WANT = np.array([[0.123456, 0.654321], [0.5, 0.5]])
WRONG = WANT * 2


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(CaseFailed) as err:
        fn(*args, **kwargs)
    return str(err.value)


def numbers_in(text: str) -> set[float]:
    return {float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)}


def test_visible_array_feedback_gives_error_location_share_and_mistake():
    message = failure(expect_array, WRONG, WANT, "softmax(z)", visible=True, hints={"doubled": lambda: WANT * 2}, **TOL)
    assert "the worst, relative to what is allowed, is at [0, 1]" in message
    assert "4 of 4 elements (100%)" in message and "Likely mistake: doubled" in message


def test_the_worst_element_is_judged_against_its_own_tolerance_with_digits_that_differ():
    """A large element off by more in absolute terms, but within rtol, is not the one shown; the small one that is
    off by more than its tolerance is, with enough digits to see the difference."""
    want = np.array([1000.0, 1.00000012])
    got = np.array([1000.00006, 1.00000031])
    message = failure(expect_array, got, want, "x", visible=True, rtol=1e-7, atol=0.0)
    assert "is at [1]: expected 1.0000001, got 1.0000003" in message and "1 of 2 elements" in message


def test_labels_name_the_queries_of_a_gathered_array():
    message = failure(expect_array, np.array([0.5, 0.3]), np.array([0.5, 0.25]), "prob on 2 queries", visible=True,
                      labels=["prob('a', context=[])", "prob('b', context=['a'])"], **TOL)
    assert "is at prob('b', context=['a']): expected 0.25, got 0.3" in message


def test_a_hint_is_offered_only_when_it_explains_every_element():
    got = np.array([0.5, 0.3])
    coincidence = {"explains the first element only": lambda: np.array([0.5, 0.9])}
    assert "Likely mistake" not in failure(expect_array, got, np.array([0.4, 0.25]), "x", visible=True, hints=coincidence, **TOL)
    whole = {"explains both": lambda: np.array([0.5, 0.3])}
    assert "Likely mistake: explains both" in failure(expect_array, got, np.array([0.4, 0.25]), "x", visible=True, hints=whole, **TOL)


def test_a_rounded_value_is_judged_against_its_bound_and_its_dtype():
    truth = np.array([0.1043, 2.0])
    want = Rounded(truth, "float32", 1e-5)
    expect_array(np.array([0.104292, 2.0], dtype=np.float32), want, "grad", visible=True, **TOL)
    message = failure(expect_array, np.array([0.1041, 2.0], dtype=np.float32), want, "grad", visible=True, **TOL)
    assert "allowed error 1e-05" in message and "is at [0]" in message
    assert "expected dtype float32" in failure(expect_array, truth, want, "grad", visible=True, **TOL)


def test_a_low_precision_expected_value_must_come_from_the_error_model():
    with pytest.raises(TypeError, match="rounding.rounded"):
        expect_array(np.zeros(2, dtype=np.float32), np.zeros(2, dtype=np.float32), "x", visible=True, **TOL)


def test_inputs_left_unchanged_are_compared_bit_for_bit():
    x = torch.tensor([1.0, float("nan"), 3.0])
    expect_identical(x.clone(), x, "x afterwards")
    assert "1 of 3 entries changed, the first at [2]" in failure(expect_identical, torch.tensor([1.0, float("nan"), 3.0000002]), x, "x")


def test_hidden_feedback_reveals_no_expected_value():
    for message in (
        failure(expect_array, WRONG, WANT, "softmax(z)", visible=False, **TOL),
        failure(expect_number, 0.5, 0.123456, "loss", visible=False, **TOL),
        failure(expect_equal, {"a": 1, "b": 3}, {"a": 1, "b": 2}, "counts", visible=False),
        failure(expect_equal, {"a": 1}, {"a": 1, "secret-key": 2}, "counts", visible=False),
    ):
        assert "secret-key" not in message
        assert not numbers_in(message) & {0.123456, 0.654321, 0.5 * 0.654321}, message
        assert "expected 0" not in message and "expected 2" not in message, message
    hidden = failure(expect_array, WRONG, WANT, "softmax(z)", visible=False, **TOL)
    assert "4 of 4 elements" in hidden and "the first is at [0, 0]" in hidden


def test_checks_follow_type_shape_dtype_pattern_then_values():
    assert "expected a numpy array, got a list" in failure(expect_array, WANT.tolist(), WANT, "x", visible=True, **TOL)
    assert "expected a torch tensor" in failure(expect_array, WANT, torch.tensor(WANT), "x", visible=True, **TOL)
    assert "expected shape (2, 2), got (2, 1)" in failure(expect_array, WANT[:, :1], WANT, "x", visible=True, **TOL)
    assert "expected dtype float64" in failure(expect_array, WANT.astype(np.float32), WANT, "x", visible=True, **TOL)
    nan = WANT.copy()
    nan[1, 0] = np.nan
    assert "NaN or Inf" in failure(expect_array, nan, WANT, "x", visible=True, **TOL)
    expect_array(WANT + 1e-12, WANT, "x", visible=True, **TOL)


def test_counts_are_exact_and_infinities_must_match():
    message = failure(expect_equal, {("a",): 2, ("b",): 1}, {("a",): 2, ("b",): 1, ("c",): 1}, "counts", visible=True)
    assert "1 keys missing (e.g. ('c',))" in message
    assert "expected -inf" in failure(expect_number, -1e308, float("-inf"), "logprob", visible=True, **TOL)
    expect_number(float("inf"), float("inf"), "perplexity", visible=True, **TOL)


def test_a_hint_that_cannot_be_computed_does_not_match():
    def broken():
        raise ValueError("shapes do not fit")

    message = failure(expect_array, WRONG, WANT, "x", visible=True, hints={"never": broken}, **TOL)
    assert "Likely mistake" not in message


@pytest.mark.slow
def test_a_mistake_no_hint_explains_gets_no_hint(rubric, tmp_path):
    """The issue's case: a history padded with one BOS too many agrees with "|vocab| leaves out EOS" on some
    queries by coincidence. The queries are judged together, so no hint is offered; the worst query is named."""
    variant = solutions_with(tmp_path, "ngram.py", "padded = [BOS] * (self.n - 1) + list(context)", "padded = [BOS] * self.n + list(context)")
    run = grade_folder(rubric, variant, tmp_path, component_ids=["ngram"])
    failed = [r for r in run.results if r.case.check == "ngram.probabilities" and not r.passed]
    assert len(failed) == 5 and not any("Likely mistake" in r.output for r in failed), [r.output for r in failed]
    assert any("is at prob(" in r.output for r in failed if r.case.visible)


@pytest.mark.slow
def test_a_case_built_on_a_failing_part_names_it_first(rubric, tmp_path):
    """minGPT's tanh GELU fails the FeedForward cases, and every larger case that runs the FeedForward says so
    before its own difference."""
    exact = "return self.w2(F.gelu(self.w1(x)))"
    variant = solutions_with(tmp_path, "transformer.py", exact, exact.replace("self.w1(x))", "self.w1(x), approximate='tanh')"))
    quick = [c for c in rubric.component("transformer").cases if c.visible and c.check not in ("transformer.training", "transformer.speed")]
    run = grade_folder(dataclasses.replace(rubric, components=[dataclasses.replace(rubric.component("transformer"), cases=quick)]),
                       variant, tmp_path)
    feed_forward = next(r.case.number for r in run.results if r.case.check == "transformer.feed_forward")
    built_on = [r for r in run.results if r.case.check in ("transformer.block", "transformer.lm") and not r.passed]
    assert built_on and all(r.output.startswith(f"This case uses your FeedForward, which fails case {feed_forward}.") for r in built_on)
    assert not any(r.output.startswith("This case uses") for r in run.results if r.case.check == "transformer.feed_forward")
