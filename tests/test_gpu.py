"""The timing path on a GPU (autograder/timing.py, the worker's repeat and flush), and how workers get to see it.

Tests marked `gpu` need CUDA: tests/conftest.py skips them without it, and benchmarks/device.sh runs them on a
lent GPU machine. There the timing cases use grading.yaml's GPU shapes, the worker synchronizes the whole device
before each reply with functions it bound before student code ran, and each side's peak memory is compared.
The environment tests run anywhere: a worker starts with nothing of the grader's environment but what CUDA
needs (process.worker_env), and a GPU the grader sees but the workers do not is said, not silently replaced by
the CPU.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from attacks import tier
from conftest import ROOT, SOLUTIONS, grade_folder
from test_timing import BEYOND_ROUNDING, SDPA_SPEED, attention_with, timing_rubric

from autograder.cases import TIMING
from autograder.judge import CaseFailed
from autograder.report import results_json
from autograder.sandbox.host.process import CUDA_VARIABLES, WORKER_ENV, Deadline, Forbidden, Limits, start_template, worker_env
from autograder.sandbox.host.proxy import ForbiddenUsed, Slot
from autograder.sandbox.worker import worker
from autograder.timing import _memory_ratio

sys.path.insert(0, str(ROOT))  # benchmarks/ is no installed package: its variants are shared with the bench
from benchmarks.run import hungry_copy, restricted, slowed_copy  # noqa: E402

MHSA_SPEED = "speed: multi_head_self_attention against the reference"


def on_gpu(test):
    """Needs CUDA (skipped without it: conftest.py), starts workers and measures time."""
    return pytest.mark.gpu(pytest.mark.slow(pytest.mark.serial(test)))


def case_named(rubric, name: str):
    return next(c for comp in rubric.components for c in comp.cases if c.name == name)


def alone(rubric, folder: Path, tmp_path: Path, name: str):
    """`name`'s result, the case graded alone on `folder` (measuring stops after 5 s, as in test_timing.py)."""
    component = case_named(rubric, name).component
    (result,) = grade_folder(timing_rubric(rubric, component, name), folder, tmp_path).results
    return result


# --- what workers get of the grader's environment ----------------------------------------------------------------


def driver_folder(path: Path, mode: int = 0o755, lib_mode: int = 0o644) -> Path:
    """A folder holding a (fake) libcuda.so.1."""
    path.mkdir()
    (path / "libcuda.so.1").touch()
    os.chmod(path / "libcuda.so.1", lib_mode)
    os.chmod(path, mode)
    return path


def test_workers_get_cuda_variables_and_the_driver_folder_only(tmp_path, monkeypatch):
    """CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER pass through as they are; of LD_LIBRARY_PATH, only absolute folders
    holding libcuda.so.1 that nobody but root or the grader can write (a worker starts as root at the root tier, before
    its walls): not an empty entry (the current folder: the submission), a relative one, a folder or libcuda others
    may write, or a folder without libcuda. Nothing else of the grader's environment reaches a worker."""
    driver = driver_folder(tmp_path / "driver")
    others_write = driver_folder(tmp_path / "others-write", mode=0o777)
    lib_others_write = driver_folder(tmp_path / "lib-others-write", lib_mode=0o666)
    no_lib = tmp_path / "no-lib"
    no_lib.mkdir()
    entries = ["", str(no_lib), "relative/lib", str(others_write), str(lib_others_write), str(driver), str(driver)]
    if os.geteuid() == 0:  # a folder of another user's
        foreign = driver_folder(tmp_path / "foreign")
        os.chown(foreign, 12345, 12345)
        entries.insert(1, str(foreign))
    monkeypatch.setenv("LD_LIBRARY_PATH", ":".join(entries + [""]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("AUTOGRADER_SECRET", "must-not-reach-the-worker")
    assert worker_env() == {**WORKER_ENV, "CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "LD_LIBRARY_PATH": str(driver)}

    for name in (*CUDA_VARIABLES, "LD_LIBRARY_PATH"):
        monkeypatch.delenv(name)
    assert worker_env() == WORKER_ENV


@pytest.mark.slow
@pytest.mark.parametrize("started", ["from nothing", "forked from a template"])
def test_a_worker_sees_the_cuda_variables(tmp_path, monkeypatch, started):
    """A worker, started from nothing or forked from the template (which holds the environment its workers inherit),
    has the CUDA variables and the driver folder of the grader's environment, and still no secret."""
    driver = driver_folder(tmp_path / "driver")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(driver))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("AUTOGRADER_SECRET", "must-not-reach-the-worker")
    template = start_template(tier()) if started != "from nothing" else None
    slot = Slot(SOLUTIONS, Forbidden(), Limits(), tier(), template=template)
    try:
        worker = slot.proxy(Deadline.after(60))
        env = worker.os.environ.copy()
    finally:
        slot.stop()
        if template:
            template.close()
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["LD_LIBRARY_PATH"] == str(driver), env
    assert "AUTOGRADER_SECRET" not in env and "CUDA_DEVICE_ORDER" not in env, env


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="pretends the grader sees a GPU that its workers do not")
@pytest.mark.parametrize("without_gpu", ["grade", "skip"])
def test_a_gpu_the_workers_cannot_see_is_said(rubric, tmp_path, monkeypatch, without_gpu):
    """When the grader sees a GPU and a worker inside the tier's walls does not (here: the grader is told it has one,
    the workers' torch has no CUDA), timing falls back to the CPU policy, and says so with the worker's reason: in
    the case's feedback and extra, and once for the run beside the isolation tier."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Test GPU")
    run = grade_folder(timing_rubric(rubric, "attention", SDPA_SPEED, without_gpu=without_gpu), SOLUTIONS, tmp_path)
    (r,) = run.results
    said = "The grader sees a GPU (Test GPU) but a worker inside the"
    assert r.extra["device"] == "cpu" and r.extra["gpu_unseen"].startswith(said), r.extra
    assert "Torch not compiled with CUDA enabled" in r.extra["gpu_unseen"] and r.extra["gpu_unseen"] in r.output, r.output
    assert (r.passed and "x the reference's time" in r.output) if without_gpu == "grade" else r.output.startswith("Skipped")
    assert r.extra["gpu_unseen"] in results_json(run)["extra_data"]["isolation"]["notes"]
    assert r.extra["gpu_unseen"] in run.isolation_line


# --- what the worker measures ----------------------------------------------------------------------------------


def test_peak_memory_is_each_sides_largest_block():
    """Each side's peak is its largest over the blocks (a student lean in some calls and hungry in others is judged
    by the hungry ones); a CPU measures none; a student's worker that reports none, or no byte count, where the
    reference's reports one fails the case."""
    assert _memory_ratio([100, 300, 200], [100, 150, 120]) == 2.0
    assert _memory_ratio([None, None], [None, None]) is None
    for reported in (None, True, -1, 1.5, "100"):
        with pytest.raises(CaseFailed, match="reported no peak GPU memory"):
            _memory_ratio([100, reported], [100, 100])


