"""Feedback names what was expected and the likely mistake, and hidden cases leak no expected values."""
import re

import numpy as np
import pytest
import torch

from autograder.judge import CaseFailed, expect_array, expect_equal, expect_number

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
    assert "largest absolute error" in message and "[0, 1]" in message
    assert "4 of 4 elements (100%)" in message and "Likely mistake: doubled" in message


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
