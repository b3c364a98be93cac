"""The judge's general diagnostics (autograder/diagnose.py): each names what explains every element of a wrong
answer when no hint of the case does, stays silent on a wrong answer it does not explain, says nothing of an
expected value in a hidden case, and never raises on odd answers. Also the messages that must not mislead: the
case's own words for NaN and Inf, the review note's "mention", and a crash built on a failing part."""
import math
import re
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from autograder import diagnose
from autograder.chi_square import chi_square_p_value
from autograder.forbidden import scan_forbidden
from autograder.sandbox.host.process import Forbidden
from autograder.judge import LIKELY, CaseFailed, Tolerance, expect_array, expect_equal, expect_number
from autograder.outcome import Outcome
from autograder.report import review_notes
from autograder.rounding import Rounded
from autograder.rubric import Case
from autograder.runner import CaseResult, _causes_first

TOL = {"rtol": 1e-6, "atol": 1e-9}
RNG = np.random.default_rng(34)
WANT = RNG.normal(size=(3, 5))
T = {"T, the sequence length": 5}


def said(fn, *args, **kwargs) -> str:
    with pytest.raises(CaseFailed) as err:
        fn(*args, **kwargs)
    return str(err.value)


def likely(message: str) -> str:
    return message.partition(LIKELY)[2]


def numbers_in(text: str) -> set[float]:
    return {round(float(x), 4) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)}


# ---- ratios and log bases --------------------------------------------------------------------------------------


def test_a_ratio_that_is_a_named_size_names_it():
    """The issue's sequence loss: averaged over the batch only, exactly T - 1 times the mean."""
    message = said(expect_number, 2.52173 * 7, 2.52173, "loss", visible=True, dims={"T - 1, the number of predicted positions": 7}, **TOL)
    assert likely(message).startswith("the result is 7 times the expected one, and 7 is T - 1, the number of predicted positions: a sum")
    divided = said(expect_array, WANT / 4, WANT, "x", visible=True, dims={"B, the batch size": 4}, **TOL)
    assert "divided by 4" in likely(divided) and "B, the batch size" in likely(divided) and "a mean over them where a sum" in likely(divided)


def test_integers_signs_and_log_bases_are_named_without_sizes():
    assert likely(said(expect_array, WANT * 3, WANT, "x", visible=True, **TOL)).startswith("the result is exactly 3 times the expected one in every element")
    assert "sign flipped" in likely(said(expect_array, -WANT, WANT, "x", visible=True, **TOL))
    assert "a base-2 logarithm where the natural log" in likely(said(expect_number, 5.3 / math.log(2), 5.3, "entropy", visible=True, **TOL))
    perplexity = said(expect_number, 5.3 ** (1 / math.log(2)), 5.3, "perplexity", visible=True, **TOL)
    assert "to the power 1/ln 2" in likely(perplexity) and "log2 with exp" in likely(perplexity)


def test_a_ratio_is_named_only_when_it_explains_every_element():
    almost = WANT * 3
    almost[1, 2] += 0.01
    assert LIKELY not in said(expect_array, almost, WANT, "x", visible=True, **TOL)
    assert LIKELY not in said(expect_number, 2.52173 * 7.3, 2.52173, "loss", visible=True, dims={"T": 7}, **TOL)
    assert LIKELY not in said(expect_array, WANT * 65, WANT, "x", visible=True, **TOL)  # beyond the plain integers, and no size is 65


def test_a_hint_of_the_case_comes_first():
    message = said(expect_array, WANT * 2, WANT, "x", visible=True, hints={"summed over the batch": lambda: WANT * 2}, **TOL)
    assert likely(message) == "summed over the batch."


def test_a_low_precision_ratio_is_judged_against_the_bound_scaled_with_it():
    truth = RNG.normal(size=6) * 100
    want = Rounded(truth, "float32", 1e-5 * np.abs(truth).max())
    assert "8 times" in likely(said(expect_array, (truth * 8).astype(np.float32), want, "x", visible=True, **TOL))


# ---- clamps ----------------------------------------------------------------------------------------------------


def test_values_that_stop_at_log_eps_where_the_expected_grow_name_the_clamp():
    terms = np.linspace(0.5, 40, 12)
    message = said(expect_array, np.minimum(terms, -math.log(1e-7)), terms, "loss terms", visible=True, **TOL)
    assert likely(message).startswith("the result stops at 16.1181 (= -log(1e-07)) wherever the expected value is larger")
    plain = said(expect_array, np.minimum(terms, 30.0), terms, "x", visible=False, **TOL)
    assert "stops at 30" in likely(plain) and "a clamp, or a maximum or minimum" in likely(plain)