def test_the_worker_measures_with_cuda_functions_bound_before_student_code(monkeypatch):
    """What student code does to torch.cuda after the worker bound its timing functions (main binds them before the
    submission is imported) changes nothing the worker measures: told the opposite of the truth by a patched
    is_available, and given a synchronize that does nothing, repeat still times on the device torch really has."""
    really = torch.cuda.is_available()
    bound = worker.bind_timing_cuda()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: not really)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    assert worker.bind_timing_cuda() is bound
    reply = worker.repeat(lambda x: x * 2, [[torch.ones(3)], [torch.ones(3)]], False)
    assert len(reply["checksums"]) == 2 and (reply["peak_bytes"] is None) == (not really), reply


# --- on a GPU ----------------------------------------------------------------------------------------------------


@on_gpu
def test_the_reference_keeps_full_timing_marks_on_the_gpu(rubric, tmp_path):
    """The reference graded as a student on every timing case, at grading.yaml's GPU shapes: full marks, timed on
    cuda (the device named), and the same peak memory as the reference's worker."""
    run = grade_folder(restricted(rubric, lambda c: c.check in TIMING), SOLUTIONS, tmp_path)
    assert len(run.results) == 4
    for r in run.results:
        assert r.passed and r.fraction == 1.0, (r.case.name, r.output)
        assert r.extra["device"] == "cuda" and r.extra["device_name"] == torch.cuda.get_device_name(), r.extra
        assert 0.8 <= r.extra["memory_ratio"] <= 1.25 and "flagged" not in r.extra, (r.case.name, r.extra)


# Forbidden operators' CUDA kernels, each reached directly on CUDA tensors (test_forbidden_operators.py holds the
# routes; on a CPU only the CPU kernels are there to reach): (component, the attack's body, what is refused).
HALF = "    q = Q.cuda().half()\n"
CUDA_ROUTES = [
    ("attention", HALF + "    return torch.ops.aten._scaled_dot_product_flash_attention(q, q, q)[0]\n",
     "the operator aten::_scaled_dot_product_flash_attention"),
    ("attention", HALF + "    return torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False)[0]\n",
     "the operator aten::_scaled_dot_product_efficient_attention"),
    ("attention", HALF + "    return torch.ops.aten._scaled_dot_product_cudnn_attention(q, q, q, None, False)[0]\n",
     "the operator aten::_scaled_dot_product_cudnn_attention"),
    ("attention", HALF + "    return torch.nn.functional.scaled_dot_product_attention(q, q, q)\n",
     "call of torch.nn.functional.scaled_dot_product_attention"),
    ("lstm", "    x, w, b, h = Q[0].cuda(), torch.randn(32, 8, device='cuda'), torch.zeros(32, device='cuda'), torch.zeros(1, 2, 8, device='cuda')\n"
             "    return torch.lstm(x, [h, h], [w, w, b, b], True, 1, 0.0, False, False, True)[0]\n",
     "the operator aten::lstm"),
    ("lstm", "    g = torch.randn(2, 32, device='cuda')\n    return torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.zeros(2, 8, device='cuda'))[0]\n",
     "the operator aten::_thnn_fused_lstm_cell"),
    ("transformer", "    x = Q.cuda()\n    return torch.native_layer_norm(x, (x.shape[-1],), None, None, 1e-5)[0]\n",
     "the operator aten::native_layer_norm"),
]


