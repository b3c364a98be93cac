"""Forbidden modules and calls cost points when the code reaches them (the worker's guard records it);
a forbidden name in code that never runs costs nothing, but is reported and flagged for review."""
import dataclasses
import shutil

import pytest
from conftest import SOLUTIONS, grade_folder, scores_by_component, solutions_with
from rich.console import Console

from autograder.cases import TIMING
from autograder.forbidden import scan_forbidden
from autograder.sandbox.host.process import Forbidden
from autograder.report import print_table, results_json

ANCHOR = "import numpy as np\n"
GUARD = "Uses what this component forbids: "  # runner.py's words for what the guard recorded
SDPA = "torch.nn.functional.scaled_dot_product_attention"


@pytest.fixture
def worker_only(monkeypatch):
    """The tamper scan off, for routes it already refuses (`__import__`, getattr with a built name):
    the worker's guard must catch them on its own."""
    monkeypatch.setattr("autograder.runner.scan_submission", lambda *args: [])


@pytest.fixture(scope="module")
def untimed_rubric(rubric):
    """The real rubric without its timing cases, which only add time here."""
    return dataclasses.replace(rubric, components=[dataclasses.replace(c, cases=[k for k in c.cases if k.check not in TIMING])
                                                   for c in rubric.components])


def line_of(folder, file: str, text: str) -> int:
    lines = [n for n, line in enumerate((folder / file).read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, lines
    return lines[0]


def nanogpt_switch(tmp_path, flash: bool):
    """solutions/ with nanoGPT's switch in scaled_dot_product_attention: PyTorch's fused kernel when FLASH is set."""
    body = "    dk = Q.shape[-1]\n    scores = Q @ K.transpose(-2, -1) / math.sqrt(dk)  # (..., Tq, Tk)\n"
    branch = f"    if FLASH:\n        return {SDPA}(Q, K, V, attn_mask=mask)\n"
    folder = solutions_with(tmp_path, "attention.py", body, branch + body)
    path = folder / "attention.py"
    path.write_text(path.read_text().replace("\nimport torch\n", f"\nimport torch\n\nFLASH = {flash}\n", 1))
    return folder


@pytest.mark.slow
def test_a_forbidden_call_that_never_runs_keeps_every_point_and_is_flagged(untimed_rubric, tmp_path):
    folder = nanogpt_switch(tmp_path, flash=False)
    run = grade_folder(untimed_rubric, folder, tmp_path, component_ids=["attention"])
    got, most = scores_by_component(run)["attention"]
    assert got == most > 0, [(r.case.name, r.output) for r in run.results if not r.passed]
    finding = f"line {line_of(folder, 'attention.py', SDPA)}: use of {SDPA}"
    assert all(r.extra["review"] == {"file": "attention.py", "forbidden_names": [finding]} for r in run.results)
    results = results_json(run)
    assert all(t["extra_data"]["review"]["forbidden_names"] == [finding] for t in results["tests"])
    note = f"Note on attention: attention.py (with the files it imports) names what this component forbids, in code that no case " \
           f"graded here ran: {finding}. That costs no points"
    assert note in results["output"]
    console = Console(record=True, width=1000)
    print_table(run, console)  # what `autograder check` and `grade` print
    assert note in console.export_text()


@pytest.mark.slow
def test_the_same_call_reached_fails_the_component_with_the_guards_message(untimed_rubric, tmp_path):
    folder = nanogpt_switch(tmp_path, flash=True)
    run = grade_folder(untimed_rubric, folder, tmp_path, component_ids=["attention"])
    message = f"{GUARD}call of {SDPA} (attention.py, line {line_of(folder, 'attention.py', SDPA)})."
    assert run.results and all(not r.passed and r.forbidden and r.output == message for r in run.results), run.results[0].output
    assert not any("review" in r.extra for r in run.results)


@pytest.mark.parametrize("line", ["import torch", "import torch.nn.functional as F"])
@pytest.mark.slow
def test_a_forbidden_import_reached_at_import_fails_with_its_line(rubric, tmp_path, line):
    folder = solutions_with(tmp_path, "backprop.py", ANCHOR, ANCHOR + line + "\n")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    backprop = [r for r in run.results if r.case.component == "backprop"]
    message = f"{GUARD}import of torch (backprop.py, line {line_of(folder, 'backprop.py', 'import torch')})."
    assert backprop and all(not r.passed and r.output == message for r in backprop), backprop[0].output
    assert scores_by_component(run)["ngram"][0] == scores_by_component(run)["ngram"][1]


@pytest.mark.slow
def test_a_forbidden_import_in_a_function_nothing_calls_costs_nothing(rubric, tmp_path):
    oracle = "\n\ndef autograd_softmax(z):  # my own check; nothing calls it\n    import torch\n\n" \
             "    return torch.softmax(torch.from_numpy(z), dim=-1).numpy()\n"
    folder = solutions_with(tmp_path, "backprop.py", ANCHOR, ANCHOR + oracle)
    run = grade_folder(rubric, folder, tmp_path, component_ids=["backprop"])
    got, most = scores_by_component(run)["backprop"]
    assert got == most > 0, [(r.case.name, r.output) for r in run.results if not r.passed]
    finding = f"line {line_of(folder, 'backprop.py', '    import torch')}: import of torch"
    assert all(r.extra["review"]["forbidden_names"] == [finding] for r in run.results)


@pytest.mark.slow
def test_import_built_at_run_time_is_caught_by_the_worker(rubric, tmp_path, worker_only):
    sneaky = '    np = __import__("importlib").import_module("tor" + "ch")\n'
    folder = solutions_with(tmp_path, "backprop.py", "    z = z - z.max(axis=-1, keepdims=True)", sneaky + "    z = z - z.max(axis=-1, keepdims=True)")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    softmax = [r for r in run.results if r.case.check == "backprop.softmax"]
    assert softmax and all("import of torch (backprop.py, line" in r.output for r in softmax)
    assert all(r.passed for r in run.results if r.case.component == "ngram")


# A forbidden recurrent built-in reached, graded whole: the component fails, the other keeps every point. Every other
# route is put to the worker alone: tests/test_security_data.py (names) and tests/test_forbidden_operators.py (kernels).
CELL = "    gates = x_t @ W_ih.T + h_prev @ W_hh.T + b  # (B, 4H)"
KERNEL = "    return torch.lstm_cell(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n"  # a working step, on PyTorch's fused cell


@pytest.mark.slow
def test_a_forbidden_kernel_reached_fails_its_component_only(rubric, tmp_path, worker_only):
    folder = solutions_with(tmp_path, "lstm.py", CELL, KERNEL + CELL)
    run = grade_folder(rubric, folder, tmp_path, component_ids=["rnn", "lstm"])
    lstm = [r for r in run.results if r.case.component == "lstm"]
    assert lstm and not any(r.passed for r in lstm)
    assert all("the operator aten::lstm_cell (lstm.py, line" in r.output for r in lstm), lstm[0].output
    assert all(r.passed for r in run.results if r.case.component == "rnn")


@pytest.mark.slow
def test_the_forbidden_rewrite_keeps_every_field(rubric, tmp_path):
    """Under `without_gpu: skip` a timing case counts for nothing: failing the component for a forbidden call
    must keep it that way (and keep its extra data), or the maximum would change."""
    skipping = dataclasses.replace(rubric, timing=dataclasses.replace(rubric.timing, without_gpu="skip"))
    folder = solutions_with(tmp_path, "lstm.py", CELL, KERNEL + CELL)
    run = grade_folder(skipping, folder, tmp_path, component_ids=["lstm"])
    assert run.results and all(not r.passed and r.forbidden and r.output.startswith(GUARD) for r in run.results)
    timed = [r for r in run.results if r.case.check in TIMING]
    assert timed and all(not r.counted and r.max_score == 0 and r.extra.get("device") == "cpu" for r in timed)
    assert sum(r.max_score for r in run.results) == sum(c.points for c in rubric.component("lstm").cases if c.check not in TIMING)


def test_static_scan_names_forbidden_calls_and_operators(tmp_path):
    source = tmp_path / "lstm.py"
    source.write_text("import torch\nfrom torch import nn\nfrom torch.nn import GRU\n\n"
                      "def f(x):\n    m = nn.LSTM(2, 3)\n    k = torch._VF.lstm_cell\n    return torch.nn.RNNCell\n")
    forbidden = Forbidden(calls=("torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNNCell"), operators=("aten::lstm_cell",))
    assert scan_forbidden(source, forbidden) == [
        "line 3: mention of torch.nn.GRU in an import", "line 6: use of torch.nn.LSTM",
        "line 7: mention of the operator aten::lstm_cell (torch._VF.lstm_cell)",
        "line 8: mention of torch.nn.RNNCell"]  # named, not called: the review note says so (report.review_notes)


@pytest.mark.slow
def test_a_file_too_deep_to_parse_fails_its_component_only(rubric, tmp_path):
    """ast.parse raises MemoryError on 100,000 nested unary minuses; the scan must leave the verdict to the worker."""
    folder = tmp_path / "deep"
    folder.mkdir()
    (folder / "ngram.py").write_text("x = " + "-" * 100_000 + "1\n")
    shutil.copy(SOLUTIONS / "backprop.py", folder / "backprop.py")
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    assert all(not r.passed and "MemoryError" in r.output for r in run.results if r.case.component == "ngram")
    assert all(r.passed for r in run.results if r.case.component == "backprop")
