"""A term of grading (issue 42): a part's class graded out of that part's points, and a one-case fix to the rubric
regraded in that case's component only, saying whose grade changed, by how much and through which cases."""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SOLUTIONS, with_staff_tests

from autograder.batch.journal import component_keys
from autograder.rubric import load_rubric

FIXED = '{name: "pad_sentence, n = 1", check: ngram.padding, params: {n: 1}, points: 1}'


def course(tmp_path: Path) -> Path:
    """The course's whole rubric, copied to be fixed mid-term."""
    config = tmp_path / "course" / "grading.yaml"
    config.parent.mkdir()
    config.write_text((ROOT / "grading.yaml").read_text().replace("solutions: solutions", f"solutions: {SOLUTIONS}"))
    with_staff_tests(config.parent)
    return config


def fixed(config: Path) -> None:
    """One case of ngram fixed: it was worth 1 point, it is worth 3."""
    text = config.read_text()
    assert text.count(FIXED) == 1
    config.write_text(text.replace(FIXED, FIXED.replace("points: 1}", "points: 3}")))


def test_a_fix_to_one_case_changes_that_components_key_alone(tmp_path):
    config = course(tmp_path)
    before = component_keys(load_rubric(config), "s")
    fixed(config)
    after = component_keys(load_rubric(config), "s")
    assert [c for c in before if before[c] != after[c]] == ["ngram"]
    assert component_keys(load_rubric(config), "another secret").keys() == after.keys()
    assert all(v != after[c] for c, v in component_keys(load_rubric(config), "another secret").items())


@pytest.mark.slow
def test_a_part_1_class_is_graded_out_of_part_1_and_a_fix_regrades_its_component_alone(tmp_path):
    config = course(tmp_path)
    (tmp_path / "class" / "alice").mkdir(parents=True)
    for name in ("ngram.py", "backprop.py"):
        shutil.copy(SOLUTIONS / name, tmp_path / "class" / "alice" / name)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "autograder", "grade-all", str(tmp_path / "class"), "--out", str(out), "--config", str(config),
            "--jobs", "1"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    rubric = load_rubric(config)
    part1 = sum(k.points for c in rubric.components[:2] for k in c.cases)
    assert (f"graded: Part 1: counting and backprop (ngram.py, backprop.py), out of {part1:g} points (every submission holds "
            "files of Part 1: counting and backprop only)") in first.stderr
    row = next(csv.DictReader(open(out / "grades.csv")))
    assert float(row["score"]) == float(row["max_score"]) == part1  # 100 %, not part1 / 279
    assert "rnn" not in row and not (out / "changes.csv").exists()

    fixed(config)
    second = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "of those, only what changed is graded again, the rest kept: ngram in 1" in second.stderr
    assert "changed: alice: 70 -> 72 (+2): [ngram] pad_sentence, n = 1: 1 -> 3" in second.stderr
    changes = list(csv.DictReader(open(out / "changes.csv")))
    assert changes == [{"submission_id": "alice", "names": "", "old_score": "70", "new_score": "72", "delta": "2",
                        "cases_changed": "[ngram] pad_sentence, n = 1: 1 -> 3"}]
    results = json.loads((out / "results" / "alice" / "results.json").read_text())
    assert {t["tags"][0] for t in results["tests"]} == {"ngram", "backprop"} and results["score"] == 72
    assert results["extra_data"]["kept"] == ["backprop"]  # backprop's results, kept: nothing deciding them changed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["changes"]["submissions"][0]["delta"] == 2 and summary["components"] == ["ngram", "backprop"]
    third = subprocess.run([*args, "--part", "1"], capture_output=True, text=True, timeout=120)  # as a TA names it
    assert f"out of {part1 + 2:g} points (--part)" in third.stderr and "1 already graded with this rubric, grader and secret; 0 to grade" in third.stderr
    assert next(csv.DictReader(open(out / "grades.csv")))["score"] == f"{part1 + 2:g}"
