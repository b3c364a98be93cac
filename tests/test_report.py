"""The class report: a small class graded by grade-all, whose mistakes, copied pair and plots the report must show."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SOLUTIONS
from test_batch import small_rubric

from autograder.rubric import load_rubric
from autograder.verify import load_mistakes, write_variant

pytestmark = pytest.mark.slow  # grades a class


ALTERNATIVES = Path(__file__).parent / "alternatives"


def make_class(tmp_path: Path, rubric_path: Path) -> tuple[Path, dict[str, list[str]]]:
    """Three independently written correct submissions (solutions/ and two of tests/alternatives), two catalogue
    mistakes given to two and three submissions, and a pair copied from a third alternative, one of them with its
    names changed. Returns the class folder and {mistake: the submissions given it}."""
    rubric = load_rubric(rubric_path)
    chosen = [m for m in load_mistakes(load_rubric(ROOT / "grading.yaml")) if m.component == "backprop"][:2]
    folder = tmp_path / "class"
    given = {chosen[0].name: ["m1", "m2"], chosen[1].name: ["m3", "m4", "m5"]}
    for m in chosen:
        for sid in given[m.name]:
            write_variant(SOLUTIONS, rubric.component(m.component).file, m.old, m.new, folder / sid)
    for sid, source in (("c1", SOLUTIONS), ("c2", ALTERNATIVES / "float64_internals"), ("c3", ALTERNATIVES / "fused_hoisted")):
        shutil.copytree(source, folder / sid)
    for sid in ("p1", "p2"):
        shutil.copytree(ALTERNATIVES / "gpt_style", folder / sid)
    for file in ("ngram.py", "backprop.py"):  # the copy hides behind new names and a comment
        text = (folder / "p2" / file).read_text()
        (folder / "p2" / file).write_text("# my own work\n" + re.sub(r"\bcounts\b", "tally", re.sub(r"\bprobs\b", "p_table", text)))
    return folder, {f"backprop: {m.name}": ids for m in chosen for ids in [given[m.name]]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("class")
    config = small_rubric(tmp_path)
    folder, given = make_class(tmp_path, config)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade-all", str(folder), "--out", str(out), "--jobs", "2",
                           "--config", str(config)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return config, out, given


def test_the_report_counts_each_mistake_flags_the_copied_pair_and_draws_every_plot(graded):
    config, out, given = graded
    report = json.loads((out / "report.json").read_text())
    catalogue = {m["mistake"]: m["submissions"] for m in report["mistakes"] if m["source"] == "catalogue"}
    for name, ids in given.items():
        assert catalogue.get(name) == sorted(ids), (name, catalogue)
    flagged = {(p["a"], p["b"]) for p in report["similarity"]["pairs"]}
    independent = {(a, b) for a in ("c1", "c2", "c3", "p1", "p2") for b in ("c1", "c2", "c3") if a < b}
    assert ("p1", "p2") in flagged and not flagged & independent, flagged
    assert report["operations"]["statuses"] == {"ok": 10}
    page = (out / "report.html").read_text()
    plots = len(re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', page))
    assert plots == 1 + 2 + 1 + 1  # total and each component's scores, the cases, grading time (no timing cases here)
    assert "a reason to look, not a verdict" in page and not re.search(r"""(src|href)=["']?https?:|<script""", page)  # nothing to fetch

    again = subprocess.run([sys.executable, "-m", "autograder", "report", str(out), "--config", str(config)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "report.json").read_text())["mistakes"] == report["mistakes"]


def test_each_mistake_is_named_on_the_first_screen_of_its_feedback(graded):
    """A submission with one mistake has it named in the first 20 lines of its feedback file and of results.json's
    output (what Gradescope shows first); a correct one reads in a few lines, its passed cases folded."""
    _, out, given = graded
    phrases = {f"backprop: {m.name}": m.feedback for m in load_mistakes(load_rubric(ROOT / "grading.yaml"))}
    for mistake, ids in given.items():
        for sid in ids:
            first = (out / "feedback" / f"{sid}.md").read_text().splitlines()[:20]
            assert phrases[mistake] in "\n".join(first), "\n".join(first)
            output = json.loads((out / "results" / sid / "results.json").read_text())["output"]
            assert phrases[mistake] in "\n".join(output.splitlines()[:20]), output
    correct = (out / "feedback" / "c1.md").read_text()
    assert "No case failed." in correct and "ngram: " in correct and "## " not in correct and "Passed." not in correct, correct


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (Debian package chromium): "
                    "the page is not rendered")
def test_the_page_renders_in_a_headless_browser(graded, tmp_path):
    _, out, _ = graded
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,3000",
                    f"--screenshot={shot}", (out / "report.html").as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20000  # a page with plots, not a blank one
