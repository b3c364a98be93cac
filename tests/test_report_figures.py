"""The class report's figures and page from hand-made results.json data (no grading, no process): a component not
submitted is never a failure, a mistake is one row however many cases and catalogue entries show it, case numbers
sort as numbers, and what a student chose (names, ids) stays text on the page."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, SOLUTIONS, with_staff_tests

from autograder.batch.report import figures
from autograder.batch.report.page import Page, _ranges, anchor
from autograder.rubric import load_rubric


@pytest.fixture(scope="module")
def rubric(tmp_path_factory):
    """Parts 1 and 2 of the course (ngram, backprop, rnn, lstm)."""
    spec = yaml.safe_load((ROOT / "grading.yaml").read_text())
    spec["solutions"] = str(SOLUTIONS)
    spec["parts"] = spec["parts"][:2]
    spec["components"] = {cid: spec["components"][cid] for part in spec["parts"] for cid in part["components"]}
    path = tmp_path_factory.mktemp("rubric") / "grading.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with_staff_tests(path.parent)
    return load_rubric(path)


def results(rubric, failed: dict[str, tuple[str, str]] = (), missing: tuple[str, ...] = ()) -> dict:
    """A results.json: every case passed but those in `failed` ({number: (outcome, message)}) and every case of the
    components in `missing`, not submitted."""
    tests = []
    for c in rubric.components:
        for k in c.cases:
            outcome, message = ("not_submitted", f"Not submitted: {c.file} was not found.") if c.id in missing else \
                dict(failed).get(k.number, ("passed", "Passed."))
            tests.append({"name": f"[{c.id}] {k.name}", "number": k.number, "tags": [c.id], "output": message,
                          "score": k.points if outcome == "passed" else 0.0, "max_score": k.points,
                          "status": "passed" if outcome == "passed" else "failed", "extra_data": {"outcome": outcome}})
    return {"tests": tests, "output": ""}


def row(sid: str, name: str = "", status: str = "ok", score: float = 0.0) -> dict:
    return {"submission_id": sid, "name": name, "sid": "", "email": "", "status": status, "score": str(score)}


def people_of(rubric, graded: dict[str, dict], names: dict[str, str] = {}):
    rows = [row(sid, names.get(sid, ""), score=sum(t["score"] for t in r["tests"])) for sid, r in graded.items()]
    return figures.students(rubric, rows, graded)


def test_a_component_nobody_submitted_is_not_submitted_not_failed(rubric):
    graded = {sid: results(rubric, missing=("rnn", "lstm")) for sid in ("1", "2")}
    people = people_of(rubric, graded)
    assert {p["components"]["rnn"]["state"] for p in people} == {"not_submitted"} and not any(p["failed"] for p in people)
    cases = {c["component"]: c for c in figures.cases(rubric, people, graded)}
    assert cases["rnn"]["submitted"] == 0 and cases["rnn"]["cases"] == [] and cases["ngram"]["submitted"] == 2
    assert figures.failure_groups(people) == []
    assert figures.scores(rubric, people)["components"]["rnn"]["n"] == 0
    page = Page({**_data(rubric, people, graded)}).render()
    assert page.count('title="rnn: not submitted"') == 2 and "Not submitted by anyone graded: rnn, lstm" in page


def test_a_batch_with_nothing_graded_still_has_a_page(rubric):
    rows = [row("1", status="not_gradable"), row("2", status="timeout")]
    people = figures.students(rubric, rows, {"1": {"tests": [], "output": "Nothing to grade."}, "2": {"tests": []}})
    page = Page(_data(rubric, people, {"1": {"tests": []}, "2": {"tests": []}})).render()
    assert "Nothing to grade." in page and page.count('class="ng"') == 2 * len(rubric.components)


def test_pass_rates_count_only_those_who_submitted_the_component(rubric):
    first = rubric.component("rnn").cases[0].number
    graded = {"1": results(rubric, failed={first: ("wrong", "Wrong.")}), "2": results(rubric), "3": results(rubric, missing=("rnn",))}
    rnn = next(c for c in figures.cases(rubric, people_of(rubric, graded), graded) if c["component"] == "rnn")
    assert rnn["submitted"] == 2 and rnn["cases"][0] == {**rnn["cases"][0], "number": first, "pass_rate": 0.5, "submissions": 2}


def test_one_mistake_is_one_row_whatever_cases_and_catalogue_entries_show_it(rubric):
    """A hint holding a catalogue phrase is that entry's row; in a component where a hint explains the failures, a
    generic phrase of another entry ("prob(") in other cases' messages adds no row of its own."""
    hint = "Likely mistake: n BOS tokens instead of n - 1."
    ngram = [k.number for k in rubric.component("ngram").cases]
    failed = {ngram[0]: ("wrong", f"pad_sentence: wrong. {hint}"), ngram[1]: ("wrong", f"pad_sentence: wrong. {hint}"),
              ngram[8]: ("wrong", "prob(w | h) differs from the reference.")}
    alone = {ngram[8]: ("wrong", "prob(w | h) differs from the reference.")}
    graded = {"1": results(rubric, failed=failed), "2": results(rubric, failed=failed), "3": results(rubric, failed=alone)}
    rows = figures.mistakes(rubric, people_of(rubric, graded), graded)
    assert [(r["source"], r["mistake"], r["submissions"]) for r in rows] == [
        ("hint", "n BOS tokens instead of n - 1", ["1", "2"]), ("catalogue", "prob(", ["3"])]
    assert rows[0]["known_as"] == ["n BOS instead of n - 1"] and rows[0]["cases"] == [ngram[0], ngram[1]]
    assert rows[1]["known_as"] == ["history from the start of the context"]