def test_zeros_where_the_expected_is_positive_are_no_clamp():
    """An n-gram history never seen gives probability 0: nothing follows the expected below 0, so nothing stops there."""
    want = np.array([0.0, 0.25, 0.5, 0.0, 0.125])
    assert LIKELY not in said(expect_array, np.zeros(5), want, "prob", visible=True, **TOL)
    relu = np.array([-2.0, -0.5, 0.5, 1.5])
    assert "stops at 0 wherever the expected value is smaller" in likely(said(expect_array, np.maximum(relu, 0), relu, "x", visible=True, **TOL))


def test_one_element_pinned_at_an_ordinary_value_is_no_clamp():
    want = np.array([1.0, 2.0, 3.0])
    assert LIKELY not in said(expect_array, np.array([1.0, 2.0, 2.5]), want, "x", visible=True, **TOL)
    # an element beyond the constant that is right shows nothing stops there
    assert LIKELY not in said(expect_array, np.array([1.0, 2.0, 5.0, 2.0]), np.array([1.0, 2.0, 5.0, 3.0]), "x", visible=True, **TOL)


def test_a_single_loss_made_of_capped_terms_is_decided_with_the_batch_size():
    """The issue's loss: log(sigmoid(x) + 1e-7) on large scores, 20 of the 40 terms capped, over B = 8."""
    capped = 20 * -math.log(1e-7) / 8
    message = said(expect_number, capped, 2582.83, "sgns_loss", visible=False, dims={"B, the batch size": 8}, **TOL)
    assert likely(message).startswith("the result is 20 x 16.1181 / 8 (B, the batch size), and 16.1181 = -log(1e-07)")
    assert 2582.83 not in numbers_in(message)
    assert LIKELY not in said(expect_number, capped + 0.01, 2582.83, "sgns_loss", visible=True, dims={"B, the batch size": 8}, **TOL)
    assert LIKELY not in said(expect_number, 2582.83, capped, "sgns_loss", visible=True, dims={"B, the batch size": 8}, **TOL)  # larger


def test_a_finite_log_where_the_expected_is_minus_inf_names_the_epsilon():
    want = np.array([-1.2, -np.inf, -3.4, -np.inf])
    message = said(expect_array, np.where(np.isinf(want), math.log(1e-10), want), want, "log-probabilities", visible=True, **TOL)
    assert "Where the reference is infinite, the result is finite." in message and "Overflow" not in message
    assert "stops at -23.0259 (= log(1e-10)) where the expected value is -inf" in likely(message)
    stand_in = said(expect_array, np.where(np.isinf(want), -1e9, want), want, "scores", visible=True, **TOL)
    assert "a large finite number stands in for an infinite one (use float('-inf'))" in likely(stand_in)
    assert LIKELY not in said(expect_array, np.where(np.isinf(want), 0.0, want), want, "log-probabilities", visible=True, **TOL)


# ---- positions: shifts, transposes, orders ---------------------------------------------------------------------


def test_a_shift_by_one_position_is_named_with_its_axis():
    message = said(expect_array, np.roll(WANT, 1, axis=1), WANT, "x", visible=True, dims=T, **TOL)
    assert likely(message).startswith("along axis 1 (size 5: T, the sequence length), each position holds the expected value of the position before")
    assert "position after it" in likely(said(expect_array, np.roll(WANT, -1, axis=1), WANT, "x", visible=True, **TOL))


def test_transposes_and_orders():
    square = RNG.normal(size=(4, 4))
    assert "the expected one transposed" in likely(said(expect_array, square.T.copy(), square, "x", visible=True, **TOL))
    assert "the expected one transposed" in likely(said(expect_array, WANT.T.copy(), WANT, "x", visible=True, **TOL))  # shape (5, 3)
    heads = RNG.normal(size=(2, 3, 4, 5))
    assert "axes 1 and 2 swapped" in likely(said(expect_array, heads.transpose(0, 2, 1, 3).copy(), heads, "x", visible=True, **TOL))
    assert likely(said(expect_array, WANT[::-1].copy(), WANT, "x", visible=True, **TOL)) == "the result holds the expected rows in reverse order."
    swapped = likely(said(expect_array, WANT[[1, 0, 2]], WANT, "x", visible=False, **TOL))
    assert swapped.startswith("the result holds the expected rows in another order (the expected one at position 0 is at 1)")


