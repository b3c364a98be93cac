"""Forbidden modules fail their component, found statically and at run time."""
import shutil

import pytest
from conftest import SOLUTIONS, grade_folder, scores_by_component, solutions_with

from autograder.forbidden import scan_forbidden

ANCHOR = "import numpy as np\n"


@pytest.fixture
def worker_only(monkeypatch):
    """The static scans off, for routes they already refuse (`__import__`, getattr with a built name):
    the worker's guard must catch them on its own."""
    monkeypatch.setattr("autograder.run.scan_submission", lambda *args: [])


def test_static_import_is_named_with_its_line(rubric, tmp_path):
    folder = solutions_with(tmp_path, "backprop.py", ANCHOR, ANCHOR + "import torch.nn.functional as F\n")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    backprop = [r for r in run.results if r.case.component == "backprop"]
    assert backprop and not any(r.passed for r in backprop)
    assert all("import of torch.nn.functional" in r.output and "line " in r.output for r in backprop)
    assert scores_by_component(run)["ngram"][0] == scores_by_component(run)["ngram"][1]


def test_import_built_at_run_time_is_caught_by_the_worker(rubric, tmp_path, worker_only):
    sneaky = '    np = __import__("importlib").import_module("tor" + "ch")\n'
    folder = solutions_with(tmp_path, "backprop.py", "    z = z - z.max(axis=-1, keepdims=True)", sneaky + "    z = z - z.max(axis=-1, keepdims=True)")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    softmax = [r for r in run.results if r.case.check == "backprop.softmax"]
    assert softmax and all("import of torch (backprop.py, line" in r.output for r in softmax)
    assert all(r.passed for r in run.results if r.case.component == "ngram")


# Each reaches a forbidden recurrent built-in another way, unseen by the forbidden scan (the worker must
# catch it); each is a working LSTM step otherwise.
CELL = "    gates = x_t @ W_ih.T + h_prev @ W_hh.T + b  # (B, 4H)"
REACHED = [
    ("attribute access", "    return torch.lstm_cell(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n", "torch._VF.lstm_cell"),
    ("getattr with a built string", "    fn = getattr(getattr(torch, '_' + 'VF'), 'lstm' + '_cell')\n    return fn(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n", "torch._VF.lstm_cell"),
    ("the read-only C namespace", "    fn = getattr(getattr(torch._C, '_Variable' + 'Functions'), 'lstm_cell')\n    return fn(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n", "torch._VF.lstm_cell"),
    ("an alias bound at import", "    from torch.nn.modules.rnn import LSTMCell as Cell\n    cell = Cell(x_t.shape[1], h_prev.shape[1]).to(x_t.dtype)\n"
     "    return cell(x_t, (h_prev, c_prev))\n", "torch.nn.LSTMCell"),
    ("a subclass", "    class Mine(getattr(torch.nn, 'LSTM' + 'Cell')):\n        pass\n    return Mine(1, 1)(x_t, (h_prev, c_prev))\n", "torch.nn.LSTMCell"),
    ("an aten op", "    return getattr(torch.ops.aten, 'lstm_' + 'cell')(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n", "torch._VF.lstm_cell"),
]


@pytest.mark.parametrize("route, code, name", REACHED, ids=[r[0] for r in REACHED])
def test_forbidden_call_is_caught_however_reached(rubric, tmp_path, worker_only, route, code, name):
    folder = solutions_with(tmp_path, "lstm.py", CELL, code + CELL)
    run = grade_folder(rubric, folder, tmp_path, component_ids=["rnn", "lstm"])
    lstm = [r for r in run.results if r.case.component == "lstm"]
    assert lstm and not any(r.passed for r in lstm)
    assert all(f"{name} (lstm.py, line" in r.output for r in lstm), lstm[0].output
    assert all(r.passed for r in run.results if r.case.component == "rnn")


def test_static_scan_names_forbidden_calls_and_private_kernels(tmp_path):
    source = tmp_path / "lstm.py"
    source.write_text("import torch\nfrom torch import nn\nfrom torch.nn import GRU\n\n"
                      "def f(x):\n    m = nn.LSTM(2, 3)\n    k = torch._VF\n    return torch.nn.RNNCell\n")
    calls = ["torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNNCell", "torch._VF.lstm_cell"]
    assert scan_forbidden(source, [], calls) == [
        "line 3: use of torch.nn.GRU", "line 6: use of torch.nn.LSTM", "line 7: use of torch._VF", "line 8: use of torch.nn.RNNCell"]


def test_a_file_too_deep_to_parse_fails_its_component_only(rubric, tmp_path):
    """ast.parse raises MemoryError on 100,000 nested unary minuses; the scan must leave the verdict to the worker."""
    folder = tmp_path / "deep"
    folder.mkdir()
    (folder / "ngram.py").write_text("x = " + "-" * 100_000 + "1\n")
    shutil.copy(SOLUTIONS / "backprop.py", folder / "backprop.py")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    assert all(not r.passed and "MemoryError" in r.output for r in run.results if r.case.component == "ngram")
    assert all(r.passed for r in run.results if r.case.component == "backprop")
