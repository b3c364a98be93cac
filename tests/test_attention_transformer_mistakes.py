"""Plausible attention and Transformer bugs (solutions/mistakes.yaml) lose points where they belong.

attention.py holds two components: a bug in how a mask is applied, or in how heads are split, really does
let causal self-attention see the future, so `causal_mask` may lose points too where the catalog says so
(`also`). The training case runs only for the mistake that must fail it.
"""
import pytest
from conftest import assert_caught_in_component_only, mistakes_of

pytestmark = pytest.mark.slow  # every test here grades or starts a process


@pytest.mark.parametrize("mistake", mistakes_of("attention", "causal_mask", "transformer"))
def test_mistake_is_caught_where_it_belongs(rubric, mistake):
    assert_caught_in_component_only(rubric, mistake)