# (B, T, H) states of a recurrence, as rnn_forward returns them
STATES = RNG.normal(size=(3, 12, 5))
ENTERS = "match the reference and every later one differs: the error enters at position"


def wrong_from(k: int, axis: int = 1) -> np.ndarray:
    """STATES wrong from position `k` on along `axis` (every element there), right before it."""
    got = np.moveaxis(STATES.copy(), axis, 0)
    got[k:] += RNG.normal(size=got[k:].shape)
    return np.moveaxis(got, 0, axis)


def test_where_along_an_axis_the_error_enters_is_said_as_a_fact():
    """The issue's RNN whose every step starts from h0: its first step is right, every later one wrong."""
    first = said(expect_array, wrong_from(1), STATES, "hs", visible=False, dims={"T, the sequence length": 12}, **TOL)
    assert first.endswith(" Along axis 1 (size 12: T, the sequence length), position 0 matches the reference and every later "
                          "one differs: the error enters at position 1.") and LIKELY not in first
    assert "165 of 180 elements (92%)" in first and not numbers_in(first) & {round(float(v), 4) for v in STATES.ravel()}
    later = said(expect_array, wrong_from(4), STATES, "hs", visible=True, **TOL)
    assert later.endswith(" Along axis 1 (size 12), positions 0 to 3 match the reference and every later one differs: the error "
                          "enters at position 4.")
    # one row of the batch and one unit wrong in every later step: still only whole positions are judged
    sparse = STATES.copy()
    sparse[1, 6:, 2] += 1.0
    assert said(expect_array, sparse, STATES, "hs", visible=True, **TOL).endswith(f"positions 0 to 5 {ENTERS} 6.")


def test_the_longest_axis_where_the_error_enters_is_named():
    """Where the error enters along two axes, the longer (a time axis) is named; of two as long, the first."""
    steps = RNG.normal(size=(4, 12))
    got = steps.copy()
    got[2:, 5:] += 1.0  # rows 0 and 1 right, and steps 0 to 4
    assert said(expect_array, got, steps, "x", visible=True, **TOL).endswith(f" axis 1 (size 12), positions 0 to 4 {ENTERS} 5.")
    square = RNG.normal(size=(6, 6))
    got = square.copy()
    got[2:, 3:] += 1.0
    assert said(expect_array, got, square, "x", visible=True, **TOL).endswith(f" axis 0 (size 6), positions 0 to 1 {ENTERS} 2.")
    batch = said(expect_array, wrong_from(1, axis=0), STATES, "hs", visible=True, **TOL)  # along time nothing is right
    assert batch.endswith(" Along axis 0 (size 3), position 0 matches the reference and every later one differs: the error "
                          "enters at position 1.")


def test_no_place_where_the_error_enters_is_said_when_there_is_none():
    noisy = STATES + RNG.normal(size=STATES.shape)  # every position of every axis differs
    gap = wrong_from(1)
    gap[:, 7] = STATES[:, 7]  # a right position after a wrong one: not a suffix
    first_wrong = wrong_from(0)
    first_wrong[:, 1:] = STATES[:, 1:]  # only the first position wrong: nothing before it matches
    short = np.array([1.0, 2.0])  # an axis of size 2 has no "every later one"
    for got, want in ((noisy, STATES), (gap, STATES), (first_wrong, STATES), (short + [0, 1], short)):
        assert "the error enters" not in said(expect_array, got, want, "hs", visible=True, **TOL)
    terms = np.linspace(0.5, 40, 12)  # right up to the clamp, wrong after: the clamp that explains it is said, not this
    clamp = said(expect_array, np.minimum(terms, 30.0), terms, "x", visible=True, **TOL)
    assert "stops at 30" in likely(clamp) and "the error enters" not in clamp
    assert diagnose.error_enters(np.zeros((0, 3), dtype=bool)) == diagnose.error_enters(np.array(True)) == ""


def test_an_answer_with_the_same_values_in_another_order_by_chance_is_not_a_reordering():
    want = np.array([True, False, False, True])
    assert LIKELY not in said(expect_array, np.array([False, True, False, True]), want, "x", visible=True, **TOL)


