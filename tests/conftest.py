from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from autograder.collect import load_rubric
from autograder.run import GradeRun, grade
from autograder.submission import open_submission

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"


@pytest.fixture(scope="session")
def rubric():
    return load_rubric(ROOT / "grading.yaml")


@pytest.fixture(scope="session")
def quick_rubric(rubric):
    """The real rubric with 3-second case timeouts, for submissions that hang on purpose."""
    components = [dataclasses.replace(c, cases=[dataclasses.replace(k, timeout=3.0) for k in c.cases]) for c in rubric.components]
    return dataclasses.replace(rubric, components=components)


def grade_folder(rubric, folder: Path, tmp_path: Path, **kwargs) -> GradeRun:
    submission = open_submission(folder, tmp_path / "graded-copy")
    return grade(rubric, submission, secret="tests", **kwargs)


def solutions_with(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of solutions/ with one edit in one file; the edit must apply exactly once."""
    folder = tmp_path / "variant"
    shutil.copytree(SOLUTIONS, folder)
    source = (folder / file).read_text()
    assert source.count(old) == 1, f"the variant's anchor must occur once in {file}: {old!r}"
    (folder / file).write_text(source.replace(old, new))
    return folder


def scores_by_component(run: GradeRun) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for r in run.results:
        got, most = out.get(r.case.component, (0.0, 0.0))
        out[r.case.component] = (got + r.score, most + r.case.points)
    return out


def failed_checks(run: GradeRun) -> set[str]:
    return {r.case.check for r in run.results if not r.passed}
