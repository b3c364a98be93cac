"""Global settings a submission changes neither help nor hurt: the worker sets them back after every request.

On 2885c7d a correct lstm.py that called torch.set_num_threads(2) at import measured 9-20x the reference and lost
both speed points; a submission could as well have left anomaly detection on, float64 as the default dtype, or a
torch function mode active for the cases after it.
"""
from __future__ import annotations

import dataclasses

import pytest
from attacks import tier
from conftest import grade_folder, solutions_with

from autograder.cases import TIMING
from autograder.runner import SET_BACK
from autograder.sandbox.host.process import Deadline, Forbidden, Limits
from autograder.sandbox.host.proxy import Slot

CHANGES = """\
import random

import numpy as np
import torch


class Loud(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def change():
    torch.set_num_threads(2)
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True)
    torch.autograd.set_detect_anomaly(True)
    torch.set_float32_matmul_precision("medium")
    torch.backends.mkldnn.enabled = False
    Loud().__enter__()
    torch.manual_seed(1), np.random.seed(1), random.seed(1)


def read():
    return [torch.get_num_threads(), str(torch.get_default_dtype()), torch.is_grad_enabled(),
            torch.are_deterministic_algorithms_enabled(), torch.is_anomaly_enabled(), torch.get_float32_matmul_precision(),
            torch.backends.mkldnn.enabled, torch._C._len_torch_function_stack(), float(torch.rand(())),
            float(np.random.rand()), random.random()]
"""


@pytest.mark.slow
def test_every_setting_a_request_changes_is_set_back_and_named(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "changes.py").write_text(CHANGES)
    slot = Slot(folder, Forbidden(), Limits(), tier())
    try:
        first = slot.proxy(Deadline.after(60))
        before = first.changes.read()
        assert first.set_back == []
        first.changes.change()
        assert first.set_back == [
            "torch.set_num_threads (2)", "torch.set_default_dtype (torch.float64)", "torch.set_grad_enabled (False)",
            "torch.use_deterministic_algorithms ((True, False))", "torch.autograd.set_detect_anomaly (True)",
            "torch.set_float32_matmul_precision (medium)", "torch.backends.mkldnn.enabled (False)",
            "a torch function mode left active (1)"]
        again = first.changes.read()
        assert again[:-3] == before[:-3] and again[-3:] != before[-3:]  # within a case the generators go on
        after = slot.proxy(Deadline.after(60))
        assert after.changes.read() == before  # the random states too: each case starts from the same ones
        assert after.set_back == []
    finally:
        slot.stop()


@pytest.mark.slow
@pytest.mark.serial
def test_a_thread_count_set_at_import_is_not_the_one_timed(rubric, tmp_path):
    """The observation of issue 39: the same lstm.py with torch.set_num_threads(2) at import measured 9-20x the
    reference on a loaded machine (and 0.67x on an idle one: two threads against the reference's one). Now its timed
    calls run on the thread the reference has, and the case says what was set back."""
    folder = solutions_with(tmp_path, "lstm.py", "\nimport torch\n", "\nimport torch\n\ntorch.set_num_threads(2)\n")
    stepped = "    x_proj = x @ W_ih.T + b  # (B, T, 4H)\n"
    path = folder / "lstm.py"
    path.write_text(path.read_text().replace(stepped, stepped + '    print("threads", torch.get_num_threads())\n'))
    lstm = rubric.component("lstm")
    timed = dataclasses.replace(rubric, components=[dataclasses.replace(lstm, cases=[lstm.cases[0], *(k for k in lstm.cases if k.check in TIMING)])])
    run = grade_folder(timed, folder, tmp_path, component_ids=["lstm"])
    first, speed = run.results[0], run.results[-1]
    assert first.passed and f"{SET_BACK}torch.set_num_threads (2)." in first.output
    assert speed.case.check in TIMING and speed.passed and speed.fraction == 1, speed.output
    assert set(speed.printed.split()) == {"threads", "1"}, speed.printed[:200]  # every timed call, on one thread