@on_gpu
@pytest.mark.parametrize("component, body, refused", CUDA_ROUTES, ids=[r[2].split()[-1] + f" [{r[0]}]" for r in CUDA_ROUTES])
def test_the_cuda_kernels_of_forbidden_operators_are_refused(rubric, tmp_path, component, body, refused):
    forbidden = rubric.component(component).forbidden
    file = rubric.component(component).file
    (tmp_path / file).write_text(f"import torch\n\n\ndef attack(Q):\n{body}")
    slot = Slot(tmp_path, forbidden, Limits(), tier())
    try:
        with pytest.raises(ForbiddenUsed) as caught:
            getattr(slot.proxy(Deadline.after(120)), file.removesuffix(".py")).attack(torch.randn(2, 2, 8, 8))
    finally:
        slot.stop()
    assert str(caught.value).startswith(f"{refused} ({file}, line "), caught.value


@on_gpu
def test_a_five_times_slower_variant_loses_points_on_the_gpu(rubric, tmp_path):
    """scaled_dot_product_attention computed 5 times per call (benchmarks/run.py's slowed_copy) measures several
    times the reference's time on the GPU, and loses most of its points."""
    folder = slowed_copy(tmp_path / "slow", case_named(rubric, SDPA_SPEED), 5)
    r = alone(rubric, folder, tmp_path, SDPA_SPEED)
    assert r.passed and r.extra["device"] == "cuda", r.output
    assert r.extra["ratio"] > 3 and r.fraction < 0.5, r.output


@on_gpu
def test_memory_beyond_twice_the_reference_earns_nothing_on_the_gpu(rubric, tmp_path):
    """multi_head_self_attention keeping 8 extra (B, h, T, T) float32 tensors alive until it returns (the reference
    holds at most 3) is correct but takes more than twice the reference's peak memory: it earns nothing, whatever
    its time, and the feedback says why."""
    r = alone(rubric, hungry_copy(tmp_path / "hungry", 8), tmp_path, MHSA_SPEED)
    assert r.passed and r.extra["device"] == "cuda", r.output
    assert r.extra["memory_ratio"] > 2 and r.fraction == 0.0, r.extra
    assert "the reference's peak GPU memory (limit 2x)" in r.output, r.output


# The work of every call but the first (which the grader checks before timing) on a side stream that the caller's
# stream never waits for, with torch.cuda.synchronize made a no-op: only a harness that synchronizes the whole device
# through functions bound before this code ran counts the work, and only checksums of every timed call see outputs
# read before they are written.
SIDE_STREAM = """
_computed = scaled_dot_product_attention
_side = torch.cuda.Stream()
_calls = [0]


def scaled_dot_product_attention(Q, K, V, mask=None):
    _calls[0] += 1
    if _calls[0] == 1:
        return _computed(Q, K, V, mask)
    _side.wait_stream(torch.cuda.current_stream())  # the inputs are ready
    with torch.cuda.stream(_side):
        return _computed(Q, K, V, mask)


torch.cuda.synchronize = lambda *a, **k: None
"""
# Right answers on the caller's stream, then a kernel that spins for about 20 ms on a side stream nothing waits for
# (several times the work), with torch.cuda.synchronize made a no-op: work the student's worker leaves running after
# its reply would run on while the reference is timed, and not count against the student.
SPIN_LEFT_RUNNING = """
_computed = scaled_dot_product_attention
_side = torch.cuda.Stream()


def scaled_dot_product_attention(Q, K, V, mask=None):
    out = _computed(Q, K, V, mask)
    with torch.cuda.stream(_side):
        torch.cuda._sleep(40_000_000)  # clock cycles
    return out


torch.cuda.synchronize = lambda *a, **k: None
"""


@on_gpu
def test_work_on_a_side_stream_is_timed_or_caught(rubric, tmp_path):
    """Outputs computed on a side stream and returned unsynchronized: either a timed block's checksums read them
    before they are written (caught), or the device synchronization counts the work (timed as the reference's,
    not several times faster)."""
    r = alone(rubric, attention_with(tmp_path, SIDE_STREAM), tmp_path, SDPA_SPEED)
    if r.passed:
        assert r.extra["device"] == "cuda" and r.extra["ratio"] > 0.5, r.output
    else:
        assert f"in a timed block: your results (output) {BEYOND_ROUNDING}" in r.output, r.output


@on_gpu
def test_work_left_running_on_the_gpu_counts_against_the_student(rubric, tmp_path):
    """Kernels the student leaves running on a side stream, synchronize patched to do nothing, still finish before
    the worker replies (it synchronizes the whole device with the function it bound before student code ran): the
    student pays for them, several times the reference's time, instead of slowing the reference's next block."""
    r = alone(rubric, attention_with(tmp_path, SPIN_LEFT_RUNNING), tmp_path, SDPA_SPEED)
    assert r.passed and r.extra["device"] == "cuda", r.output
    assert r.extra["ratio"] > 2 and r.fraction < 1, r.output
