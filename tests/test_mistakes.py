"""Every known mistake of solutions/mistakes.yaml is caught where it belongs: its component loses points, at least in
its must_fail checks and with its feedback, and nothing else loses points beyond its `also` (what `autograder verify
--quick` holds). attention.py holds two components: a bug in how a mask is applied, or in how heads are split, really
does let causal self-attention see the future, so `causal_mask` may lose points too where the catalog says so.

The mistakes are graded as verify grades them, several at once (verify.judge_each: one mistake per file in each
variant, each file's components judged on their own); the grouping is itself checked against grading alone.
"""
import pytest
from conftest import MISTAKES, isolation

from autograder.verify import judge, judge_each

pytestmark = pytest.mark.slow  # everything here grades


@pytest.fixture(scope="module")
def verdicts(rubric):
    with isolation(rubric) as entered:
        verdicts = {(v.mistake.component, v.mistake.name): v for v in judge_each(rubric, MISTAKES, entered, quick=True)}
    assert len(verdicts) == len(MISTAKES)  # one verdict each: a name is unique within its component
    return verdicts


@pytest.mark.parametrize("mistake", [pytest.param(m, id=f"{m.component}: {m.name}") for m in MISTAKES])
def test_the_mistake_is_caught_where_it_belongs(verdicts, mistake):
    assert verdicts[mistake.component, mistake.name].problems == []


def test_a_mistake_graded_with_others_is_judged_as_if_graded_alone(rubric, verdicts):
    """The first group (a mistake in each of several files): each one graded alone gives the same case outcomes."""
    group, files = [], set()
    for m in MISTAKES:
        if rubric.component(m.component).file not in files:
            group.append(m)
            files.add(rubric.component(m.component).file)
    assert len(group) >= 4
    with isolation(rubric) as entered:
        for m in group[:4]:
            alone = judge(rubric, m, entered, quick=True).run.results
            together = verdicts[m.component, m.name].run.results
            assert [(r.case.number, r.outcome.kind, r.score, r.output) for r in alone] == \
                   [(r.case.number, r.outcome.kind, r.score, r.output) for r in together], m.name
