"""`autograder verify`: the reference earns every point, the starter none, and every known mistake is caught where it belongs."""
import pytest
import yaml
from conftest import MISTAKES, isolation
from test_cli import autograder

from autograder.verify import judge, load_mistakes

pytestmark = pytest.mark.slow  # every test here grades or starts a process

CAUSAL = "return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)"


def catalog(tmp_path, *entries):
    path = tmp_path / "mistakes.yaml"
    path.write_text(yaml.safe_dump(list(entries), sort_keys=False))
    return path


def test_verify_passes_and_reports_the_share_caught(rubric):
    proc = autograder("verify", "--component", "backprop")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    known = sum(m.component == "backprop" for m in MISTAKES)
    points = sum(c.points for c in rubric.component("backprop").cases)
    assert f"backprop: {known}/{known} known mistakes caught" in proc.stdout
    assert f"Caught {known}/{known} known mistakes (100%)" in proc.stdout
    assert f"solutions: {points:g}/{points:g} points; starter: 0/{points:g} points" in proc.stdout
    assert "verify: passed" in proc.stdout


def test_a_mistake_that_keeps_full_marks_fails_verify(tmp_path):
    harmless = {"name": "the bias added first", "component": "backprop", "old": "return x @ W.T + b", "new": "return b + x @ W.T",
                "must_fail": ["backprop.linear"], "feedback": "the bias is missing"}
    proc = autograder("verify", "--component", "backprop", "--mistakes", str(catalog(tmp_path, harmless)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "backprop: the bias added first: kept full marks" in proc.stdout
    assert "backprop: 0/1 known mistakes caught" in proc.stdout
    assert "verify: FAILED" in proc.stdout


def test_a_bad_catalog_is_refused_naming_each_entry(tmp_path):
    entry = {"component": "backprop", "new": "pass", "feedback": "x"}
    bad = catalog(tmp_path,
                  {**entry, "name": "a typo in the anchor", "old": "return x @ W.T + bias", "must_fail": ["backprop.linear"]},
                  {**entry, "name": "an unknown check", "old": "return x @ W.T + b", "must_fail": ["backprop.lineal"]},
                  {**entry, "name": "an unknown component", "component": "backprob", "old": "b", "must_fail": ["backprop.linear"]})
    proc = autograder("verify", "--mistakes", str(bad))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "entry 1 ('a typo in the anchor'): old: occurs 0 times in backprop.py" in proc.stderr
    assert "entry 2 ('an unknown check'): must_fail: no case of backprop grades 'backprop.lineal'" in proc.stderr
    assert "entry 3 ('an unknown component'): component: unknown component 'backprob'" in proc.stderr


def test_a_mistake_that_costs_points_in_another_component_is_reported(rubric, tmp_path):
    """A broken causal_mask() declared as an `attention` mistake, without `also`: causal_mask's cases fail too."""
    (mistake,) = load_mistakes(rubric, catalog(tmp_path, {
        "name": "triu declared as attention", "component": "attention", "old": CAUSAL, "new": CAUSAL.replace(".tril()", ".triu()"),
        "must_fail": ["attention.speed"], "feedback": "triu"}))
    with isolation(rubric) as entered:
        problems = dict(judge(rubric, mistake, entered).problems)
    assert "[causal_mask] causal_mask(2)" in problems["cost points outside its component"]
