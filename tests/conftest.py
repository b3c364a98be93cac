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


@pytest.fixture(scope="session")
def rubric_without_training(rubric):
    """The real rubric less the training case, for mistakes that other cases catch in a fraction of the time."""
    components = [dataclasses.replace(c, cases=[k for k in c.cases if k.check != "transformer.training"]) for c in rubric.components]
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


def assert_caught_in_component_only(rubric, tmp_path: Path, component: str, old: str, new: str, must_fail: set[str], feedback: str,
                                    also: frozenset[str] = frozenset()):
    """Grade solutions/ with one mistake in `component`'s file: it loses points there and only there,
    in at least the checks `must_fail`, with `feedback` somewhere in what the student reads.

    `also` names checks of a sibling component of the same file that the mistake genuinely breaks too
    (an inverted mask makes causal self-attention see the future); their component may lose points.
    Only the components graded from that file are graded again: the others import no other solution
    file (test_solution_files_are_independent), so their results cannot move."""
    file = next(c.file for c in rubric.components if c.id == component)
    same_file = [c.id for c in rubric.components if c.file == file]
    run = grade_folder(rubric, solutions_with(tmp_path, file, old, new), tmp_path, component_ids=same_file)
    scores = scores_by_component(run)
    assert scores[component][0] < scores[component][1]
    may_lose = {component} | {check.split(".")[0] for check in also}
    assert all(got == most for cid, (got, most) in scores.items() if cid not in may_lose), scores
    failed = {r.case.check for r in run.results if not r.passed}
    assert must_fail <= failed
    assert {c for c in failed if not c.startswith(component + ".")} <= also, failed
    assert feedback in "\n".join(r.output for r in run.results if not r.passed)


def scores_by_component(run: GradeRun) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for r in run.results:
        got, most = out.get(r.case.component, (0.0, 0.0))
        out[r.case.component] = (got + r.score, most + r.max_score)
    return out

