"""The reference earns every point; the generated starter earns none, without crashing."""
import ast

import pytest
from conftest import ROOT, SOLUTIONS, grade_folder

from autograder.release.starter import stale_starter


@pytest.mark.slow
def test_solutions_earn_every_point(rubric, tmp_path):
    run = grade_folder(rubric, SOLUTIONS, tmp_path)
    failures = [(r.case.number, r.case.name, r.output) for r in run.results if not r.passed]
    assert failures == []
    assert len(run.results) == sum(len(c.cases) for c in rubric.components)


@pytest.mark.slow
def test_starter_earns_nothing_and_says_not_implemented(rubric, tmp_path):
    run = grade_folder(rubric, ROOT / "starter", tmp_path)
    assert run.results and all(r.score == 0 for r in run.results)
    for r in run.results:
        assert r.output.startswith("Not implemented yet"), (r.case.name, r.output)
        assert len(r.output) < 120


def test_solution_files_are_independent():
    """No solution imports another, so each component is graded on its own file alone."""
    siblings = {p.stem for p in SOLUTIONS.glob("*.py")}
    for path in SOLUTIONS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module] if isinstance(node, ast.ImportFrom) else []
            assert not {n.split(".")[0] for n in names if n} & siblings, f"{path.name} imports a sibling solution"


def test_committed_starter_is_up_to_date():
    assert stale_starter(SOLUTIONS, ROOT / "starter") == []
