"""Staff tests written the gradescope-utils way (autograder/unittests.py): collected into cases from their
decorators, run as checks through the case's proxy, failing closed, and ranking on the leaderboard only when right."""
from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
from conftest import SOLUTIONS, grade_folder

from autograder.batch.gradebook import leaderboard_rows
from autograder.batch.inputs import Entry
from autograder.outcome import PASSED, Outcome
from autograder.release.bundle import _write_staff_tests
from autograder.report import leaderboard, results_json
from autograder.rubric import RubricError, load_rubric
from autograder.runner import CaseResult, GradeRun

RUBRIC = f"""
course: staff tests
solutions: {SOLUTIONS}
defaults: {{timeout: 3}}
parts: [{{name: "Part 1", components: [ngram]}}]
components:
  ngram:
    file: ngram.py
    title: N-grams
    cases:
      - {{name: "pad_sentence, n = 2", check: ngram.padding, params: {{n: 2}}, points: 1}}
    unittests: [staff/test_staff.py]
"""

STAFF = '''
import time
from gradescope_utils.autograder_utils.decorators import hide_errors, leaderboard, number, partial_credit, tags, visibility, weight
from autograder.unittests import TestCase

CORPUS = [["a", "b"], ["b", "a", "b"]]


class Staff(TestCase):
    @weight(2)
    @tags("counting", "easy")
    def test_counts(self):
        """count_ngrams against the reference"""
        want = self.expect(lambda ref: dict(ref.ngram.count_ngrams(CORPUS, 2)))
        self.assertEqual(self.student.ngram.count_ngrams(CORPUS, 2), want)

    @weight(1)
    @visibility("hidden")
    @number("9.1")
    def test_hidden(self):
        self.assertEqual(self.student.ngram.pad_sentence(["x"], 3), ["<s>", "<s>", "x", "</s>"])

    @partial_credit(4)
    def test_partial(self, set_score=None):
        """three of eight"""
        set_score(1.5)
        self.score_reason = "3 of 8 parts match"

    @leaderboard("vocab size")
    def test_board(self, set_leaderboard_value=None):
        lm = self.student.ngram.NGramLM(2)
        lm.fit(CORPUS)
        set_leaderboard_value(len(self.student.value(lm.vocab)))

    @weight(1)
    def test_assertion(self):
        self.assertEqual(self.student.ngram.pad_sentence(["x"], 2), ["nope"], "pad_sentence(['x'], 2) is not ['nope']")

    @weight(1)
    @hide_errors("The padding is not what the course expects.")
    def test_hidden_error(self):
        self.assertEqual(self.student.ngram.pad_sentence(["x"], 2), ["nope"], "SECRET DETAIL")

    @weight(1)
    def test_bug(self):
        return 1 / 0

    @partial_credit(1)
    def test_too_much(self, set_score=None):
        set_score(5)

    @weight(1)
    def test_slow(self):
        self.student.ngram.pad_sentence(["x"], 2)
        time.sleep(3.2)
'''


def course(tmp_path: Path, staff: str = STAFF, rubric: str = RUBRIC) -> Path:
    (tmp_path / "staff").mkdir(exist_ok=True)
    (tmp_path / "staff" / "test_staff.py").write_text(staff)
    (tmp_path / "grading.yaml").write_text(rubric)
    return tmp_path / "grading.yaml"


def test_decorators_become_the_cases(tmp_path):
    cases = {k.check.split(".")[-1]: k for k in load_rubric(course(tmp_path)).component("ngram").cases}
    assert list(cases)[:3] == ["padding", "test_counts", "test_hidden"]  # the rubric's cases, then the file's in its order
    counts, hidden, partial, board = cases["test_counts"], cases["test_hidden"], cases["test_partial"], cases["test_board"]
    assert (counts.name, counts.number, counts.points, counts.visibility, counts.tags) == (
        "count_ngrams against the reference", "1.2", 2.0, "visible", ("counting", "easy"))
    assert (hidden.number, hidden.visibility, hidden.name) == ("9.1", "hidden", "Staff.test_hidden")  # no docstring: its name
    assert (partial.points, partial.number) == (4.0, "1.4")
    assert (board.points, board.leaderboard.name, board.leaderboard.order, board.leaderboard.value) == (0.0, "vocab size", "desc", "set")
    assert cases["test_hidden_error"].hide_errors == "The padding is not what the course expects."
    assert counts.unittest.file == "staff/test_staff.py" and counts.check == "ngram.Staff.test_counts"


