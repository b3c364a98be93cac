"""The class report: a small class graded by grade-all, whose mistakes, copied pair and plots the report must show."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from browser import chromium_page
from conftest import ROOT, SOLUTIONS, with_staff_tests
from test_batch import export

from autograder.rubric import load_rubric
from autograder.verify import load_mistakes

pytestmark = pytest.mark.slow  # grades a class


ALTERNATIVES = Path(__file__).parent / "alternatives"
PART_1 = ("ngram.py", "backprop.py")


ROLES = ["m1", "m2", "m3", "m4", "m5", "c1", "c2", "c3", "p1", "p2"]
NAMES = {"c1": "Ada Lovelace", "p2": "Eve <script>alert(1)</script>"}  # a student chooses their name: it must stay text
EMPTY = "1011"  # a submission with nothing in it: not graded


def two_part_rubric(tmp_path: Path) -> Path:
    """grading.yaml cut down to parts 1 and 2, with 3-second case limits; the class submits part 1 only."""
    spec = yaml.safe_load((ROOT / "grading.yaml").read_text())
    spec["solutions"] = str(SOLUTIONS)
    spec["defaults"]["timeout"] = 3
    spec["parts"] = spec["parts"][:2]
    spec["components"] = {cid: spec["components"][cid] for part in spec["parts"] for cid in part["components"]}
    path = tmp_path / "rubric" / "grading.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with_staff_tests(path.parent)
    return path


def make_class(tmp_path: Path, rubric_path: Path) -> tuple[Path, dict[str, str], dict[str, list[str]]]:
    """A Gradescope export of part 1's files: three independently written correct submissions (solutions/ and two of
    tests/alternatives), two catalogue mistakes given to two and three submissions, a pair copied from a third
    alternative, one of them with its names changed, and an empty submission. Returns the export, {role: submission
    id} and {mistake: the submission ids given it}."""
    rubric = load_rubric(rubric_path)
    chosen = [m for m in load_mistakes(load_rubric(ROOT / "grading.yaml")) if m.component == "backprop"][:2]
    ids = {role: str(1001 + i) for i, role in enumerate(ROLES)}
    sources = {"c1": SOLUTIONS, "c2": ALTERNATIVES / "float64_internals", "c3": ALTERNATIVES / "fused_hoisted",
               "p1": ALTERNATIVES / "gpt_style", "p2": ALTERNATIVES / "gpt_style"}
    folders = {role: {f: (sources.get(role, SOLUTIONS) / f).read_text() for f in PART_1} for role in ROLES}
    given = {chosen[0].name: ["m1", "m2"], chosen[1].name: ["m3", "m4", "m5"]}
    for m in chosen:
        file = rubric.component(m.component).file
        for role in given[m.name]:
            folders[role][file] = folders[role][file].replace(m.old, m.new)
    for file in PART_1:  # the copy hides behind new names and a comment
        text = folders["p2"][file]
        folders["p2"][file] = "# my own work\n" + re.sub(r"\bcounts\b", "tally", re.sub(r"\bprobs\b", "p_table", text))
    metadata = "".join(f"submission_{ids[role]}:\n  :submitters:\n  - :name: {json.dumps(NAMES.get(role, f'Student {role}'))}\n"
                       f"    :sid: '{ids[role]}'\n    :email: {role}@example.edu\n" for role in ROLES)
    root = export(tmp_path, {f"submission_{ids[r]}": folders[r] for r in ROLES} | {f"submission_{EMPTY}": {}},
                  metadata + f"submission_{EMPTY}:\n  :submitters:\n  - :name: Late Larry\n    :sid: '{EMPTY}'\n")
    return root, ids, {f"backprop: {m.name}": [ids[r] for r in given[m.name]] for m in chosen}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("class")
    config = two_part_rubric(tmp_path)
    folder, ids, given = make_class(tmp_path, config)
    out = tmp_path / "out"
    # both parts, named: the class submitted part 1's files only, which alone would grade part 1 (plan.graded_part)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade-all", str(folder), "--out", str(out), "--jobs", "2",
                           "--config", str(config), "--part", "1", "--part", "2"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return config, out, ids, given


def test_the_report_names_each_mistake_once_flags_the_copied_pair_and_shows_who_did_not_submit(graded):
    config, out, ids, given = graded
    report = json.loads((out / "report.json").read_text())
    phrases = {f"backprop: {m.name}": m for m in load_mistakes(load_rubric(ROOT / "grading.yaml"))}
    for name, who in given.items():  # one row per mistake: the judge's hint, known in the catalogue by its name
        rows = [m for m in report["mistakes"] if phrases[name].name in m["known_as"]]
        assert len(rows) == 1 and rows[0]["submissions"] == sorted(who), (name, report["mistakes"])
        assert phrases[name].feedback in rows[0]["mistake"]
    assert all(len(set(m["submissions"])) == m["count"] for m in report["mistakes"])
    assert [(p["a"], p["b"]) for p in report["similarity"]["pairs"] if {p["a"], p["b"]} & {ids["p1"], ids["p2"]}] \
        == [(ids["p1"], ids["p2"])]
    independent = {ids[r] for r in ("c1", "c2", "c3", "p1")}
    assert not any({p["a"], p["b"]} <= independent for p in report["similarity"]["pairs"])
    assert report["operations"]["statuses"] == {"ok": 10, "not_gradable": 1}
    assert report["header"]["submissions"] == 11 and report["header"]["graded"] == 10
    nobody = {c["component"]: c for c in report["cases"] if not c["submitted"]}
    assert set(nobody) == {"rnn", "lstm"} and all(c["graded"] == 10 for c in nobody.values())
    ada = next(p for p in report["students"] if p["submission"] == ids["c1"])
    assert ada["names"] == ["Ada Lovelace"] and ada["components"]["rnn"]["state"] == "not_submitted"
    assert ada["components"]["ngram"] == {"state": "graded", "score": 36.0, "max": 36.0} and not ada["failed"]
    assert all(f["number"].split(".")[0] in ("1", "2") for p in report["students"] for f in p["failed"])  # not submitted is no failure
    groups = report["failure_groups"]
    assert [g["submissions"] for g in groups] == [[ids[r] for r in ("m3", "m4", "m5")], [ids["m1"], ids["m2"]]], groups

    page = (out / "report.html").read_text()
    assert len(re.findall(r'<img alt="[^"]+" src="data:image/png;base64,', page)) == 3  # scores, cases, grading time
    assert "a reason to look, not a verdict" in page and not re.search(r"""(src|href)=["']?(https?:|//)|<script src""", page)
    assert "<script>alert" not in page and "Eve &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Not submitted by anyone graded: rnn, lstm" in page

    again = subprocess.run([sys.executable, "-m", "autograder", "report", str(out), "--config", str(config)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "report.json").read_text())["mistakes"] == report["mistakes"]


