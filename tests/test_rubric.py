"""A bad grading.yaml is refused with a message naming its line, the case as the results number it, the key, and what was expected."""
from pathlib import Path

import pytest
from conftest import ROOT, with_staff_tests

from autograder.cases import BUILDS_ON
from autograder.rubric import RubricError, load_rubric


def rewritten_rubric(tmp_path: Path, old: str, new: str) -> Path:
    """grading.yaml with one text edit, lines as in the original but for the edit's own, beside a copy of its staff tests."""
    text = (ROOT / "grading.yaml").read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "grading.yaml"
    path.write_text(text.replace(old, new).replace("\nsolutions: solutions\n", f"\nsolutions: {ROOT / 'solutions'}\n"))
    with_staff_tests(tmp_path)
    return path


FIRST = '{name: "pad_sentence, n = 1", check: ngram.padding, params: {n: 1}, points: 1}'  # case 1.1
NGRAM = "  ngram:\n    file: ngram.py\n"

# (what, the edit (old, new), the line holding this text, where the message says the problem is, what it says there)
BAD_EDITS = [
    ("negative points", (FIRST, FIRST.replace("points: 1", "points: -1")), "points: -1",
     "components.ngram case 1.1 'pad_sentence, n = 1', points", "greater than or equal to 0 (got -1)"),
    ("unknown visibility", (FIRST, FIRST.replace("}", ", visibility: secret}")), "secret",
     "components.ngram case 1.1 'pad_sentence, n = 1', visibility", "'visible'"),
    ("unknown key, near a known one", (FIRST, FIRST.replace("}", ", pionts: 1}")), "pionts",
     "components.ngram case 1.1 'pad_sentence, n = 1', pionts", "unknown key; did you mean 'points'?"),
    ("unknown key", (FIRST, FIRST.replace("}", ", weight: 1}")), "weight",
     "components.ngram case 1.1 'pad_sentence, n = 1', weight", "unknown key; expected one of name, check, points, params, visibility, timeout"),
    ("missing points", (FIRST, FIRST.replace(", points: 1", "")), "n = 1", "components.ngram case 1.1 'pad_sentence, n = 1', points", "Field required"),
    ("zero timeout", (FIRST, FIRST.replace("}", ", timeout: 0}")), "timeout: 0", "components.ngram case 1.1 'pad_sentence, n = 1', timeout", "greater than 0"),
    ("unknown check", (FIRST, FIRST.replace("ngram.padding", "ngram.paddin")), "ngram.paddin",
     "components.ngram case 1.1 'pad_sentence, n = 1', check", "unknown check 'ngram.paddin'; known for ngram: "),
    ("unknown check, the near one named", (FIRST, FIRST.replace("ngram.padding", "ngram.paddin")), "ngram.paddin",
     "components.ngram case 1.1 'pad_sentence, n = 1', check", "; did you mean 'ngram.padding'?"),
    ("check of another component", (FIRST, FIRST.replace("ngram.padding", "backprop.softmax")), "backprop.softmax",
     "components.ngram case 1.1 'pad_sentence, n = 1', check", "'backprop.softmax' belongs to another component than 'ngram'"),
    ("wrong parameter", (FIRST, FIRST.replace("{n: 1}", "{m: 1}")), "{m: 1}",
     "components.ngram case 1.1 'pad_sentence, n = 1', params", "unknown parameter 'm' (check ngram.padding takes n)"),
    ("a case of the second component", ('check: backprop.cross_entropy, points: 1}', 'check: backprop.cross_entropy, points: x}'),
     "points: x}", "components.backprop case 2.5 'cross_entropy', points", "a valid number"),
    ("wrong file", (NGRAM, NGRAM.replace("file: ngram.py", "file: ngrams.py")), "ngrams.py", "components.ngram.file", "'ngram.py'"),
    ("unknown component, near a known one", (NGRAM, NGRAM.replace("ngram:", "n_gram:")), "n_gram:", "components.n_gram",
     "unknown component (no autograder/cases/n_gram.py names its FILE)"),
    ("the component meant", (NGRAM, NGRAM.replace("ngram:", "n_gram:")), "n_gram:", "components.n_gram", "; did you mean 'ngram'?"),
    ("component in no part", ("components: [ngram, backprop]", "components: [backprop]"), "parts:", "parts",
     "components ngram belong to no part"),
    ("part names a missing component", ("components: [ngram, backprop]", "components: [ngram, backprop, lstn]"), "lstn",
     "part 1 'Part 1: counting and backprop', components", "'lstn' is not a component of this rubric; did you mean 'lstm'?"),
    ("duplicate case name", ('{name: "pad_sentence, n = 2"', '{name: "pad_sentence, n = 1"'), '"pad_sentence, n = 1", check: ngram.padding, params: {n: 2}',
     "components.ngram case 1.2 'pad_sentence, n = 1', name", "'pad_sentence, n = 1' is used twice"),
    ("forbidden is not a module name", (NGRAM, NGRAM + "    forbidden: {modules: [torch nn]}\n"), "torch nn",
     "components.ngram.forbidden.modules item 1", "pattern"),
    ("forbidden call does not exist", (NGRAM, NGRAM + "    forbidden: {calls: [torch.nn.LSTM, torch.nn.LSTMM]}\n"), "LSTMM",
     "components.ngram.forbidden.calls item 2", "'torch.nn.LSTMM' does not exist here"),
]


@pytest.mark.parametrize("what, edit, line_of, where, says", BAD_EDITS, ids=[b[0] for b in BAD_EDITS])
def test_bad_rubric_names_the_line_the_case_and_the_key(tmp_path, what, edit, line_of, where, says):
    """A problem is said at its line, with the case numbered as the results number it (component.case, from 1) and
    named, and what was expected there, or the name meant."""
    path = rewritten_rubric(tmp_path, *edit)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if line_of in text)
    with pytest.raises(RubricError) as err:
        load_rubric(path)
    assert f"  - line {line}, {where}: " in str(err.value) and says in str(err.value), str(err.value)


def test_not_yaml_and_missing_file(tmp_path):
    (tmp_path / "grading.yaml").write_text("components: [unclosed\n")
    with pytest.raises(RubricError, match="not valid YAML"):
        load_rubric(tmp_path / "grading.yaml")
    with pytest.raises(RubricError, match="cannot read"):
        load_rubric(tmp_path / "absent.yaml")


def test_defaults_are_resolved_per_case(rubric):
    case = rubric.component("ngram").cases[0]
    assert (case.timeout, case.visibility, case.number) == (10.0, "visible", "1.1")
    assert any(c.visibility == "hidden" for c in rubric.component("ngram").cases)


def test_a_check_building_on_a_check_without_a_subject_is_refused(tmp_path, monkeypatch):
    """A failed case names the part it builds on by that check's subject: without one, grading would crash there."""
    monkeypatch.setitem(BUILDS_ON, "ngram.padding", ("ngram.counts",))
    with pytest.raises(RubricError, match="ngram.padding builds on ngram.counts, registered without subject="):
        load_rubric(rewritten_rubric(tmp_path, FIRST, FIRST))  # the rubric as it is