@pytest.mark.parametrize("staff, rubric, says", [
    (STAFF.replace('@visibility("hidden")', '@visibility("secret")'), RUBRIC, "@visibility('secret'); expected one of visible, hidden"),
    (STAFF.replace("    def test_counts(self):", "    @classmethod\n    def setUpClass(cls):\n        pass\n\n    def test_counts(self):"), RUBRIC,
     "Staff defines setUpClass or tearDownClass"),
    (STAFF.replace('@number("9.1")', '@number("1.1")'), RUBRIC, "'1.1' is the number of two cases"),
    (STAFF + "\nimport no_such_module\n", RUBRIC, "importing it failed: ModuleNotFoundError"),
    (STAFF.replace("(TestCase)", "(object)"), RUBRIC, "no class derives from autograder.unittests.TestCase"),
    (STAFF, RUBRIC.replace("staff/test_staff.py", "staff/missing.py"), "missing: the staff test file"),
    (STAFF, RUBRIC.replace("staff/test_staff.py", "../test_staff.py"), "expected a .py file inside the rubric's folder"),
    (STAFF, RUBRIC.replace("points: 1}", "points: 1, leaderboard: {name: pads}}"), "only a timing case ranks on the leaderboard"),
])
def test_an_unusable_staff_test_is_refused_before_grading(tmp_path, staff, rubric, says):
    with pytest.raises(RubricError) as refused:
        load_rubric(course(tmp_path, staff, rubric))
    assert says in str(refused.value)


def test_a_staff_test_file_changes_the_rubrics_digest(tmp_path):
    """The batch journal regrades when a rubric's digest changes: a staff test's edit must change it."""
    before = load_rubric(course(tmp_path)).digest
    assert load_rubric(course(tmp_path, STAFF.replace("set_score(1.5)", "set_score(2.5)"))).digest != before


def test_a_bundle_ships_visible_staff_tests_only_numbered_as_graded(tmp_path):
    rubric = load_rubric(course(tmp_path))
    _write_staff_tests(rubric, rubric.components, tmp_path / "bundle")
    shipped = (tmp_path / "bundle" / "staff" / "test_staff.py").read_text()
    methods = {node.name for node in ast.walk(ast.parse(shipped)) if isinstance(node, ast.FunctionDef)}
    assert "test_hidden" not in methods and "pad_sentence([\"x\"], 3)" not in shipped  # a hidden test's code stays home
    assert {"test_counts", "test_partial", "test_board", "test_slow"} <= methods
    (tmp_path / "bundle" / "grading.yaml").write_text(RUBRIC)
    numbers = {k.check: k.number for k in load_rubric(tmp_path / "bundle" / "grading.yaml").component("ngram").cases}
    graded = {k.check: k.number for k in rubric.component("ngram").cases}
    assert numbers == {check: number for check, number in graded.items() if check != "ngram.Staff.test_hidden"}


def results(rubric, outcomes: dict[str, Outcome]) -> list[CaseResult]:
    return [CaseResult(k, outcomes.get(k.check, PASSED)) for c in rubric.components for k in c.cases]


def test_the_leaderboard_ranks_only_right_answers(rubric):
    """A timing case's speedup, a staff test's value; none for a component with a wrong answer, nor a flagged time."""
    timed = Outcome("passed", "timed", 1.0, {"ratio": 0.8})
    board = {"lstm.speed": timed, "transformer.speed": timed,
             "ngram.NGramExtra.test_perplexity_for_the_leaderboard": Outcome("passed", "", 1.0, {"leaderboard_value": 5.3})}
    assert leaderboard(results(rubric, board)) == [{"name": "LSTM speed-up", "value": 1.25, "order": "desc"},
                                                    {"name": "Transformer speed-up", "value": 1.25, "order": "desc"},
                                                    {"name": "held-out perplexity", "value": 5.3, "order": "asc"}]
    wrong = {**board, "lstm.forward": Outcome("wrong", "no"), "ngram.padding": Outcome("wrong", "no"),
             "transformer.speed": Outcome("passed", "flagged", 0.0, {"ratio": 0.01, "flagged": True})}
    assert leaderboard(results(rubric, wrong)) == []
    data = results_json(GradeRun(results=results(rubric, board), seconds=1.0))
    assert [e["name"] for e in data["leaderboard"]] == rubric.leaderboard


def test_the_board_puts_the_timing_columns_first_so_that_a_measurement_ranks(rubric):
    """Every correct n-gram model has the same perplexity: the speed-ups, which differ, lead and rank."""
    assert rubric.leaderboard == ["LSTM speed-up", "Transformer speed-up", "held-out perplexity"]