def test_masks_transposed_inverted_or_off_on_the_diagonal():
    mask = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    assert "transposed" in likely(said(expect_array, mask.T.contiguous(), mask, "causal_mask(5)", visible=True, **TOL))
    assert "True and False are swapped" in likely(said(expect_array, ~mask, mask, "causal_mask(5)", visible=True, **TOL))
    strict = torch.tril(torch.ones(5, 5, dtype=torch.bool), -1)
    assert "a position may or may not see itself" in likely(said(expect_array, strict, mask, "causal_mask(5)", visible=True, **TOL))
    cosines = RNG.uniform(-1, 1, size=(4, 4))
    assert "each item's entry with itself" in likely(said(expect_array, cosines - np.diag(np.diag(cosines)), cosines, "x", visible=True, **TOL))


# ---- shapes and items ------------------------------------------------------------------------------------------


PAIRS = np.array([[3, 1], [3, 4], [1, 3], [1, 4], [1, 1], [4, 1], [4, 1], [1, 4], [1, 5], [5, 5]])


def test_rows_left_out_are_shown_and_what_they_share_is_named():
    """The issue's skip-gram pairs that drop a context equal to the centre word."""
    kept = PAIRS[PAIRS[:, 0] != PAIRS[:, 1]]
    message = said(expect_array, kept, PAIRS, "skipgram_pairs", visible=True, **TOL)
    assert "expected shape (10, 2), got (8, 2). 2 rows are missing (for instance [1, 1]), and no row is extra." in message
    assert "every missing row holds equal values" in likely(message)
    hidden = said(expect_array, kept, PAIRS, "skipgram_pairs", visible=False, **TOL)
    assert "2 rows are missing, and no row is extra" in hidden and "[1, 1]" not in hidden
    extra = np.vstack([PAIRS, [[7, 8], [2, 2]]])
    assert "2 rows are extra (for instance [7, 8])" in said(expect_array, extra, PAIRS, "x", visible=True, **TOL)
    swapped = PAIRS.copy()
    swapped[0] = [9, 9]  # one extra row of equal values names nothing: it could be chance
    same_shape = said(expect_array, swapped, PAIRS, "x", visible=True, **TOL)
    assert "1 row is missing ([3, 1]), and 1 row is extra ([9, 9])." in same_shape and LIKELY not in same_shape


def test_positions_cut_at_an_end_or_axes_of_size_one():
    message = said(expect_array, WANT[:, 1:], WANT, "x", visible=True, dims=T, **TOL)
    assert likely(message).startswith("the result is the expected one with 1 position missing along axis 1 (size 5: T, the sequence length), 1 at the start")
    assert "2 positions extra" in likely(said(expect_array, np.hstack([WANT, WANT[:, :2]]), WANT, "x", visible=True, **TOL))
    assert "axes of size 1 added" in likely(said(expect_array, WANT[:, :, None], WANT, "x", visible=True, **TOL))
    assert "in another shape" in likely(said(expect_array, WANT.reshape(5, 3), WANT, "x", visible=True, **TOL))


def test_lists_and_sets_show_items_missing_and_extra():
    message = said(expect_equal, ["<s>", "a", "b"], ["<s>", "a", "b", "</s>"], "pad_sentence", visible=True)
    assert message.endswith("Of 4 items expected: 1 missing ('</s>'), none extra.")
    hidden = said(expect_equal, ["<s>", "<s>", "a", "b"], ["<s>", "a", "b", "</s>"], "pad_sentence", visible=False)
    assert hidden.endswith("Of 4 items expected: 1 missing, 1 extra.") and "</s>" not in hidden
    assert likely(said(expect_equal, ["b", "a", "c"], ["a", "b", "c"], "x", visible=True)) == "the right items in another order."
    assert likely(said(expect_equal, ["c", "b", "a"], ["a", "b", "c"], "x", visible=False)) == "the right items in reverse order."
    assert "1 extra ('z')" in said(expect_equal, {"a", "z"}, {"a"}, "vocab", visible=True)
    nested = said(expect_equal, [["a"], ["b", "c"]], [["a"], ["b"]], "sentences", visible=True)
    assert "1 missing (['b']), 1 extra (['b', 'c'])" in nested


# ---- samples ---------------------------------------------------------------------------------------------------


NOISE = np.array([30, 20, 10, 8, 7, 6, 5, 4, 3, 3, 2, 0.0]) ** 0.75
NOISE /= NOISE.sum()
PROBS = {(): {w: float(p) for w, p in enumerate(NOISE)}}


def counted(draws: np.ndarray) -> Counter:
    return Counter({((), int(w)): int(n) for w, n in zip(*np.unique(draws, return_counts=True))})


