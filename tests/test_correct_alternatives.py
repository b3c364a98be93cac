"""The grader's first promise: correct code keeps every point. tests/alternatives/<style>/ holds complete, correct
submissions written to the student API in styles other than solutions/ (each module docstring names its styles);
graded by the real grader, each keeps every point of every case but the timing ones, which measure speed, not
correctness, and are left out to save time. benchmarks/alternatives.py grades them with many secrets."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import grade_folder

from autograder.cases import TIMING

ALTERNATIVES = Path(__file__).resolve().parent / "alternatives"
STYLES = sorted(p.name for p in ALTERNATIVES.iterdir() if p.is_dir() and p.name != "__pycache__")


def without_timing(rubric):
    return dataclasses.replace(rubric, components=[dataclasses.replace(c, cases=[k for k in c.cases if k.check not in TIMING])
                                                   for c in rubric.components])


def test_the_corpus_holds_whole_submissions(rubric):
    files = {c.file for c in rubric.components}
    assert len(STYLES) >= 3
    assert {style: {p.name for p in (ALTERNATIVES / style).glob("*.py")} for style in STYLES} == {style: files for style in STYLES}


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.slow
def test_a_correct_alternative_keeps_every_point_but_timing(rubric, style, tmp_path):
    graded = without_timing(rubric)
    run = grade_folder(graded, ALTERNATIVES / style, tmp_path)
    assert len(run.results) == sum(len(c.cases) for c in graded.components) > 0
    lost = [f"case {r.case.number} {r.case.name}: {r.output}" for r in run.results if not r.passed or r.score < r.max_score]
    if lost:
        pytest.fail(f"the correct alternative {style!r} lost points in {len(lost)} cases:\n" + "\n".join(lost), pytrace=False)
