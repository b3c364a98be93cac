"""Blame where it belongs: when the grader cannot do its part (a worker it cannot start, an isolation it cannot enter,
the reference's worker failing, its own exception), the case says so as the grader's failure (infra_error), with no
word of blame for the student, `grade` exits non-zero, and a batch grades that submission again. And a results or
secret file inside the Python the workers run on never weakens or breaks the isolation (issue 30, observation 4).

Each test names the defence that held: the outcome's kind and message, the tier chosen, the mount that masks."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.cases import TIMING
from autograder.outcome import GRADER_FAILED, INTERNAL_ERROR
from autograder.report import results_json
from autograder.runner import _limits, _outcome
from autograder.sandbox.host.tiers import Tier, bubblewrap_args, choose_tier, grader_files, python_paths
from autograder.timing import reference_slot

from conftest import ROOT, SOLUTIONS, grade_folder

AUTOGRADER = Path(sys.executable).parent / "autograder"
BLAME = re.compile(r"your code (crashed|raised|sent)|student code", re.IGNORECASE)


def _no_student_blame(run) -> None:
    for r in run.results:
        assert r.outcome.kind == GRADER_FAILED, (r.case.number, r.outcome)
        assert "not your code" in r.output or r.output == INTERNAL_ERROR, r.output
        assert not BLAME.search(r.output), r.output


def _strongest(rubric) -> Tier:
    return choose_tier(grader_files(rubric.path.parent, rubric.solutions_dir, []))


# ---- a results or secret file inside the venv ----------------------------------------------------------------------

def test_a_hidden_file_inside_the_venv_keeps_the_venv_mounted_and_is_masked(rubric, tmp_path):
    """The defence: python_paths keeps Python's own prefix when it holds something hidden, and bubblewrap_args mounts
    over what is hidden, after binding the folder that holds it (c70f8b1 dropped the whole venv from the mounts, so no
    worker could start Python)."""
    venv = Path(sys.prefix).resolve()
    results, out = venv / f"results-{os.getpid()}.json", venv / f"batch-out-{os.getpid()}"
    results.write_text("{}")
    out.mkdir()
    try:
        hidden = tuple(p.resolve() for p in grader_files(rubric.path.parent, rubric.solutions_dir, [results, out]))
        paths = python_paths(hidden)
        args = bubblewrap_args("bwrap", paths, tmp_path, tmp_path, as_root=False, hidden=hidden)
    finally:
        results.unlink()
        out.rmdir()
    assert venv in paths and not any(rubric.solutions_dir.resolve().is_relative_to(p) for p in paths)

    def at(*triple: str) -> int:
        return next(i for i in range(len(args)) if args[i:i + len(triple)] == list(triple))

    bound = at("--ro-bind", str(venv), str(venv))
    assert at("--ro-bind", "/dev/null", str(results)) > bound and at("--tmpfs", str(out), "--remount-ro") > bound


@pytest.mark.slow
def test_a_worker_cannot_read_a_results_file_or_folder_inside_the_venv(rubric, tmp_path):
    """At the bubblewrap and root tiers: the tier stays what it is without the hidden file, Python starts, and what is
    hidden reads as nothing (the results file is a device it may not open; the folder is empty)."""
    venv = Path(sys.prefix).resolve()
    results, out = venv / f"test-results-{os.getpid()}.json", venv / f"test-batch-{os.getpid()}"
    results.write_text('{"secret": "expected values"}')
    out.mkdir()
    (out / "grades.csv").write_text("secret")
    try:
        tier = choose_tier(grader_files(rubric.path.parent, rubric.solutions_dir, [results, out]))
        if tier.bwrap is None:
            pytest.skip(f"needs bubblewrap (the {tier.name} tier here mounts nothing)")
        assert tier.name == _strongest(rubric).name, tier.notes  # never a weaker tier for it
        code = (f"import os, numpy, torch\ntry:\n    print(repr(open({str(results)!r}).read()))\nexcept OSError as e:\n"
                f"    print(type(e).__name__)\nprint(os.listdir({str(out)!r}))")
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        scratch.chmod(0o755)
        done = subprocess.run(tier.command([sys.executable, "-I", "-c", code], scratch, scratch), capture_output=True, text=True,
                              timeout=120, cwd=scratch, env={"LC_ALL": "C.UTF-8"})
    finally:
        results.unlink()
        shutil.rmtree(out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] in (["PermissionError", "[]"], ["''", "[]"]), done.stdout


@pytest.mark.slow
def test_make_demo_prints_the_examples_true_score_with_its_results_in_the_venv():
    """The README's first command: results in .venv, as `make demo` writes them, and the score the Makefile says the
    example's two planted mistakes leave (c70f8b1 printed 22 / 278 at the bubblewrap tiers: every ngram case blamed
    the student for a worker the grader could not start)."""
    expected = re.search(r"^DEMO_SCORE := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)[1]
    results = Path(sys.prefix) / f"demo-results-test-{os.getpid()}.json"
    try:
        done = subprocess.run([str(AUTOGRADER), "grade", str(ROOT / "examples" / "submission"), "--results", str(results), "-q"],
                              capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
        data = json.loads(results.read_text())
    finally:
        results.unlink(missing_ok=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Total: {expected}" in done.stdout, done.stdout
    assert data["extra_data"]["infra_error"] == [] and not BLAME.search(json.dumps(data["tests"]).replace("Your code raised", ""))


# ---- a worker that cannot start, an isolation that cannot be entered ------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("wall", ["/bin/false", "/nonexistent/bwrap"], ids=["exits-before-ready", "cannot-be-executed"])
def test_a_worker_that_cannot_start_is_the_graders_failure(rubric, tmp_path, wall):
    """The defence: process.Worker turns a death before its ready message (no student code has run) or a process
    that cannot be started into WorkerWontStart, a GraderFailed; results.json says so first, and lists the cases."""
    tier = Tier("bubblewrap", hidden=(), bwrap=wall)
    run = grade_folder(rubric, SOLUTIONS, tmp_path, tier=tier, component_ids=["ngram"])
    _no_student_blame(run)
    assert all("could not" in r.output and "start" in r.output for r in run.results)
    results = results_json(run)
    assert results["extra_data"]["infra_error"] == [r.case.number for r in run.results]
    assert results["output"].startswith(f"The grader itself failed on {len(run.results)} cases")
    assert results["score"] == 0


@pytest.mark.slow
def test_the_reference_worker_failing_is_the_graders_failure(rubric, tmp_path):
    """A timing case whose reference worker cannot start: the student's correct code is not blamed (the defence:
    a staff Slot turns whatever ends its worker into GraderFailed), and the component's other cases still pass."""
    timed = [k for k in rubric.component("lstm").cases if k.check in TIMING]
    broken = reference_slot(rubric.solutions_dir, Tier("bubblewrap", bwrap="/bin/false"), _limits(timed, rubric))
    run = grade_folder(rubric, SOLUTIONS, tmp_path, component_ids=["lstm"], reference=broken)
    timing = [r for r in run.results if r.case in timed]
    assert timing and all(r.outcome.kind == GRADER_FAILED and not BLAME.search(r.output) for r in timing), [r.output for r in timing]
    assert all(r.passed for r in run.results if r.case not in timed)


