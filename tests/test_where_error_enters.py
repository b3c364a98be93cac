"""Issue 40, "where the error enters": several outputs of one call are judged as one (Trial.close_each), so that a
failing case says which of them match the reference and which do not, after the first failing one's own message;
and along a time axis, the general diagnostic says at which position the values first part from the reference's."""
import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import grade_folder, solutions_with

from autograder.cases import backprop
from autograder.expected import Live, Recorder, Replay
from autograder.judge import CaseFailed
from autograder.rubric import Case
from autograder.trial import Trial

RNG = np.random.default_rng(40)
GRADS = {k: RNG.normal(size=s) for k, s in {"E": (11, 4), "W": (6, 12), "b": (6,), "U": (11, 6), "c": (11,)}.items()}
WHAT = "ffnn_lm_backward(dlogits, cache) with contexts (7, 3)"


def trial(visibility: str = "hidden", expected=None) -> Trial:
    case = Case(component="backprop", number="2.8", name="ffnn_lm_backward", check="backprop.ffnn_backward", points=1,
                params={}, visibility=visibility, timeout=10, rtol=1e-6, atol=1e-9)
    return Trial(case, None, expected or Live(None), secret="tests")  # comparisons of data only: no worker, no reference


def said(fn, *args) -> str:
    with pytest.raises(CaseFailed) as err:
        fn(*args)
    return str(err.value)


def test_a_gradient_dict_says_which_gradients_match_after_the_first_wrong_ones_message():
    """The issue's backward pass: dU and dc right, dE, dW and db wrong."""
    got = {k: v + (k in "EWb") * RNG.normal(size=v.shape) for k, v in GRADS.items()}
    message = said(backprop._check_grads, trial(), got, GRADS, WHAT)
    alone = said(trial().close, got["E"], GRADS["E"], f"{WHAT}: the gradient of E")  # dE judged alone, as before
    assert message == alone + " Of the gradients: dU and dc match; dE, dW and db do not."
    secret = {round(float(v), 4) for g in GRADS.values() for v in g.ravel()}
    assert not {round(float(x), 4) for x in re.findall(r"-?\d+\.\d+", message)} & secret
    last = {**GRADS, "c": GRADS["c"] + 1.0}  # one wrong, the last: its own message, then the rest named
    assert said(backprop._check_grads, trial(), last, GRADS, WHAT).endswith(
        " Of the gradients: dE, dW, db and dU match; dc does not.")


def test_a_part_of_the_wrong_type_or_shape_does_not_match_and_a_case_that_passed_still_passes():
    t = trial("visible")
    a, b, c = RNG.normal(size=(3, 4)), RNG.normal(size=5), RNG.normal(size=(2, 2))
    parts = [t.part("a", a, a, "a"), t.part("b", b.tolist(), b, "b"), t.part("c", c[:1], c, "c")]
    message = said(t.close_each, "the outputs", parts)
    assert message == "b: expected a numpy array, got a list. Of the outputs: a matches; b and c do not."
    t.close_each("the outputs", [t.part("a", a, a, "a"), t.part("b", b + 1e-12, b, "b")])


def test_one_part_or_none_right_adds_nothing_to_the_message():
    t = trial()
    a, b = RNG.normal(size=4), RNG.normal(size=4)
    alone = said(t.close, a + 1, a, "a")
    assert said(t.close_each, "the outputs", [t.part("a", a + 1, a, "a")]) == alone
    assert said(t.close_each, "the outputs", [t.part("a", a + 1, a, "a"), t.part("b", b * 2, b, "b")]) == alone


def test_a_failure_other_than_a_wrong_value_ends_the_case_as_it_did_before():
    """Judged one after the other, a part that failed ended the case before the next ran: its message stands when a
    later one raises; before any part failed, what a part raises ends the case as it is."""
    t = trial()
    a = RNG.normal(size=4)

    def broken():
        raise RuntimeError("the worker went away")

    parts = [t.part("h", a, a, "h"), t.part("a", a + 1, a, "a"), ("b", broken)]
    assert said(t.close_each, "the outputs", parts) == said(t.close, a + 1, a, "a")
    with pytest.raises(RuntimeError):
        t.close_each("the outputs", [t.part("a", a, a, "a"), ("b", broken), t.part("c", a + 1, a, "c")])


def check(t: Trial, got: dict) -> None:
    """A check with hints, as a student bundle records it on the reference and replays it on a student's answer."""
    want = t.expect(lambda ref: {k: v * ref.scale for k, v in GRADS.items()})
    doubled = lambda k: {"doubled": lambda ref: want[k] * 2}  # noqa: E731
    t.close_each("the gradients", [t.part(f"d{k}", got[k], want[k], f"the gradient of {k}", hints=doubled(k)) for k in GRADS])


def test_a_student_bundle_replays_every_part_as_the_grader_judges_it(tmp_path):
    """Every part is judged, so a replay reads the hints of the parts after a failing one: recorded, in the same order."""
    recorder = Recorder(SimpleNamespace(scale=1.0))
    check(trial("visible", recorder), GRADS)  # the reference passes, so every part's hints are recorded
    recorder.save(tmp_path / "expected.bin")
    wrong = {**GRADS, "W": GRADS["W"] + 1.0, "U": GRADS["U"] * 2}
    graded = said(check, trial("visible", Live(SimpleNamespace(scale=1.0))), wrong)
    assert said(check, trial("visible", Replay(tmp_path / "expected.bin")), wrong) == graded
    assert graded.endswith(" Of the gradients: dE, db and dc match; dW and dU do not.")


@pytest.mark.slow
def test_an_rnn_whose_every_step_starts_from_h0_says_its_first_step_is_right(rubric, tmp_path):
    """The issue's RNN: each step reads h0 instead of the previous state, so exactly the first time step is right."""
    step = "h = rnn_step(x[:, t], h, W_xh, W_hh, b_h)  # (B, H)"
    variant = solutions_with(tmp_path, "rnn.py", step, step.replace("], h, W_xh", "], h0, W_xh"))
    component = rubric.component("rnn")
    forward = dataclasses.replace(component, cases=[k for k in component.cases if k.check == "rnn.forward"])
    run = grade_folder(dataclasses.replace(rubric, components=[forward]), variant, tmp_path)
    failed = {r.case.name: r.output for r in run.results if not r.passed}
    shown = failed["rnn_forward over 12 steps from a non-zero h0"]
    assert "165 of 180 elements (92%)" in shown, shown
    assert (". Along axis 1 (size 12), position 0 matches the reference and every later one differs: the error enters at "
            "position 1.") in shown, shown
    assert "position 0 matches the reference" in failed["rnn_forward over 30 steps, float32"]
