"""Issue 40: mutants of the reference name mistakes nobody wrote down. The edits are generated from solutions/ (what
students write, between the solution markers), each with a sentence in the code's own names; a failed case is run
again on its recorded exchanges with each mutant of the lines it runs in the reference's place, and the mutant
whose answers are the student's is named, only when the evidence singles it out."""
import ast

import pytest
from conftest import SOLUTIONS, grade_folder, isolation, open_submission, solutions_with

from autograder.batch.report import figures
from autograder.judge import LIKELY
from autograder.mutants import EVIDENCE
from autograder.mutants.edits import generate
from autograder.mutants.match import Explainer
from autograder.runner import grade
from autograder.sandbox.host.tape import Diverged, Exhausted, Replayed, _key
from autograder.verify import write_edits

ALL = {path.name: generate(path.name, path.read_text()) for path in sorted(SOLUTIONS.glob("*.py"))}


def sentences(file: str, function: str) -> list[str]:
    return [m.sentence for m in ALL[file] if m.function == function]


def test_every_family_of_edits_is_generated_and_each_mutant_compiles_and_differs():
    kinds = {m.kind for mutants in ALL.values() for m in mutants}
    assert kinds == {"variable", "call", "term", "factor", "sibling", "dim", "off-by-one", "order", "state", "initial",
                     "transpose", "comparison", "sign", "keyword"}
    for file, mutants in ALL.items():
        source = (SOLUTIONS / file).read_text()
        edited = [m.source(source) for m in mutants]
        assert len(set(edited)) == len(edited) and source not in edited
        for text in edited[:: max(1, len(edited) // 25)]:  # a sample: every one compiled when it was generated
            ast.parse(text)


def test_edits_touch_only_what_students_write():
    """Between `# BEGIN SOLUTION` and `# END SOLUTION`: never a docstring, a signature or the module's imports."""
    for file, mutants in ALL.items():
        source = (SOLUTIONS / file).read_text()
        for m in mutants:
            before = source[: m.start]
            assert before.rfind("# BEGIN SOLUTION") > before.rfind("# END SOLUTION"), (file, m.sentence)


def test_sentences_say_the_mistake_in_the_code_own_names():
    assert ("in rnn_forward, every step of the loop starts from h0 instead of the h carried over from the step before"
            in sentences("rnn.py", "rnn_forward"))
    assert "in rnn_forward, h0 is ignored: h starts from zeros" in sentences("rnn.py", "rnn_forward")
    assert "in rnn_step, tanh is not applied to x_t @ W_xh.T + h_prev @ W_hh.T + b_h" in sentences("rnn.py", "rnn_step")
    assert "in rnn_step, W_hh is used untransposed where its transpose belongs" in sentences("rnn.py", "rnn_step")
    assert "in scaled_dot_product_attention, K is used where V belongs" in sentences("attention.py", "scaled_dot_product_attention")
    assert "in lstm_step, tanh is applied to the whole product where it belongs to c_t alone" in sentences("lstm.py", "lstm_step")
    assert all(m.sentence.startswith(f"in {m.function}, ") for mutants in ALL.values() for m in mutants)


def test_a_function_with_a_while_loop_is_never_mutated():
    """Mutants run in the grader's own process: an edit must not be able to make it loop forever."""
    whiles = {(file, node.name) for file in ALL for node in ast.walk(ast.parse((SOLUTIONS / file).read_text()))
              if isinstance(node, ast.FunctionDef) and any(isinstance(n, ast.While) for n in ast.walk(node))}
    assert whiles  # ngram's sampling
    assert not [m for file, mutants in ALL.items() for m in mutants if (file, m.function.split(".")[-1]) in whiles]


def test_a_replay_answers_only_the_requests_recorded_in_their_order():
    reply = ({"value": 1}, [])
    header = {"op": "call", "args": [1, 2], "keep": False, "first": True}
    replayed = Replayed([(_key(header, [b"x"]), reply)])
    with pytest.raises(Diverged):
        replayed.exchange({**header, "args": [1, 3]}, [b"x"], None)
    replayed = Replayed([(_key(header, [b"x"]), reply)])
    assert replayed.exchange({**header, "first": False}, [b"x"], None) == reply  # `first` is the proxy's, not the request
    with pytest.raises(Exhausted):
        replayed.exchange(header, [b"x"], None)


def test_the_class_report_lists_a_mistake_found_by_a_mutant_as_a_row_of_its_own(rubric):
    said = (f"hs: values differ. {LIKELY}in rnn_forward, every step of the loop starts from h0 instead of the h carried "
            f"over from the step before. {EVIDENCE} that one change gives your answers here and in 3 of the component's 3 other cases.")
    people = [{"submission": s, "status": "ok"} for s in ("a", "b")]
    results = {s: {"tests": [{"number": "3.3", "tags": ["rnn"], "status": "failed", "output": said, "extra_data": {"kind": "wrong"}}]}
               for s in ("a", "b")}
    rows = figures.mistakes(rubric, people, results)
    assert [(r["source"], r["count"], r["mistake"]) for r in rows] == [
        ("mutant", 2, "in rnn_forward, every step of the loop starts from h0 instead of the h carried over from the step before")]


@pytest.mark.slow
def test_a_mistake_nobody_wrote_down_is_named_by_its_mutant_and_what_is_shown_does_not_depend_on_the_secret(tmp_path, rubric):
    """Named in every failed case; a visible case is explained by the visible cases alone, so what it says is the same
    under any secret (the hidden cases' inputs, and whether the mutant gives the student's answers there, differ)."""
    folder = solutions_with(tmp_path, "rnn.py", "h = rnn_step(x[:, t], h, W_xh, W_hh, b_h)", "h = rnn_step(x[:, t], h0, W_xh, W_hh, b_h)")
    runs = []
    with isolation(rubric) as entered:
        for secret, explain in (("one", True), ("two", True), ("one", False)):
            submission = open_submission(folder, tmp_path / f"{secret}-{explain}")
            runs.append({r.case.number: r for r in grade(rubric, submission, secret=secret, isolation=entered, component_ids=["rnn"],
                                                         explain=explain).results})
    named = (f"{LIKELY}in rnn_forward, every step of the loop starts from h0 instead of the h carried over from the step "
             f"before. {EVIDENCE} that one change gives your answers here and in")
    failed = [r for r in runs[0].values() if not r.passed]
    assert failed and all(named in r.output for r in failed)
    assert any(not r.case.visible for r in failed) and any(r.case.visible for r in failed)
    assert all(r.output.endswith("other visible cases.") for r in failed if r.case.visible)
    assert {n: r.output for n, r in runs[0].items() if r.case.visible} == {n: r.output for n, r in runs[1].items() if r.case.visible}
    assert all(r.output.startswith(runs[2][n].output + f" {LIKELY}") for n, r in runs[0].items() if not r.passed)  # words kept


@pytest.mark.slow
def test_mutants_that_tie_are_named_together_and_none_is_named_where_none_gives_the_answer(tmp_path, rubric):
    """word2vec's window one short on the left: two edits give exactly the student's pairs, here and in every case, so
    the evidence names neither alone. rnn_step's tanh scaled by 0.999: no edit a mutant makes, no ratio the diagnostics
    know, so numbers only. One grade for both (two components of one folder)."""
    edits = [("word2vec.py", "for j in range(max(0, i - window), min(len(sentence), i + window + 1)):",
              "for j in range(max(0, i - window + 1), min(len(sentence), i + window + 1)):"),
             ("rnn.py", "return torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h)  # (B, H)",
              "return 0.999 * torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h)  # (B, H)")]
    run = grade_folder(rubric, write_edits(SOLUTIONS, edits, tmp_path / "variant"), tmp_path, component_ids=["word2vec", "rnn"])
    failed = {c: [r.output for r in run.results if not r.passed and r.case.component == c] for c in ("word2vec", "rnn")}
    assert any(f"{LIKELY}one of: in skipgram_pairs, " in m and f"{EVIDENCE} one of these changes" in m for m in failed["word2vec"])
    assert failed["rnn"] and not any(LIKELY in m or EVIDENCE in m for m in failed["rnn"])


def test_an_explainer_that_fails_leaves_the_grades_as_they_were(rubric, capsys):
    """Its failure is the grader's, printed for whoever runs it; no case's outcome changes for it."""
    results = [object()]
    assert Explainer(None, "secret").explain(rubric.component("rnn"), results) is results
    assert "AttributeError" in capsys.readouterr().err
