"""Forbidden modules fail their component, found statically and at run time."""
from conftest import grade_folder, scores_by_component, solutions_with

ANCHOR = "import numpy as np\n"


def test_static_import_is_named_with_its_line(rubric, tmp_path):
    folder = solutions_with(tmp_path, "backprop.py", ANCHOR, ANCHOR + "import torch.nn.functional as F\n")
    run = grade_folder(rubric, folder, tmp_path)
    backprop = [r for r in run.results if r.case.component == "backprop"]
    assert backprop and not any(r.passed for r in backprop)
    assert all("import of torch.nn.functional" in r.output and "line " in r.output for r in backprop)
    assert scores_by_component(run)["ngram"][0] == scores_by_component(run)["ngram"][1]


def test_import_built_at_run_time_is_caught_by_the_worker(rubric, tmp_path):
    sneaky = '    np = __import__("importlib").import_module("tor" + "ch")\n'
    folder = solutions_with(tmp_path, "backprop.py", "    z = z - z.max(axis=-1, keepdims=True)", sneaky + "    z = z - z.max(axis=-1, keepdims=True)")
    run = grade_folder(rubric, folder, tmp_path)
    softmax = [r for r in run.results if r.case.check == "backprop.softmax"]
    assert softmax and all("import of torch (backprop.py, line" in r.output for r in softmax)
    assert all(r.passed for r in run.results if r.case.component == "ngram")