def test_the_batch_leaderboard_ranks_ties_together_and_says_who_is_unranked():
    def board(**values):
        return {"leaderboard": [{"name": name, "value": value, "order": "asc" if name == "ppl" else "desc"}
                                for name, value in values.items()]}

    entries = [Entry(sid, Path(sid), ()) for sid in "abcdef"]
    rows = {"a": board(speed=1.1, ppl=5.3), "b": board(speed=1.4), "c": board(), "d": board(ppl=5.3), "e": board(speed=1.1, ppl=5.3),
            "f": board(speed=0.9)}
    columns, table = leaderboard_rows(["nobody's", "speed", "ppl"], entries, rows)  # a column no one has a value in is left out
    assert columns == ["speed", "ppl"]
    assert table == [[1, "b", "", 1.4, ""], [2, "a", "", 1.1, 5.3], [2, "e", "", 1.1, 5.3], [4, "f", "", 0.9, ""],
                     ["unranked", "d", "", "", 5.3]]  # competition ranking; no speed: stated, after the ranked, "c" has nothing
    columns, table = leaderboard_rows(["ppl", "speed"], entries, rows)  # a column where every right answer ties
    assert [row[:2] for row in table] == [[1, "a"], [1, "d"], [1, "e"], ["unranked", "b"], ["unranked", "f"]]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("staff")
    rubric = load_rubric(course(tmp_path))
    run = grade_folder(rubric, SOLUTIONS, tmp_path)
    return rubric, {r.case.check.split(".")[-1]: r for r in run.results}, results_json(run)


@pytest.mark.slow
def test_staff_tests_grade_as_their_decorators_say(graded):
    _, by_test, data = graded
    tests = {t["extra_data"]["check"].split(".")[-1]: t for t in data["tests"]}
    assert (tests["test_counts"]["score"], tests["test_counts"]["max_score"], tests["test_counts"]["tags"]) == (2.0, 2.0, ["ngram", "counting", "easy"])
    assert (tests["test_hidden"]["number"], tests["test_hidden"]["visibility"], tests["test_hidden"]["score"]) == ("9.1", "hidden", 1.0)
    assert (tests["test_partial"]["score"], tests["test_partial"]["max_score"], tests["test_partial"]["status"]) == (1.5, 4.0, "failed")
    assert tests["test_partial"]["output"] == "1.5 of 4 points: 3 of 8 parts match"  # the points, then what earned them
    assert by_test["test_board"].passed and by_test["test_board"].extra["leaderboard_value"] == 3


@pytest.mark.slow
def test_staff_tests_fail_closed(graded):
    """An assertion is the student's failure, said in its words (or @hide_errors'); the test's own bug is the grader's
    internal error; a test past its time limit times out. None of them earns a point."""
    _, by_test, data = graded
    kinds = {name: (r.outcome.kind, r.score) for name, r in by_test.items()}
    assert kinds["test_assertion"] == ("wrong", 0) and "pad_sentence(['x'], 2) is not ['nope']" in by_test["test_assertion"].output
    assert kinds["test_hidden_error"] == ("wrong", 0) and by_test["test_hidden_error"].output == "The padding is not what the course expects."
    assert kinds["test_bug"] == ("infra_error", 0) and kinds["test_too_much"] == ("infra_error", 0)
    assert kinds["test_slow"] == ("timeout", 0)
    assert "leaderboard" not in data  # the component has failed cases: its value does not rank
    assert "SECRET DETAIL" not in json.dumps(data)


ATTACK = '''

class AlwaysEqual:
    """Equal to anything: an assertEqual in the grader's process would pass."""
    def __eq__(self, other):
        return True


def count_ngrams(sentences, n):
    return AlwaysEqual()
'''


@pytest.mark.slow
def test_an_object_built_to_fool_a_staff_test_never_reaches_it(tmp_path):
    """Through `self.student`, only data comes back from the sandbox: any other object stays in the worker behind a
    remote handle, and the return boundary (returns.py) refuses it against what the student API declares before the
    staff test holds it, so the student's __eq__ is never asked and the case earns nothing."""
    (tmp_path / "attack").mkdir()
    (tmp_path / "attack" / "ngram.py").write_text((SOLUTIONS / "ngram.py").read_text() + textwrap.dedent(ATTACK))
    rubric = load_rubric(course(tmp_path))
    run = grade_folder(rubric, tmp_path / "attack", tmp_path)
    counts = next(r for r in run.results if r.case.check == "ngram.Staff.test_counts")
    assert (counts.outcome.kind, counts.score) == ("wrong", 0)
    assert counts.output.startswith("count_ngrams: the counts: expected a dict from tuples of words to real numbers, got an object "
                                    "that cannot be sent back as data: a AlwaysEqual.")
