"""Feedback names what was expected and the likely mistake, and hidden cases leak no expected values; a student reads
the failures first, with their causes, and the points a case earned in words."""
import dataclasses
import re

import numpy as np
import pytest
import torch
from conftest import grade_folder, solutions_with

from autograder.batch.gradebook import feedback_md
from autograder.judge import CaseFailed, expect_array, expect_equal, expect_identical, expect_number
from autograder.outcome import PASSED, Outcome, seconds_text
from autograder.report import failure_json, feedback, results_json, summary_lines
from autograder.rounding import Rounded
from autograder.runner import HUNG_BUDGET, CaseResult, GradeRun, _Hung
from autograder.sandbox.host.process import CallTimeout
from autograder.unittests import _credit

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

    unexplained = WANT + np.array([[0.1, 0.2], [0.3, 0.4]])  # WRONG, twice WANT, is named by the judge's ratio diagnostic
    message = failure(expect_array, unexplained, WANT, "x", visible=True, hints={"never": broken}, **TOL)
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


# ---- what a student reads first ----------------------------------------------------------------------------------


def entry(number: str, name: str, status: str, score: float, most: float, output: str = "Passed.", **extra) -> dict:
    """One of results.json's tests as results_json writes it: `name` is "[component] case"."""
    return {"number": number, "name": name, "status": status, "score": score, "max_score": most, "visibility": "visible",
            "tags": [name[1:].split("]")[0]], "output": output, "extra_data": {"check": "", "outcome": "passed", **extra}}


GELU = "output: values differ from the reference: 96 of 96 elements (100%). Likely mistake: the tanh approximation of GELU."
MISSING = "Not submitted: rnn.py was not found in the submission."
USES = "This case uses your FeedForward, which fails case 7.4. Fix that first: the difference here may come from it alone. logits: ..."
CLASS = [
    entry("1.1", "[ngram] pad_sentence", "passed", 1, 1),
    entry("1.2", "[ngram] count_ngrams", "passed", 2, 2),
    entry("3.1", "[rnn] rnn_step", "failed", 0, 1, MISSING),
    entry("3.2", "[rnn] rnn_forward", "failed", 0, 2, MISSING),
    entry("3.3", "[rnn] the RNN language model", "failed", 0, 2, MISSING),
    entry("4.1", "[lstm] lstm_step", "passed", 1, 1),
    entry("4.9", "[lstm] lstm_forward at several lengths", "failed", 1.5, 2, "1.5 of 2 points: 3 of 4 sequence lengths match"),
    entry("7.1", "[transformer] LayerNorm", "passed", 2, 2),
    entry("7.4", "[transformer] FeedForward", "failed", 0, 2, GELU, check="transformer.feed_forward", outcome="wrong"),
    entry("7.5", "[transformer] TransformerBlock", "failed", 0, 2, USES, check="transformer.block", uses_failed=["7.4"]),
    entry("7.6", "[transformer] TransformerLM", "failed", 0, 3, USES, check="transformer.lm", uses_failed=["7.4"]),
    entry("7.9", "[transformer] speed", "passed", 0, 0, "Skipped: no GPU here.", outcome="skipped"),
]


def test_the_summary_gives_scores_then_failures_causes_first_then_passes_folded():
    assert summary_lines(CLASS) == [
        "Score by component:", "  ngram: 3 / 3", "  rnn: 0 / 5", "  lstm: 2.5 / 3", "  transformer: 2 / 9",
        "",
        "7 cases failed; those that later cases build on come first:",
        f"  Fix this first: 7.4 [transformer] FeedForward, as 2 later failed cases use your FeedForward. {GELU}",
        f"  3.1, 3.2 and 3.3 [rnn]: {MISSING}",  # one cause, said once
        "  4.9 [lstm] lstm_forward at several lengths: 1.5 of 2 points: 3 of 4 sequence lengths match",
        "  7.5 and 7.6 [transformer]: it uses your FeedForward, which fails case 7.4: fix that first.",
        "",
        "ngram: 2 cases passed", "lstm: 1 case passed", "transformer: 1 case passed, 1 skipped",
    ]


