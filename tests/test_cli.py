"""The installed command line, run as TAs and students run it."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from attacks import tier
from conftest import ROOT, SOLUTIONS

from autograder.cases import TIMING
from autograder.release import RULES_BEGIN
from autograder.sandbox.tiers import ORDER


def autograder(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200"), timeout=600)


def test_grade_writes_gradescope_results(tmp_path, rubric):
    results = tmp_path / "out" / "results.json"
    proc = autograder("grade", str(ROOT / "starter"), "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(results.read_text())
    assert data["score"] == 0 and data["extra_data"]["max_score"] > 0 and "max_score" not in data
    for test in data["tests"]:
        assert set(test) >= {"name", "number", "score", "max_score", "status", "visibility", "tags", "output", "output_format"}
        timing = ["timing"] if test["extra_data"]["check"] in TIMING else []
        assert test["status"] == "failed" and test["tags"] == [test["name"][1:].split("]")[0], *timing]
        assert test["tags"][0] in {c.id for c in rubric.components}
        assert test["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    assert "Total: 0 /" in proc.stdout


def test_grade_of_a_missing_path_still_writes_results(tmp_path):
    results = tmp_path / "results.json"
    proc = autograder("grade", str(tmp_path / "nothing-here"), "--results", str(results))
    assert proc.returncode == 2
    assert "does not exist" in proc.stdout
    data = json.loads(results.read_text())
    assert data["score"] == 0 and "could not grade" in data["output"]


def test_bad_rubric_is_refused_with_the_key(tmp_path):
    bad = tmp_path / "grading.yaml"
    bad.write_text((ROOT / "grading.yaml").read_text().replace("timeout: 10", "timeout: soon"))
    proc = autograder("--config", str(bad), "grade", str(SOLUTIONS))
    assert proc.returncode == 2
    assert "defaults.timeout" in proc.stdout


def test_check_runs_visible_cases_and_counts_hidden_ones(tmp_path, rubric):
    proc = autograder("check", "ngram", "--dir", str(SOLUTIONS))
    assert proc.returncode == 0, proc.stderr
    ngram = rubric.component("ngram").cases
    hidden = sum(1 for c in ngram if not c.visible)
    assert f"{hidden} more cases run only when your submission is graded" in " ".join(proc.stdout.split())
    assert "(hidden)" not in proc.stdout
    assert f"ngram: {sum(c.points for c in ngram if c.visible):g} / {sum(c.points for c in ngram if c.visible):g}" in proc.stdout


def test_check_exits_1_when_a_case_fails_and_2_when_it_cannot_run():
    failing = autograder("check", "ngram", "--dir", str(ROOT / "starter"))
    assert failing.returncode == 1 and "ngram: 0 /" in failing.stdout, failing.stdout + failing.stderr
    unknown = autograder("check", "no_such_component", "--dir", str(ROOT / "starter"))
    assert unknown.returncode == 2 and "no_such_component" in unknown.stdout, unknown.stdout + unknown.stderr


def test_check_shows_what_the_code_printed_under_its_case(tmp_path, rubric):
    """Printed at import (during the first case's first call) and in every call of pad_sentence: each case shows its
    own, the first truncated at 2,000 characters with the rest counted."""
    (tmp_path / "ngram.py").write_text((SOLUTIONS / "ngram.py").read_text() + "\n\nprint('x' * 2500)\n_pad = pad_sentence\n\n\n"
                                       "def pad_sentence(tokens, n):\n    print(f'padding with n = {n}')\n    return _pad(tokens, n)\n")
    proc = autograder("check", "ngram", "--dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = (c for c in rubric.component("ngram").cases if c.params.get("n") in (1, 2) and c.check == "ngram.padding")
    assert f"{first.number} [ngram] {first.name}\n  Passed.\n  Your code printed:\n  | {'x' * 2000}\n  ... (" in proc.stdout
    assert "more characters)" in proc.stdout and "  | padding with n = 1" not in proc.stdout  # past the first 2,000
    assert f"{second.number} [ngram] {second.name}\n  Passed.\n  Your code printed:\n  | padding with n = 2\n" in proc.stdout


def test_release_check_fails_when_starter_is_stale(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "ngram.py").write_text(f'"""N-grams.\n\n{RULES_BEGIN[".py"]}\n"""\n\n\n'
                                                     'def f():\n    """Doc."""\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n')
    rubric = (ROOT / "grading.yaml").read_text()
    (tmp_path / "grading.yaml").write_text(rubric)
    assert autograder("--config", str(tmp_path / "grading.yaml"), "release", "--check").returncode == 1
    assert autograder("--config", str(tmp_path / "grading.yaml"), "release").returncode == 0
    assert "raise NotImplementedError" in (tmp_path / "starter" / "ngram.py").read_text()
    assert autograder("--config", str(tmp_path / "grading.yaml"), "release", "--check").returncode == 0


# A forbidden name dropped from a handout, from a solution's docstring (which the starter copies) and from a
# starter docstring: (file, text, the same text without the name).
DRIFT = [
    ("assignments/transformer.md", "`LayerNorm` and `GroupNorm`", "`LayerNorm`"),
    ("solutions/transformer.py", "`layer_norm`, `group_norm` and", "`layer_norm` and"),
    ("starter/transformer.py", "`native_group_norm` and `instance_norm`", "`native_group_norm`"),
]


def test_release_check_fails_when_the_rules_drift_and_release_restores_them(tmp_path):
    """The rules in the handouts and starter docstrings are written from grading.yaml and the tamper scan's tables:
    a copy of the course with a forbidden name dropped in three places is out of date until `release` rewrites it."""
    shutil.copy(ROOT / "grading.yaml", tmp_path)
    for folder in ("assignments", "solutions", "starter"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    config = ("--config", str(tmp_path / "grading.yaml"))
    assert autograder(*config, "release", "--check").returncode == 0
    for file, text, dropped in DRIFT:
        path = tmp_path / file
        assert path.read_text().count(text) == 1, (file, text)
        path.write_text(path.read_text().replace(text, dropped))
    stale = autograder(*config, "release", "--check")
    assert stale.returncode == 1 and all(file in " ".join(stale.stdout.split()) for file, _, _ in DRIFT), stale.stdout
    refused = autograder(*config, "release", "--out", str(tmp_path / "bundle"))
    assert refused.returncode == 2 and "assignments/transformer.md" in refused.stdout and not (tmp_path / "bundle").exists()
    assert autograder(*config, "release").returncode == 0
    assert autograder(*config, "release", "--check").returncode == 0
    for file, _, _ in DRIFT:
        assert (tmp_path / file).read_text() == (ROOT / file).read_text()


@pytest.mark.parametrize("required", ORDER)
def test_require_tier_grades_at_or_above_it_and_refuses_below(tmp_path, required):
    """Whatever this machine offers, --require-tier holds both ways: a tier at or below the one here grades,
    a stronger one is refused with no points and the reason."""
    here = tier()
    results = tmp_path / "results.json"
    proc = autograder("grade", str(SOLUTIONS), "--component", "causal_mask", "--require-tier", required, "--results", str(results))
    data = json.loads(results.read_text())
    if ORDER.index(required) <= ORDER.index(here.name):
        assert proc.returncode == 0 and data["score"] == data["extra_data"]["max_score"] > 0, proc.stdout + proc.stderr
        assert data["extra_data"]["isolation"]["tier"] == here.name
    else:
        assert proc.returncode == 2 and data["score"] == 0 and data["tests"] == []
        assert f"--require-tier {required}, but the strongest tier here is {here.name}" in data["output"]