@pytest.mark.slow
def test_grade_exits_non_zero_when_the_isolation_fails_after_it_was_chosen(tmp_path):
    """bubblewrap that works when the tier is probed, then fails (user namespaces used up mid-run, say): every case is
    the grader's failure in results.json, the terminal says the score is not final, and `grade` exits 3."""
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("needs bubblewrap")
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(f'#!/bin/sh\necho x >> {calls}\n[ "$(wc -l < {calls})" -le 1 ] || exit 1\nexec {real} "$@"\n')
    (bin_dir / "bwrap").chmod(0o755)
    results = tmp_path / "results.json"
    done = subprocess.run([str(AUTOGRADER), "grade", str(SOLUTIONS), "--component", "ngram", "--results", str(results)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "COLUMNS": "200"})
    data = json.loads(results.read_text())
    assert done.returncode == 3, done.stdout + done.stderr
    assert "GRADER FAILED" in done.stdout and "this score is not final" in done.stdout.replace("\n", " ")
    assert len(data["extra_data"]["infra_error"]) == len(data["tests"]) > 0
    assert all("not your code" in t["output"] and not BLAME.search(t["output"]) for t in data["tests"])


def test_a_graders_bug_in_a_check_is_infra_error_and_never_passes():
    """The runner's last defence: any exception of the grader's own is an infra_error outcome with the staff message."""
    def broken_check():
        raise KeyError("the grader's own bug")

    outcome = _outcome(broken_check)
    assert (outcome.kind, outcome.message, outcome.passed) == (GRADER_FAILED, INTERNAL_ERROR, False)


@pytest.mark.slow
def test_a_slot_stops_trying_a_start_that_failed_twice_until_it_is_stopped(rubric):
    """A share whose worker cannot start costs two tries, not one per case; a kept reference worker (a batch job's)
    is tried again for the next submission (timing.renew stops the slot, which forgets its failed starts)."""
    from autograder.sandbox.host.process import Forbidden, Limits, WorkerWontStart
    from autograder.sandbox.host.proxy import Slot
    from autograder.timing import renew

    slot = Slot(SOLUTIONS, Forbidden(), Limits(), Tier("bubblewrap", bwrap="/bin/false"), staff=True)
    tries = []
    for _ in range(4):
        with pytest.raises(WorkerWontStart) as caught:
            slot.start()
        tries.append(caught.value)
    assert tries[1] is not tries[0] and tries[3] is tries[2] is tries[1]  # the third and fourth tried nothing
    renew(slot)
    with pytest.raises(WorkerWontStart) as caught:
        slot.start()
    assert caught.value is not tries[1]


def test_a_scratch_folder_below_a_tmpdir_of_the_tas_is_reachable_by_the_student_uid():
    """A TA's TMPDIR below /tmp (/tmp/grading): bwrap makes the scratch folder's missing parents 0700, which the student
    uid of the root tier cannot walk through, so every worker failed (issue 41). Each is made 0755 before the bind."""
    scratch = Path("/tmp/grading/term/autograder-worker-template-pid1-x")
    args = bubblewrap_args("bwrap", (), scratch, scratch, as_root=True)
    bind = args.index("--bind")
    made = [args[i + 3] for i in range(bind) if args[i:i + 3] == ["--perms", "0755", "--dir"]]
    assert made == ["/tmp/grading", "/tmp/grading/term"] and args[bind:bind + 3] == ["--bind", str(scratch), str(scratch)]
