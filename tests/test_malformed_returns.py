"""Issue 39: a malformed return is the student's failure, in words. Every value the student's code returns is checked
against the student API's declaration (autograder/returns.py) before any check, staff test or self-comparison sees it.

The unit tests call the boundary itself (no process). The graded tests take tests/malformed/returns.yaml, one return of
another type, dtype or shape in each of the nine components (lstm_forward's list of per-step states,
scaled_dot_product_attention's (out, weights), a float32 torch.zeros buffer from float64 inputs, a translation
tutorial's seq2seq.py, ...), grade them together as one submission, and ask that no case be the grader's failure and
that the cases each names say what came back. Staff test 5.90 compares the student with itself: a missing scale passes
it, and keys that do change the output fail it with its own words."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import ROOT, SOLUTIONS, grade_folder, solutions_with

from autograder.judge import CaseFailed
from autograder.outcome import GRADER_FAILED, INTERNAL_ERROR
from autograder.returns import ATTRIBUTES, CLASSES, FUNCTIONS, METHODS, Boundary, Malformed
from autograder.sandbox.host.proxy import Remote
from autograder.sandbox.worker.wire import Expr, Handle

MALFORMED = Path(__file__).resolve().parent / "malformed"
CORPUS = yaml.safe_load((MALFORMED / "returns.yaml").read_text())
# What the declaration leaves out on purpose: no case uses what fit returns, and one without `return self` loses nothing.
UNDECLARED = {("NGramLM", "fit")}


# ---- the boundary alone ----------------------------------------------------------------------------------------


def said(fn: str, *args, result, **kwargs) -> str | None:
    """What the boundary says of `module.function(*args, **kwargs)` returning `result` (None: nothing)."""
    module, name = fn.split(".")
    try:
        Boundary()(Expr(module, (name,)), list(args), kwargs, result)
    except Malformed as exc:
        return str(exc)
    return None


def f64(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def lstm_inputs(B=3, T=6, I=4, H=5):
    return [f64(B, T, I), f64(B, H), f64(B, H), f64(4 * H, I), f64(4 * H, H), f64(4 * H)]


def test_every_function_class_and_method_of_the_api_is_declared():
    """solutions/ is the API: each public function, class and method there has a declaration (fit excepted)."""
    import ast

    functions, classes, methods = set(), set(), set()
    for path in SOLUTIONS.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                functions.add((path.stem, node.name))
            elif isinstance(node, ast.ClassDef):
                classes.add((path.stem, node.name))
                methods |= {(node.name, m.name) for m in node.body if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")}
    assert functions == set(FUNCTIONS) and classes == set(CLASSES)
    assert methods - UNDECLARED == set(METHODS) and ("NGramLM", "vocab") in ATTRIBUTES


def test_the_issues_examples_say_what_came_back_and_the_fix():
    x, h0, c0, W_ih, W_hh, b = args = lstm_inputs()
    steps = [f64(3, 5) for _ in range(6)]
    assert said("lstm.lstm_forward", *args, result=(steps, (f64(3, 5), f64(3, 5)))) == (
        "lstm_forward: hs: expected a torch tensor, got a list of 6 float64 tensors of shape (3, 5). Stack them along the axis T "
        "of (B, T, H) = (3, 6, 5): torch.stack(..., dim=1).")
    Q, K, V = f64(2, 3, 5, 4), f64(2, 3, 7, 4), f64(2, 3, 7, 6)
    assert "(output, weights) came back, as tutorials return them: return only the output tensor" in said(
        "attention.scaled_dot_product_attention", Q, K, V, result=(f64(2, 3, 5, 6), f64(2, 3, 5, 7)))
    buffer = said("rnn.rnn_forward", f64(3, 6, 4), f64(3, 5), f64(5, 4), f64(5, 5), f64(5), result=(torch.zeros(3, 6, 5), f64(3, 5)))
    assert buffer.startswith("rnn_forward: hs: expected dtype float64 (the dtype must follow the inputs), got float32. ")
    assert "a torch.zeros(B, T, H) buffer" in buffer


def test_a_shape_is_read_in_the_apis_names_where_it_reads_one_way():
    args = lstm_inputs()
    final = (f64(3, 5), f64(3, 5))
    assert "Likely mistake: hs is time-major (T, B, H)" in said("lstm.lstm_forward", *args, result=(f64(6, 3, 5), final))
    assert "Return the final states as a pair of their own, (hs, (h_last, c_last))" in said(
        "lstm.lstm_forward", *args, result=(f64(3, 6, 5), *final))
    dout, x, W = f64(5, 4), f64(5, 3), f64(4, 3)
    assert "Likely mistake: dW is transposed" in said("backprop.linear_backward", dout.numpy(), x.numpy(), W.numpy(),
                                                      result=(np.zeros((5, 3)), np.zeros((3, 4)), np.zeros(4)))
    assert "Likely mistake: db keeps a batch axis of size 1" in said("backprop.linear_backward", dout.numpy(), x.numpy(), W.numpy(),
                                                                     result=(np.zeros((5, 3)), np.zeros((4, 3)), np.zeros((1, 4))))
    src = torch.tensor([[3, 4, 0, 0], [5, 0, 0, 0]])  # the last two columns are PAD in every source
    boundary = Boundary()
    model = Remote(None, Expr(Handle(7, "Seq2Seq")))
    boundary(Expr("seq2seq", ("Seq2Seq",)), [], {"src_vocab": 9, "tgt_vocab": 11, "d_emb": 4, "d_hidden": 6}, model)
    with pytest.raises(Malformed, match="pass total_length=S"):
        boundary(Expr(Handle(7, "Seq2Seq"), ("encode",)), [src], {}, (f64(2, 2, 6), src != 0, f64(2, 6)))


def test_the_natural_equivalents_of_the_api_pass():
    args = lstm_inputs()
    assert said("lstm.lstm_forward", *args, result=[f64(3, 6, 5), [f64(3, 5), f64(3, 5)]]) is None  # lists for tuples
    for number in (0.25, 3, np.array(0.25), torch.tensor(0.25, dtype=torch.float64, requires_grad=True)):
        assert said("backprop.cross_entropy", np.zeros((2, 3)), np.zeros(2, dtype=np.int64), result=number) is None
    assert said("ngram.count_ngrams", [["a", "b"]], 2, result={("<s>", "a"): 1, ("a", "b"): 1.0, ("b", "</s>"): 1}) is None
    assert said("ngram.pad_sentence", ["a"], 2, result=("<s>", "a", "</s>")) is None  # a tuple for a list
    assert said("word2vec.most_similar", np.zeros((6, 3)), 1, 2, result=(4, 5)) is None


def test_what_the_parent_cannot_know_is_left_unsaid():
    """An input that stays in the worker: its sizes and dtype are not claimed; the structure still is."""
    x, *rest = lstm_inputs()
    kept = Remote(None, Expr(Handle(3, "torch tensor of dtype torch.float64")))
    assert said("lstm.lstm_forward", kept, *rest, result=(torch.zeros(3, 9, 5), (torch.zeros(3, 5), torch.zeros(3, 5)))) is None
    steps = said("lstm.lstm_forward", kept, *rest, result=([f64(3, 5)] * 6, (f64(3, 5), f64(3, 5))))
    assert steps.startswith("lstm_forward: hs: expected a torch tensor, got a list of 6") and "Stack" not in steps  # B or T?
    boundary, model = Boundary(), Remote(None, Expr(Handle(8, "TransformerLM")))
    boundary(Expr("transformer", ("TransformerLM",)), [11, 8, 8, 2, 2, 16], {}, model)
    ids = torch.zeros(2, 5, dtype=torch.int64)
    boundary(Expr(Handle(8, "TransformerLM")), [ids], {}, torch.zeros(2, 5, 11))  # no weights given: any dtype
    boundary(Expr(Handle(8, "TransformerLM"), ("load_state_dict",)), [{"lm_head.weight": f64(11, 8)}], {"strict": True}, None)
    with pytest.raises(Malformed, match="the model's weights, which the grader gave in float64"):
        boundary(Expr(Handle(8, "TransformerLM")), [ids], {}, torch.zeros(2, 5, 11))
    with pytest.raises(Malformed, match=r"the logits: expected shape \(B, T, V\) = \(2, 5, 11\), got \(2, 5, 12\)"):
        boundary(Expr(Handle(8, "TransformerLM")), [ids], {}, f64(2, 5, 12))
    assert said("lstm.lstm_forward", *lstm_inputs(), "an argument no declaration knows", result=None) is None


def test_a_hidden_input_never_shows_in_what_is_said():
    words = [["secretword", "b"]]
    message = said("ngram.count_ngrams", words, 2, result={"secretword b": 1})
    assert message == "count_ngrams: a key of the counts: expected a tuple of 2 words, got a str."
    boundary, lm = Boundary(), Remote(None, Expr(Handle(2, "NGramLM")))
    boundary(Expr("ngram", ("NGramLM",)), [2], {}, lm)
    with pytest.raises(Malformed) as vocab:
        boundary(Expr(Handle(2, "NGramLM"), ("vocab",)), None, None, ["secretword", "b", "</s>"])
    assert str(vocab.value) == "NGramLM.vocab: the vocabulary: expected a set of words, got a list of 3 str."
    assert issubclass(Malformed, CaseFailed) and Malformed.kind == "wrong"


def test_each_result_of_a_call_made_many_times_is_checked():
    """A map of one call object ([call] * draws: the sampling check's) reads the call's declaration once, and still
    checks every result: the draw that went wrong is named, however many came right before it."""
    boundary, lm = Boundary(), Remote(None, Expr(Handle(2, "NGramLM")))
    boundary(Expr("ngram", ("NGramLM",)), [2], {}, lm)
    sample = Expr(Handle(2, "NGramLM"), ("sample",))
    boundary.each(sample, [np.random.default_rng(0)], {"max_len": 6}, [["a", "b"]] * 3000)
    with pytest.raises(Malformed, match=r"NGramLM.sample: .*\[1\].*int"):
        boundary.each(sample, [np.random.default_rng(0)], {"max_len": 6}, [["a", "b"]] * 2998 + [["a", 3], ["b"]])


# ---- graded: one submission holds a malformed return in each component --------------------------------------------


def malformed_submission(folder: Path) -> Path:
    """solutions/ with every entry of tests/malformed/returns.yaml in."""
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("mistakes.yaml"))
    from autograder.rubric import load_rubric

    files = {c.id: c.file for c in load_rubric(ROOT / "grading.yaml").components}
    for entry in CORPUS:
        target = folder / files[entry["component"]]
        if "file" in entry:
            shutil.copy(MALFORMED / entry["file"], target)
        for edit in entry.get("edits", ()):
            text = target.read_text()
            assert text.count(edit["old"]) == 1, f"{entry['name']}: `old` must occur once in {target.name}"
            target.write_text(text.replace(edit["old"], edit["new"]))
    return folder


@pytest.fixture(scope="module")
def graded(rubric, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("malformed")
    run = grade_folder(rubric, malformed_submission(tmp_path / "submission"), tmp_path, timing=False)
    return {r.case.number: r for r in run.results}


@pytest.mark.slow
def test_every_component_is_graded_and_no_case_is_the_graders_failure(graded):
    assert {entry["component"] for entry in CORPUS} == {r.case.component for r in graded.values()}
    failed = [f"{n}: {r.output}" for n, r in graded.items()
              if r.outcome.kind == GRADER_FAILED or INTERNAL_ERROR in r.output or "The grader failed on this case" in r.output]
    assert failed == []


@pytest.mark.slow
@pytest.mark.parametrize("entry", CORPUS, ids=[e["component"] for e in CORPUS])
def test_a_malformed_return_fails_its_cases_in_words(graded, entry):
    for number in entry["cases"]:
        result = graded[number]
        assert (result.outcome.kind, result.score) == ("wrong", 0), f"{number}: {result.output}"
        assert entry["says"] in result.output, f"{number}: {result.output}"


SCALE = "scores = Q @ K.transpose(-2, -1) / math.sqrt(dk)  # (..., Tq, Tk)"


@pytest.mark.slow
def test_staff_test_5_90_says_only_what_it_checked(rubric, tmp_path):
    """A missing 1/sqrt(dk) leaves the output independent of the keys' order: 5.90 passes (attention.scaled names the
    scale). A causal mask applied inside scaled_dot_product_attention makes the order matter: 5.90 says so."""
    attention = rubric.component("attention")
    case = [k for k in attention.cases if k.number == "5.90"]
    only = dataclasses.replace(rubric, components=[dataclasses.replace(attention, cases=case)])
    unscaled = solutions_with(tmp_path / "unscaled", "attention.py", SCALE, SCALE.replace(" / math.sqrt(dk)", ""))
    causal = solutions_with(tmp_path / "causal", "attention.py", SCALE,
                            SCALE + "\n    scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float('-inf'))")
    passed = grade_folder(only, unscaled, tmp_path / "a", component_ids=["attention"]).results
    failed = grade_folder(only, causal, tmp_path / "b", component_ids=["attention"]).results
    assert [(r.case.number, r.outcome.kind) for r in passed] == [("5.90", "passed")]
    assert [(r.case.number, r.outcome.kind, r.output) for r in failed] == [
        ("5.90", "wrong", "Reordering the keys (with their values) changed the output; attention must not depend on the keys' order.")]