def test_a_long_cause_is_cut_at_a_word_in_the_summary_but_its_likely_mistake_is_kept():
    long = "x: values differ: " + "word " * 100
    (line,) = [line for line in summary_lines([entry("1.1", "[ngram] pad", "failed", 0, 1, long)]) if line.startswith("  1.1")]
    assert line.endswith(" word ...") and len(line) < 250
    named = long.rstrip() + ". Likely mistake: the max is not subtracted before exp."
    (line,) = [line for line in summary_lines([entry("1.1", "[ngram] pad", "failed", 0, 1, named)]) if line.startswith("  1.1")]
    assert line.endswith(" word ... Likely mistake: the max is not subtracted before exp.") and len(line) < 250
    assert summary_lines([entry("1.1", "[ngram] pad", "passed", 1, 1)])[2:] == ["", "No case failed.", "", "ngram: 1 case passed"]


def one_mistake(rubric) -> GradeRun:
    """The whole rubric graded by hand: every case passed but the three softmax cases of backprop, wrong."""
    wrong = Outcome("wrong", "softmax(z): values differ from the reference: 12 of 12 elements (100%), the worst at [0, 1]. "
                             "Likely mistake: softmax taken along axis 0 instead of the last axis.")
    return GradeRun(results=[CaseResult(k, wrong if k.check == "backprop.softmax" and k.visible else PASSED)
                             for c in rubric.components for k in c.cases], seconds=12.0)


def test_one_mistake_is_named_in_the_first_20_lines_of_the_feedback_file(rubric):
    """Nine components, a file and results.json as grade-all writes them: the mistake is on the screen a student opens."""
    results = results_json(one_mistake(rubric))
    row = {"status": "ok", "score": results["score"], "max_score": results["extra_data"]["max_score"], "message": ""}
    markdown = feedback_md("1001", row, results)
    assert "softmax taken along axis 0" in "\n".join(markdown.splitlines()[:20]), markdown[:3000]
    assert "softmax taken along axis 0" in "\n".join(results["output"].splitlines()[:20])  # Gradescope's first screen too
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == ["## 2.1, 2.2 and 2.3 \\[backprop\\]: 0 / 4"]  # only the failed cases, their one message once
    assert markdown.count("Likely mistake") == 2  # in the summary, and under the heading


def test_a_submission_not_graded_says_why_once():
    message = "nothing in the submission can be graded: expected ngram.py. It is empty."
    markdown = feedback_md("1004", {"status": "not_gradable", "score": 0.0, "max_score": 5.0, "message": message}, failure_json(message))
    assert markdown.count("can be graded") == 1 and "Not graded:" in markdown


def test_part_of_the_points_is_said_as_points_never_as_passed(rubric):
    staff = next(k for k in rubric.component("lstm").cases if k.check.endswith("test_lengths"))
    three = CaseResult(staff, _credit(staff, {"__score__": 1.5}, "3 of 4 sequence lengths match"))
    assert feedback(three) == "1.5 of 2 points: 3 of 4 sequence lengths match"
    none = CaseResult(staff, _credit(staff, {"__score__": 0}, None))
    assert feedback(none) == "0 of 2 points: set by the staff test, which gives no reason." and none.score == 0
    assert feedback(CaseResult(staff, _credit(staff, {"__score__": 2}, None))) == "Passed."
    one = dataclasses.replace(staff, points=1.0)
    assert feedback(CaseResult(one, Outcome("passed", "1.93x the reference's time", 0.5))).startswith("0.5 of 1 point: ")


def test_times_are_said_rounded_and_a_shared_budget_as_configured(rubric):
    assert [seconds_text(x) for x in (8.12111, 10.0, 0.25, 600)] == ["8.1 s", "10 s", "0.25 s", "600 s"]
    assert CallTimeout(8.12111).describe().startswith("Timed out: the case did not finish within 8.1 s (")
    first, second, third = rubric.component("ngram").cases[:3]
    hung = _Hung()
    timed_out = Outcome("timeout", CallTimeout(first.timeout).describe())
    hung.after(CaseResult(first, timed_out, seconds=first.timeout))
    assert hung.limit(second.timeout) == second.timeout
    kept = hung.after(CaseResult(second, timed_out, seconds=HUNG_BUDGET - 2.87889))  # its own limit, then the budget's rest
    assert kept.output.startswith(timed_out.message) and kept.output.endswith(f"later cases share {HUNG_BUDGET:g} s.")
    rest = hung.limit(third.timeout)
    assert rest < third.timeout
    cut = hung.after(CaseResult(third, Outcome("timeout", CallTimeout(rest).describe()), seconds=rest))
    assert cut.output == (f"Timed out: case {first.number} of this component timed out before, so its later cases share "
                          f"{HUNG_BUDGET:g} s, and they ran out during this one.")
