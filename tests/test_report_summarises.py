"""The class report summarises (issue 42): one row per submission in the lists of whom to look at, a file that does
not import named as such in the overview and once on the student's pages, every status word explained where it
appears, every column labelled, each timing ratio saying which way is faster, the plots on shared axes, and what the
last regrade changed. Built from a batch folder written by hand (grades.csv, results.json files and summary.json with
the grader's own messages, as a grade-all of those submissions wrote them): no grading, no process."""
from __future__ import annotations

import json
import re

import pytest
from test_report_figures import rubric  # noqa: F401 (a fixture: parts 1 and 2 of the course)

from autograder.batch.gradebook import STATUSES, feedback_md
from autograder.batch.inert import csv_text
from autograder.batch.report import build_report, figures, plots
from autograder.batch.report.page import Page
from autograder.cases import TIMING
from autograder.report import summary_lines

HANG = "Timed out: the case did not finish within 10 s (an infinite loop, or far too slow)."
HUNG = [HANG, f"{HANG} Case 4.1 of this component timed out before, so its later cases share 30 s.",
        "Not run: case 4.1 of this component timed out (an infinite loop, or far too slow), and the 30 s its later cases "
        "share are spent."]
SYNTAX = "Your code raised SyntaxError: invalid syntax (ngram.py, line 1)"
IMPORT = ("Your code raised ModuleNotFoundError: No module named 'nonexistent' (a submission imports the standard library, "
          "numpy, torch and its own files)\n  at backprop.py, line 77, in <module>: import nonexistent")
EMPTY = ("The autograder could not grade this submission: nothing in the submission can be graded: expected backprop.py, "
         "lstm.py, ngram.py or rnn.py, or a notebook named like one (ngram.ipynb), at the top level or in one folder. Found:\n"
         "  README.txt: ignored: not a component file or a notebook named like one")
CHANGED = ["[lstm] lstm_forward, one step: 1 -> 0", "[lstm] examples in a batch are independent: 1 -> 0"]


def graded(course, failed: dict[str, tuple[str, str]], ratio: float = 1.0) -> dict:
    """A results.json as the grader writes one: every case passed but those in `failed` ({number: (outcome, message)}),
    the timing case at `ratio` (flagged under the policy's flag), the summary on top."""
    tests = []
    for c in course.components:
        for k in c.cases:
            outcome, message = failed.get(k.number, ("passed", "Passed."))
            timed = k.check in TIMING
            extra = {"check": k.check, "outcome": outcome}
            if timed and outcome == "passed":
                extra |= {"ratio": ratio, "flagged": ratio < course.timing.flag_below}
            tests.append({"name": f"[{c.id}] {k.name}", "number": k.number, "visibility": k.visibility, "output": message,
                          "tags": [c.id, *(["timing"] if timed else [])], "score": k.points if outcome == "passed" else 0.0,
                          "max_score": k.points, "status": "passed" if outcome == "passed" else "failed", "extra_data": extra})
    return {"score": sum(t["score"] for t in tests), "output": "\n".join(summary_lines(tests)), "tests": tests}


@pytest.fixture(scope="module")
def batch(rubric, tmp_path_factory):  # noqa: F811
    """A class of six: an infinite loop in lstm, a syntax error in ngram.py, an import error in backprop.py, one
    suspiciously fast and one slow, and one with nothing to grade; summary.json records a regrade that changed one."""
    out = tmp_path_factory.mktemp("batch")
    lstm, ngram, backprop = (rubric.component(c).cases for c in ("lstm", "ngram", "backprop"))
    results = {
        "loop": graded(rubric, {k.number: ("timeout", HUNG[min(i, 2)]) for i, k in enumerate(lstm)}),
        "syntax": graded(rubric, {k.number: ("raised", SYNTAX) for k in ngram}),
        "importerr": graded(rubric, {k.number: ("raised", IMPORT) for k in backprop}),
        "fast": graded(rubric, {}, ratio=0.05),
        "slow": graded(rubric, {}, ratio=2.5),
        "empty": {"score": 0.0, "output": EMPTY, "tests": []},
    }
    most = sum(k.points for c in rubric.components for k in c.cases)
    table = [["submission_id", "name", "sid", "email", "status", "score", "max_score"]]
    for sid, r in results.items():
        table.append([sid, f"Student {sid}", "", "", "not_gradable" if sid == "empty" else "ok", r["score"], most])
        (out / "results" / sid).mkdir(parents=True)
        (out / "results" / sid / "results.json").write_text(json.dumps(r))
    (out / "grades.csv").write_text(csv_text(table), newline="")
    changes = {"run": "2026-11-28T22:19:41+00:00", "submissions": [
        {"id": "loop", "names": "Student loop", "old": 108.0, "new": 94.0, "delta": -14.0, "cases": CHANGED}]}
    (out / "summary.json").write_text(json.dumps({"rubric": {"sha256": "0" * 64}, "grader_version": "test", "changes": changes}))
    data = build_report(out, rubric)
    return data, (out / "report.html").read_text(), results


def section(page: str, sid: str) -> str:
    return re.search(rf'<section[^>]* id="?{re.escape(sid)}"?[^>]*>.*?</section>', page, re.S).group(0)


def under(page: str, heading: str) -> str:
    """The table right under an h3 heading."""
    found = re.search(rf"<h3>{re.escape(heading)}[^<]*</h3>(?:<div class=scroll>)?(<table.*?</table>|<p>None.</p>)", page, re.S)
    return found.group(1)