def test_case_numbers_sort_as_numbers():
    assert sorted(["5.10", "5.9", "10.1", "8.1"], key=figures.case_key) == ["5.9", "5.10", "8.1", "10.1"]
    assert _ranges(["1.2", "3.1", "3.2", "3.3", "3.5", "4.10", "4.11"]) == "1.2 3.1-3.3 3.5 4.10-4.11"


def test_names_and_ids_a_student_chose_stay_text(rubric):
    graded = {"<b>x</b>": results(rubric), "2": results(rubric)}
    people = people_of(rubric, graded, {"2": '"><img src=x onerror=alert(1)>'})
    page = Page(_data(rubric, people, graded)).render()
    assert "<img src=x" not in page and "<b>x</b>" not in page
    assert re.fullmatch(r"student-[\w.-]+", anchor("<b>x</b>")) and anchor("1001") == "student-1001"


def _data(rubric, people, graded) -> dict:
    return {"header": figures.header(rubric, {}, people, "now"), "students": people, "scores": figures.scores(rubric, people),
            "cases": figures.cases(rubric, people, graded), "mistakes": figures.mistakes(rubric, people, graded),
            "failure_groups": figures.failure_groups(people), "timing": figures.timing(rubric, people),
            "ran_badly": figures.ran_badly(people), "does_not_import": figures.does_not_import(people),
            "operations": figures.operations(people, graded),
            "similarity": {"threshold": 0.8, "pairs": [], "groups": []}}


@pytest.mark.slow
def test_the_fast_tier_passes_where_matplotlib_has_no_font_cache_yet(tmp_path):
    """A fresh machine: matplotlib's first import builds its font cache, running fc-list where fontconfig is installed.
    Before conftest built it ahead of the tests, the process guard failed the tests that imported matplotlib first."""
    fresh = dict(os.environ, MPLCONFIGDIR=str(tmp_path / "mpl"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow and not network",
                           "tests/test_report_figures.py", "tests/test_similarity.py"], cwd=ROOT, env=fresh,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert list((tmp_path / "mpl").glob("fontlist-*.json"))  # the cache was built in the fresh folder

