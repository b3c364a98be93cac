"""Plausible n-gram bugs (solutions/mistakes.yaml) lose points in `ngram` only, in the cases meant to catch them."""
import pytest
from conftest import assert_caught_in_component_only, mistakes_of

pytestmark = pytest.mark.slow  # every test here grades or starts a process


@pytest.mark.parametrize("mistake", mistakes_of("ngram"))
def test_mistake_is_caught_in_its_component_only(rubric, mistake):
    assert_caught_in_component_only(rubric, mistake)