def test_each_mistake_is_named_on_the_first_screen_of_its_feedback(graded):
    """A submission with one mistake has it named in the first 20 lines of its feedback file and of results.json's
    output (what Gradescope shows first); a correct one reads in a few lines, its passed cases folded."""
    _, out, ids, given = graded
    phrases = {f"backprop: {m.name}": m.feedback for m in load_mistakes(load_rubric(ROOT / "grading.yaml"))}
    for mistake, who in given.items():
        for sid in who:
            first = (out / "feedback" / f"{sid}.md").read_text().splitlines()[:20]
            assert phrases[mistake] in "\n".join(first), "\n".join(first)
            output = json.loads((out / "results" / sid / "results.json").read_text())["output"]
            assert phrases[mistake] in "\n".join(output.splitlines()[:20]), output
    correct = (out / "feedback" / f"{ids['c1']}.md").read_text()
    headings = [line for line in correct.splitlines() if line.startswith("## ")]
    assert "ngram: 36 / 36" in correct and "backprop: 34 / 34" in correct and "Passed." not in correct, correct
    assert len(headings) == 2 and all(r"\[rnn\]" in h or r"\[lstm\]" in h for h in headings), headings  # part 2: not submitted


def test_a_ta_clicks_from_the_heat_map_to_a_student_and_on_to_the_feedback_and_sorts_a_table(graded):
    _, out, ids, _ = graded
    ada, eve = ids["c1"], ids["p2"]
    with chromium_page(width=1400) as page:
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto((out / "report.html").as_uri())
        heat = page.locator("#heatmap a.hrow")
        assert heat.count() == 11
        # A part nobody submitted is shown as not submitted, not as failed: hatched cells, and said in words.
        assert page.locator('#heatmap i.ns[title="rnn: not submitted"]').count() == 10
        assert page.locator("#heatmap i.q0").count() == 0
        assert page.get_by_text("Not submitted by anyone graded: rnn, lstm").is_visible()
        # The student's chosen name is shown as text; nothing in it ran.
        assert page.locator(f'#heatmap a[href="#student-{eve}"] .n').inner_text() == "Eve <script>alert(1)</script>"

        page.locator("#filter").fill("ada")
        assert page.locator("#heatmap a.hrow:not(.dim)").all_inner_texts() == [page.locator(f'a[href="#student-{ada}"]').first.inner_text()]
        page.locator(f'#heatmap a[href="#student-{ada}"]').click()
        student = page.locator(f"#student-{ada}")
        assert student.is_visible() and not page.locator("#classview").is_visible()
        assert "Ada Lovelace" in student.locator("h2").inner_text()
        assert "not submitted" in student.locator("tr", has_text="rnn").inner_text()
        student.locator("a.feedback").click()
        page.wait_for_load_state()
        assert page.url.endswith(f"/feedback/{ada}.md") and page.locator("body").inner_text().startswith(f"# Submission {ada}")
        page.go_back()
        page.locator(f"#student-{ada}").get_by_text("class overview").click()
        assert page.locator("#classview").is_visible()

        page.locator('[data-order="name"]').click()
        names = [n.lower() for n in page.locator("#heatmap a.hrow .n").all_inner_texts()]
        assert names == sorted(names) and names[0] == "ada lovelace"

        counts = page.locator("#reteach table").first.locator("tbody tr td:nth-child(5)")
        page.locator("#reteach table").first.locator("th", has_text="submissions").click()
        assert counts.all_inner_texts() == ["2", "3"]
        page.locator("#reteach table").first.locator("th", has_text="submissions").click()
        assert counts.all_inner_texts() == ["3", "2"]
        assert not dialogs and not page.js_errors, (dialogs, page.js_errors)
