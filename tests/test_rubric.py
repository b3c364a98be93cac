"""A bad grading.yaml is refused with a message naming the key and what was expected."""
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, with_staff_tests

from autograder.cases import BUILDS_ON
from autograder.rubric import RubricError, load_rubric


def edited_rubric(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load((ROOT / "grading.yaml").read_text())
    edit(data)
    data["solutions"] = str(ROOT / "solutions")
    path = tmp_path / "grading.yaml"
    path.write_text(yaml.safe_dump(data))
    with_staff_tests(tmp_path)
    return path


def first_case(data):
    return data["components"]["ngram"]["cases"][0]


BAD_EDITS = [
    ("negative points", lambda d: first_case(d).update(points=-1), "components.ngram.cases.0.points", "greater than or equal to 0"),
    ("unknown visibility", lambda d: first_case(d).update(visibility="secret"), "components.ngram.cases.0.visibility", "'visible'"),
    ("unknown key", lambda d: first_case(d).update(pionts=1), "components.ngram.cases.0.pionts", "Extra inputs are not permitted"),
    ("missing points", lambda d: first_case(d).pop("points"), "components.ngram.cases.0.points", "Field required"),
    ("zero timeout", lambda d: first_case(d).update(timeout=0), "components.ngram.cases.0.timeout", "greater than 0"),
    ("unknown check", lambda d: first_case(d).update(check="ngram.padd"), "components.ngram.cases.0.check", "ngram.padding"),
    ("check of another component", lambda d: first_case(d).update(check="backprop.softmax"), "components.ngram.cases.0.check", "another component"),
    ("wrong parameter", lambda d: first_case(d).update(params={"m": 2}), "components.ngram.cases.0.params", "takes n"),
    ("wrong file", lambda d: d["components"]["ngram"].update(file="ngrams.py"), "components.ngram.file", "'ngram.py'"),
    ("unknown component", lambda d: d["components"].update(gpt=d["components"]["ngram"]), "components.gpt", "unknown component"),
    ("component in no part", lambda d: d.update(parts=[{"name": "p", "components": ["backprop"]}]), "parts", "belong to no part"),
    ("part names a missing component", lambda d: d["parts"][0]["components"].append("gpt"), "parts.0.components", "'gpt' is not a component"),
    ("duplicate case name", lambda d: d["components"]["ngram"]["cases"].append(dict(first_case(d))), "components.ngram.cases", "used twice"),
    ("forbidden is not a module name", lambda d: d["components"]["ngram"].update(forbidden={"modules": ["torch nn"]}), "components.ngram.forbidden.modules.0", "pattern"),
    ("forbidden call does not exist", lambda d: d["components"]["ngram"].update(forbidden={"calls": ["torch.nn.LSTMM"]}), "components.ngram.forbidden.calls.0", "does not exist"),
]


@pytest.mark.parametrize("what, edit, key, expected", BAD_EDITS, ids=[b[0] for b in BAD_EDITS])
def test_bad_rubric_names_the_key(tmp_path, what, edit, key, expected):
    with pytest.raises(RubricError) as err:
        load_rubric(edited_rubric(tmp_path, edit))
    message = str(err.value)
    assert key in message and expected in message, message


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
        load_rubric(edited_rubric(tmp_path, lambda d: None))