def rows(table: str) -> list[list[str]]:
    body = table.split("</thead>", 1)[-1]
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
            for r in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_one_infinite_loop_is_one_row_with_its_count_of_cases(batch, rubric):  # noqa: F811
    data, page, _ = batch
    n = len(rubric.component("lstm").cases)
    listed = rows(under(page, "Cases that timed out or crashed"))
    assert len(listed) == 1, listed
    assert [(r["submission"], r["cases"]) for r in data["ran_badly"]] == [("loop", n)]
    assert listed[0][1:] == [str(n), f"{n} lstm cases timed out (an infinite loop, or far too slow), the first 4.1 lstm_step in "
                                     "PyTorch&#x27;s gate order"]
    (run,) = rows(under(section(page, "student-loop"), "Failed cases"))  # one hang is one row on its page too
    assert run[0] == f"4.1 to 4.{n} ({n} cases) [lstm]" and run[1] == "timed out"


def test_a_file_that_does_not_import_is_named_in_the_overview_and_once_on_the_students_pages(batch):
    data, page, results = batch
    overview = section(page, "overview")
    assert "syntax</a> (ngram: SyntaxError)" in overview and "importerr</a> (backprop: ModuleNotFoundError)" in overview
    assert overview.count('<i class="ni"') == 2  # its own mark in the heat map, its error in the cell's title
    broken = {r["submission"]: list(r["components"]) for r in data["does_not_import"]}
    assert broken == {"importerr": ["backprop"], "syntax": ["ngram"]}
    mine = section(page, "student-syntax")
    assert mine.count("SyntaxError") == 1 and len(rows(under(mine, "Failed cases"))) == 1
    assert section(page, "student-importerr").count("ModuleNotFoundError") == 1
    for sid, error in (("syntax", "SyntaxError"), ("importerr", "ModuleNotFoundError")):  # the feedback the student reads
        said = feedback_md(sid, {"status": "ok", "score": 0.0, "max_score": 1.0, "message": ""}, results[sid])
        assert said.count(error) == 1, said
    assert "at backprop.py, line 77" in feedback_md("importerr", {"status": "ok", "score": 0.0, "max_score": 1.0, "message": ""},
                                                    results["importerr"])  # where it happened is still said


def test_every_status_word_is_explained_where_it_appears(batch):
    data, page, _ = batch
    overview = section(page, "overview")
    why = r'<span class=t title="not graded: The autograder could not grade[^"]*Found: README.txt: ignored[^"]*">unread</span>'
    assert re.search(why, overview)
    assert "unread: not graded, as nothing readable was submitted" in overview
    not_graded = rows(under(page, "Not graded, and why"))
    assert not_graded[0][1] == f"not gradable: {STATUSES['not_gradable']}"
    assert [r[2] for r in rows(section(page, "operations"))] == [STATUSES["not_gradable"], STATUSES["ok"]]
    happened = {r[1] for p in data["students"] for r in rows(under(section(page, f"student-{p['submission']}"), "Failed cases"))}
    assert happened == {"timed out", "its file does not import"}
    assert "1 not gradable: nothing readable was submitted" in page.split("<nav>")[0]  # the header


def test_every_column_is_labelled(batch):
    _, page, _ = batch
    headers = re.findall(r"<th>(.*?)</th>", page)
    assert headers and "" not in headers


def test_each_ratio_says_which_way_is_faster(batch):
    _, page, _ = batch
    timing = {sid: rows(under(section(page, f"student-{sid}"), "Timing"))[0][1] for sid in ("fast", "slow", "syntax")}
    assert timing == {"fast": "0.05x the reference&#x27;s time (20x faster)", "slow": "2.5x the reference&#x27;s time (slower)",
                      "syntax": "1x the reference&#x27;s time (as fast)"}
    flagged = rows(under(page, "Timing flagged"))
    assert [r[:2] for r in flagged] == [["Student fast", "1"]] and flagged[0][2].endswith("(20x faster)")


def test_the_plots_share_their_axes_across_components(batch, monkeypatch):
    data, _, _ = batch
    drawn = []
    monkeypatch.setattr(plots, "_png", lambda fig, alt: drawn.append(fig) or "")
    plots.scores(data["scores"])
    plots.cases(data["cases"])
    plots.timing({"ratios": {"[lstm] speed": [0.5, 0.6, 0.9], "[rnn] speed": [2.0, 30.0]},
                  "thresholds": {"flag_below": 0.1, "full_until": 1.5, "zero_at": 4.0}})
    for fig in drawn:
        shown = [ax for ax in fig.axes if ax.get_visible()]
        limits = [(ax.get_title(), ax.get_xlim(), ax.get_ylim()) for ax in shown]
        assert len(shown) > 1 and len({lim[1:] for lim in limits}) == 1, limits


def test_what_the_last_regrade_changed_is_shown_and_nothing_without_it(batch):
    data, page, _ = batch
    changed = section(page, "changes")
    assert '<a href="#changes">What changed</a>' in page and "changed 1 grade" in changed
    (row,) = rows(changed)
    assert row[:4] == ["Student loop", "108", "94", "-14"] and all(c.replace(">", "&gt;") in row[4] for c in CHANGED)
    quiet = Page({**data, "changes": None}).render()
    assert "What changed" not in quiet and "id=changes" not in quiet and figures.changes({"runs": []}) is None