def test_a_sample_drawn_without_replacement_says_so():
    rng = np.random.default_rng(4)
    rows = np.array([rng.choice(12, 10, replace=False, p=NOISE) for _ in range(400)])
    assert chi_square_p_value(counted(rows), PROBS) < 1e-6
    assert likely(diagnose.sample_shows(counted(rows), PROBS, visible=True, rows=rows)).startswith(
        "drawn without replacement: no id repeats within any of the 400 rows of 10 draws")
    hidden = diagnose.sample_shows(counted(rows), PROBS, visible=False, rows=rows)
    assert "where many rows would hold a repeat" in hidden and not re.search(r"about \d", hidden)
    fair = rng.choice(12, size=(400, 10), p=NOISE)
    assert diagnose.sample_shows(counted(fair), PROBS, visible=True, rows=fair) == ""


def test_a_frequent_outcome_that_never_appears_is_named_where_visible():
    rng = np.random.default_rng(5)
    draws = rng.choice(10, size=(400, 10), p=NOISE[:10] / NOISE[:10].sum())  # ids 10 and 11 never drawn
    shown = diagnose.sample_shows(counted(draws), PROBS, visible=True, rows=draws, name=lambda o: f"id {o}")
    assert shown.startswith(" id 10 never appears in 4000 draws, though its probability is 0.0316")
    hidden = diagnose.sample_shows(counted(draws), PROBS, visible=False, rows=draws, name=lambda o: f"id {o}")
    assert "never appears" in hidden and "id 10" not in hidden and not numbers_in(hidden)


def test_one_outcome_only_and_a_named_alternative():
    probs = {(): {0: 0.3, 3: 0.2, 5: 0.5}}
    assert "Every one of the 2000 draws is token 3" in diagnose.sample_shows(Counter({((), 3): 2000}), probs, visible=True,
                                                                             name=lambda o: f"token {o}")
    flat = Counter({((), 0): 1010, ((), 1): 990})
    fits = {"the temperature is not applied": {(): {0: 0.5, 1: 0.5}}}
    assert likely(diagnose.sample_shows(flat, {(): {0: 0.9, 1: 0.1}}, visible=True, fits=fits)) == "the temperature is not applied."


# ---- hidden cases and odd answers ------------------------------------------------------------------------------


def test_hidden_messages_hold_no_expected_value():
    messages = [
        said(expect_array, WANT * 3, WANT, "x", visible=False, **TOL),
        said(expect_array, np.roll(WANT, 1, axis=0), WANT, "x", visible=False, **TOL),
        said(expect_array, WANT.T.copy(), WANT, "x", visible=False, **TOL),
        said(expect_array, WANT[1:], WANT, "x", visible=False, **TOL),
        said(expect_array, np.minimum(WANT, 0.1), WANT, "x", visible=False, **TOL),
        said(expect_number, 7.25 * 4, 7.25, "x", visible=False, **TOL),
    ]
    secret = {round(float(v), 4) for v in WANT.ravel()} | {7.25}
    for message in messages:
        assert LIKELY in message and not numbers_in(message) & secret, message


ODD = [np.array([np.nan, 1.0, 2.0]), np.array([np.inf, -np.inf, 0.0]), np.zeros((0, 2)), np.array(3.5), np.zeros((2, 0, 3)),
       np.array([1, 2, 3]), np.array([True, False, True]), np.zeros((1, 1, 1, 1, 1, 1)), np.full((2, 3), 1e308),
       np.array([1e-320, 0.0, -0.0])]


@pytest.mark.parametrize("got", ODD + [torch.tensor([1.0, float("nan")]), torch.zeros(2, 2, dtype=torch.complex64), [1, [2]], "x", None])
@pytest.mark.parametrize("want", ODD[:5])
def test_the_diagnostics_never_raise(got, want):
    tol = Tolerance(want, 1e-6, 1e-9)
    for result in (diagnose.values(got, want, tol), diagnose.shape(got, want, tol, True, {"n": 3}), diagnose.rows(got, want, True),
                   diagnose.nonfinite(got, want, None), diagnose.infinity_clamped(got, want, tol), diagnose.items(got, [1, 2], True),
                   diagnose.number(float("nan"), 1.0, tol), diagnose.number(1.0, 0.0, tol, {"n": 3}),
                   diagnose.sample_shows({((), 1): 3}, {(): {1: 0.5, 2: 0.5}}, visible=True, rows=got)):
        assert isinstance(result, str)


