"""The training case (transformer.training) on models that do not train as they should, beyond the catalog's.

Its run is short (generation.TRAIN_STEPS), so what would show only after a few hundred steps is probed on the
first batch instead: a sub-module that no gradient reaches, and a causal mask that leaks at the training
sizes only (transformer.causality uses shorter sequences). An untrainable initialisation must still fail
the case that trains from the student's own weights.
"""
import dataclasses

import pytest
from conftest import grade_folder, solutions_with

pytestmark = pytest.mark.slow  # every test grades a submission

GRADER, OWN = "training: the loss falls as the reference's does (the grader's weights)", "training from your own initialisation"
VARIANTS = [
    pytest.param("        return self.output_proj(y)\n", "        return self.output_proj(y).detach()\n", GRADER,
                 "no gradient reaches layers.0.ln1.weight", id="attention detached"),
    pytest.param("        if self.causal:\n", "        if self.causal and T < 32:\n", GRADER,
                 "after position 16 changed", id="causal mask leaks at T=32 only"),
    pytest.param("nn.init.normal_(module.weight, mean=0.0, std=0.02)", "nn.init.zeros_(module.weight)", OWN,
                 "the training loss went from 4.007 to 4.007", id="all-zero initialisation"),
]


@pytest.mark.parametrize("old, new, case, phrase", VARIANTS)
def test_training_case_fails(rubric, tmp_path, old, new, case, phrase):
    component = rubric.component("transformer")
    narrowed = dataclasses.replace(rubric, components=[dataclasses.replace(component, cases=[k for k in component.cases if k.name == case])])
    (result,) = grade_folder(narrowed, solutions_with(tmp_path, "transformer.py", old, new), tmp_path, component_ids=["transformer"]).results
    assert not result.passed and phrase in result.output, result.output