@pytest.mark.parametrize("got", [WANT * np.nan, np.full_like(WANT, np.inf), np.zeros_like(WANT), WANT.astype(np.float32)])
def test_odd_wrong_answers_fail_as_the_case_not_the_grader(got):
    assert isinstance(said(expect_array, got, WANT, "x", visible=True, **TOL), str)


# ---- messages that do not mislead ------------------------------------------------------------------------------


def test_the_case_chooses_what_explains_nan_or_inf():
    got, want = np.array([1.0, np.inf]), np.array([1.0, 2.0])
    assert "Overflow in exp, or a 0 * inf, usually causes this." in said(expect_array, got, want, "x", visible=True, **TOL)
    ngram = said(expect_array, got, want, "perplexities", visible=True, nonfinite="A probability of 0 makes the perplexity inf.", **TOL)
    assert "Overflow" not in ngram and ngram.endswith("A probability of 0 makes the perplexity inf.")
    number = said(expect_number, float("inf"), 12.5, "perplexity", visible=True, nonfinite="A probability of 0 makes the perplexity inf.", **TOL)
    assert number == "perplexity: expected 12.5, got inf. A probability of 0 makes the perplexity inf."


def test_the_scan_tells_a_mention_from_a_call(tmp_path):
    source = tmp_path / "transformer.py"
    source.write_text("import torch.nn as nn\nfrom torch.nn import LayerNorm\n\n\ndef norm(m, x, d):\n"
                      "    if isinstance(m, (nn.LayerNorm, nn.Linear)):\n        return nn.LayerNorm(d)(x)\n"
                      "    return LayerNorm(d)\n\n\nclass Mine(nn.LayerNorm):\n    pass\n")
    found = scan_forbidden(source, Forbidden(calls=("torch.nn.LayerNorm",)))
    assert found == ["line 2: mention of torch.nn.LayerNorm in an import", "line 6: mention of torch.nn.LayerNorm in isinstance",
                     "line 7: use of torch.nn.LayerNorm", "line 8: use of torch.nn.LayerNorm", "line 11: use of torch.nn.LayerNorm"]


def test_the_review_note_says_mentions_where_nothing_is_called():
    def note(*named):
        result = SimpleNamespace(case=SimpleNamespace(component="transformer"),
                                 extra={"review": {"file": "transformer.py", "forbidden_names": list(named)}})
        return review_notes([result])[0]

    assert "transformer.py (with the files it imports) mentions what this component forbids without calling it: line 6: mention of " \
           "torch.nn.LayerNorm in isinstance. That costs no points" in note("line 6: mention of torch.nn.LayerNorm in isinstance")
    assert "names what this component forbids, in code that no case graded here ran: line 7" in note("line 7: use of torch.nn.LayerNorm")
    assert "names what this component forbids, and no case graded here called it" in note(
        "line 6: mention of torch.nn.LayerNorm in isinstance", "line 7: use of torch.nn.LayerNorm")


def case(number: str, check: str) -> Case:
    return Case(component="seq2seq", number=number, name=check, check=check, points=1, params={}, visibility="visible",
                timeout=10, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kind", ["raised", "crashed", "timeout", "wrong"])
def test_a_crash_built_on_a_failing_part_names_the_part_first(kind):
    attend = CaseResult(case("9.3", "seq2seq.attend"), Outcome("wrong", "attend: values differ."))
    step = CaseResult(case("9.5", "seq2seq.decode_step"), Outcome(kind, "IndexError in attend"))
    noted = _causes_first([attend, step])[1]
    assert noted.output.startswith("This case uses your ") and "which fails case 9.3. Fix that first:" in noted.output
    assert noted.output.endswith("IndexError in attend") and noted.extra["uses_failed"] == ["9.3"]
    missing = CaseResult(case("9.5", "seq2seq.decode_step"), Outcome("not_implemented", "decode_step is not implemented"))
    assert _causes_first([attend, missing])[1] is missing


def test_an_infinite_wrong_answer_explains_only_an_infinite_result():
    """|x - inf| <= rtol * inf holds for any finite x: a hint whose answer is inf must not explain a finite one."""
    tol = Tolerance(1.0, 1e-6, 1e-9)
    assert not tol.matches(np.array(13.5), np.array(np.inf))
    assert tol.matches(np.array([1.0, np.inf]), np.array([1.0, np.inf]))
