"""The installed command line, run as TAs and students run it."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from attacks import tier
from conftest import ROOT, SOLUTIONS, default_sigint, with_staff_tests

from autograder import __version__
from autograder.cli import build_parser
from autograder.cases import DATA, TIMING
from autograder.rubric import RubricError, load_rubric
from autograder.release import RULES_BEGIN
from autograder.sandbox.host.tiers import ORDER
from autograder.submission.names import FILE_ORDER


def autograder(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200"), timeout=600)


@pytest.mark.slow
def test_grade_writes_gradescope_results(tmp_path, rubric):
    results = tmp_path / "out" / "results.json"
    proc = autograder("grade", str(ROOT / "starter"), "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(results.read_text())
    assert data["score"] == 0 and data["extra_data"]["max_score"] > 0 and "max_score" not in data
    for test in data["tests"]:
        assert set(test) >= {"name", "number", "score", "max_score", "status", "visibility", "tags", "output", "output_format"}
        timing = ["timing"] if test["extra_data"]["check"] in TIMING else []
        assert test["status"] == "failed" and test["tags"][:1 + len(timing)] == [test["name"][1:].split("]")[0], *timing]
        assert test["tags"][0] in {c.id for c in rubric.components}
        assert test["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    assert "Total: 0 /" in proc.stdout


@pytest.mark.slow
def test_grade_of_a_missing_path_still_writes_results(tmp_path):
    results = tmp_path / "results.json"
    proc = autograder("grade", str(tmp_path / "nothing-here"), "--results", str(results))
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and not proc.stdout
    data = json.loads(results.read_text())
    assert data["score"] == 0 and "could not grade" in data["output"]


@pytest.mark.slow
def test_bad_rubric_is_refused_with_the_key(tmp_path):
    bad = tmp_path / "grading.yaml"
    bad.write_text((ROOT / "grading.yaml").read_text().replace("timeout: 10", "timeout: soon"))
    proc = autograder("--config", str(bad), "grade", str(SOLUTIONS))
    assert proc.returncode == 2
    assert "defaults.timeout" in proc.stderr


@pytest.mark.slow
def test_check_runs_visible_cases_and_counts_hidden_ones(tmp_path, rubric):
    proc = autograder("check", "ngram", "--dir", str(SOLUTIONS))
    assert proc.returncode == 0, proc.stderr
    ngram = rubric.component("ngram").cases
    hidden = sum(1 for c in ngram if not c.visible)
    assert f"{hidden} more cases run only when your submission is graded" in " ".join(proc.stdout.split())
    assert "(hidden)" not in proc.stdout
    assert f"ngram: {sum(c.points for c in ngram if c.visible):g} / {sum(c.points for c in ngram if c.visible):g}" in proc.stdout


@pytest.mark.slow
def test_check_exits_1_when_a_case_fails_and_2_when_it_cannot_run():
    failing = autograder("check", "ngram", "--dir", str(ROOT / "starter"))
    assert failing.returncode == 1 and "ngram: 0 /" in failing.stdout, failing.stdout + failing.stderr
    unknown = autograder("check", "no_such_component", "--dir", str(ROOT / "starter"))
    assert unknown.returncode == 2 and "no_such_component" in unknown.stderr, unknown.stdout + unknown.stderr


@pytest.mark.slow
def test_check_shows_what_the_code_printed_under_its_case(tmp_path, rubric):
    """Printed at import (during the first case's first call) and in every call of pad_sentence: each case shows its
    own, the first truncated at 2,000 characters with the rest counted."""
    (tmp_path / "ngram.py").write_text((SOLUTIONS / "ngram.py").read_text() + "\n\nprint('x' * 2500)\n_pad = pad_sentence\n\n\n"
                                       "def pad_sentence(tokens, n):\n    print(f'padding with n = {n}')\n    return _pad(tokens, n)\n")
    proc = autograder("check", "ngram", "--dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = (c for c in rubric.component("ngram").cases if c.params.get("n") in (1, 2) and c.check == "ngram.padding")
    assert f"{first.number} [ngram] {first.name}\n  Passed.\n  Your code printed:\n  | {'x' * 2000}\n  ... (" in proc.stdout
    assert "more characters)" in proc.stdout and "  | padding with n = 1" not in proc.stdout  # past the first 2,000
    assert f"{second.number} [ngram] {second.name}\n  Passed.\n  Your code printed:\n  | padding with n = 2\n" in proc.stdout


@pytest.mark.slow
def test_release_check_fails_when_starter_is_stale(tmp_path):
    shutil.copytree(SOLUTIONS, tmp_path / "solutions")
    (tmp_path / "solutions" / "ngram.py").write_text(f'"""N-grams.\n\n{RULES_BEGIN[".py"]}\n"""\n\n\n'
                                                     'def f():\n    """Doc."""\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n')
    rubric = (ROOT / "grading.yaml").read_text()
    (tmp_path / "grading.yaml").write_text(rubric)
    with_staff_tests(tmp_path)
    assert autograder("--config", str(tmp_path / "grading.yaml"), "release", "--check").returncode == 1
    assert autograder("--config", str(tmp_path / "grading.yaml"), "release").returncode == 0
    assert "raise NotImplementedError" in (tmp_path / "starter" / "ngram.py").read_text()
    assert autograder("--config", str(tmp_path / "grading.yaml"), "release", "--check").returncode == 0


# A forbidden name dropped from a handout, from a solution's docstring (which the starter copies) and from a
# starter docstring: (file, text, the same text without the name).
DRIFT = [
    ("assignments/transformer.md", "`RMSNorm` and `GroupNorm`", "`RMSNorm`"),
    ("solutions/transformer.py", "`layer_norm`, `rms_norm`, `group_norm`,", "`layer_norm`, `rms_norm`,"),
    ("starter/transformer.py", "`aten::native_layer_norm`, `aten::rms_norm`,", "`aten::rms_norm`,"),  # an operator dropped
]


@pytest.mark.slow
def test_release_check_fails_when_the_rules_drift_and_release_restores_them(tmp_path):
    """The rules in the handouts and starter docstrings are written from grading.yaml and the tamper scan's tables:
    a copy of the course with a forbidden name dropped in three places is out of date until `release` rewrites it."""
    shutil.copy(ROOT / "grading.yaml", tmp_path)
    with_staff_tests(tmp_path)
    for folder in ("assignments", "solutions", "starter"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    config = ("--config", str(tmp_path / "grading.yaml"))
    assert autograder(*config, "release", "--check").returncode == 0
    for file, text, dropped in DRIFT:
        path = tmp_path / file
        assert path.read_text().count(text) == 1, (file, text)
        path.write_text(path.read_text().replace(text, dropped))
    stale = autograder(*config, "release", "--check")
    assert stale.returncode == 1 and all(file in " ".join(stale.stdout.split()) for file, _, _ in DRIFT), stale.stdout
    refused = autograder(*config, "release", "--out", str(tmp_path / "bundle"))
    assert refused.returncode == 2 and "assignments/transformer.md" in refused.stderr and not (tmp_path / "bundle").exists()
    assert autograder(*config, "release").returncode == 0
    assert autograder(*config, "release", "--check").returncode == 0
    for file, _, _ in DRIFT:
        assert (tmp_path / file).read_text() == (ROOT / file).read_text()


@pytest.mark.parametrize("required", ORDER)
@pytest.mark.slow
def test_require_tier_grades_at_or_above_it_and_refuses_below(tmp_path, required):
    """Whatever this machine offers, --require-tier holds both ways: a tier at or below the one here grades,
    a stronger one is refused with no points and the reason."""
    here = tier()
    results = tmp_path / "results.json"
    proc = autograder("grade", str(SOLUTIONS), "--component", "causal_mask", "--require-tier", required, "--results", str(results))
    data = json.loads(results.read_text())
    if ORDER.index(required) <= ORDER.index(here.name):
        assert proc.returncode == 0 and data["score"] == data["extra_data"]["max_score"] > 0, proc.stdout + proc.stderr
        assert data["extra_data"]["isolation"]["tier"] == here.name
    else:
        assert proc.returncode == 2 and data["score"] == 0 and data["tests"] == []
        assert f"--require-tier {required}, but the strongest tier here is {here.name}" in data["output"]


@pytest.mark.slow
def test_a_submission_never_supplies_the_rubric(tmp_path):
    """Graded from inside a student's folder that carries its own grading.yaml (every point x100), the staff's
    rubric grades it, and the run names that rubric and its digest."""
    student = tmp_path / "submission_4711"
    student.mkdir()
    shutil.copy(SOLUTIONS / "ngram.py", student)
    (student / "grading.yaml").write_text((ROOT / "grading.yaml").read_text().replace("points: 1}", "points: 100}"))
    results = tmp_path / "results.json"
    proc = autograder("grade", ".", "--component", "ngram", "--results", str(results), cwd=student)
    assert proc.returncode == 0, proc.stderr
    assert "Total: 36 / 36" in proc.stdout
    digest = load_rubric(ROOT / "grading.yaml").digest  # of grading.yaml and its staff test files
    assert f"rubric: {ROOT / 'grading.yaml'} (sha256 {digest[:12]})" in proc.stderr
    assert json.loads(results.read_text())["extra_data"]["rubric"] == {"path": str(ROOT / "grading.yaml"), "sha256": digest}


@pytest.mark.slow
def test_a_rubric_without_its_solutions_is_refused_before_grading(tmp_path):
    elsewhere = tmp_path / "grading.yaml"
    shutil.copy(ROOT / "grading.yaml", elsewhere)
    results = tmp_path / "results.json"
    proc = autograder("--config", str(elsewhere), "grade", str(SOLUTIONS), "--results", str(results))
    assert proc.returncode == 2 and "Total" not in proc.stdout
    assert f"missing: the solutions folder {tmp_path / 'solutions'}" in proc.stderr
    assert "missing: the solutions folder" in json.loads(results.read_text())["output"]


def test_a_rubric_missing_one_reference_or_its_data_is_refused(tmp_path, monkeypatch):
    shutil.copy(ROOT / "grading.yaml", tmp_path)
    with_staff_tests(tmp_path)
    shutil.copytree(SOLUTIONS, tmp_path / "solutions")
    (tmp_path / "solutions" / "lstm.py").unlink()
    with pytest.raises(RubricError, match=r"missing: .*solutions/lstm.py, the reference of lstm.py$"):
        load_rubric(tmp_path / "grading.yaml")
    shutil.copy(SOLUTIONS / "lstm.py", tmp_path / "solutions")
    monkeypatch.setitem(DATA, "transformer.training", (tmp_path / "corpus.txt",))
    with pytest.raises(RubricError, match=r"missing: .*corpus.txt, read by check transformer.training$"):
        load_rubric(tmp_path / "grading.yaml")


@pytest.mark.slow
def test_yaml_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "grading.yaml"
    bad.write_text((ROOT / "grading.yaml").read_text().replace("  timeout: 10", "  timeout: [10", 1))
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "timeout: [10" in text)
    proc = autograder("--config", str(bad), "grade", str(SOLUTIONS))
    assert proc.returncode == 2 and f"{bad}, line {line + 1}" in proc.stderr and "<unicode string>" not in proc.stderr


def test_an_unknown_case_parameter_is_named_as_unknown(tmp_path):
    shutil.copy(ROOT / "grading.yaml", tmp_path)
    with_staff_tests(tmp_path)
    shutil.copytree(SOLUTIONS, tmp_path / "solutions")
    rubric = tmp_path / "grading.yaml"
    rubric.write_text(rubric.read_text().replace("check: ngram.padding, params: {n: 2}", "check: ngram.padding, params: {N: 2}"))
    with pytest.raises(RubricError, match=r"params: unknown parameter 'N' \(check ngram.padding takes n\)"):
        load_rubric(rubric)


@pytest.mark.slow
def test_version_and_options_before_or_after_the_command(tmp_path):
    version = autograder("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"autograder {__version__}"
    config = ("--config", str(ROOT / "grading.yaml"))
    before = autograder(*config, "check", "causal_mask", "--dir", str(SOLUTIONS), "-q")
    after = autograder("check", "causal_mask", "--dir", str(SOLUTIONS), *config, "-q")
    visible = [c for c in load_rubric(ROOT / "grading.yaml").component("causal_mask").cases if c.visible]
    for proc in (before, after):
        assert proc.returncode == 0, proc.stderr
        points = sum(c.points for c in visible)
        assert "Grading results" not in proc.stdout and f"causal_mask: {points:g} / {points:g}" in proc.stdout and not proc.stderr
    verbose = autograder("check", "causal_mask", "--dir", str(SOLUTIONS), "-v")
    assert verbose.stdout.count("Passed.") == len(visible)
    assert verbose.stderr.startswith("rubric: ") and "rubric: " not in verbose.stdout  # a note, on stderr


@pytest.mark.parametrize("command, takes", [
    (["grade", "x"], "-q -v"), (["check"], "-q -v"), (["grade-all", "x", "--out", "y"], "-q"), (["verify"], "-q"),
    (["report", "x"], ""), (["release"], ""), (["gradescope", "build"], ""),
], ids=["grade", "check", "grade-all", "verify", "report", "release", "gradescope build"])
def test_quiet_and_verbose_only_where_they_change_the_output(command, takes, capsys):
    """-q and -v after the commands whose output they change; the others, and the place before any command's name,
    refuse them as options they do not take, rather than accepting them to do nothing."""
    for flag in ("-q", "-v"):
        if flag in takes.split():
            assert getattr(build_parser().parse_args([*command, flag]), {"-q": "quiet", "-v": "verbose"}[flag]) == 1
        else:
            with pytest.raises(SystemExit) as refused:
                build_parser().parse_args([*command, flag])
            assert refused.value.code == 2 and f"unrecognized arguments: {flag}" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            build_parser().parse_args([flag, *command])
    assert build_parser().parse_args(["--config", "r.yaml", *command]).config == "r.yaml"  # --config: every command, before too


@pytest.mark.slow
def test_check_exits_1_when_a_case_fails(tmp_path):
    assert autograder("check", "causal_mask", "--dir", str(ROOT / "starter")).returncode == 1
    assert autograder("check", "causal_mask", "--dir", str(SOLUTIONS)).returncode == 0


@pytest.mark.slow
def test_a_random_secret_is_announced(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_SECRET"}
    drawn = subprocess.run([sys.executable, "-m", "autograder", "grade", str(SOLUTIONS), "--component", "causal_mask"],
                           cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert drawn.returncode == 0 and "hidden inputs come from a random secret" in drawn.stderr
    given = subprocess.run([sys.executable, "-m", "autograder", "grade", str(SOLUTIONS), "--component", "causal_mask"],
                           cwd=ROOT, capture_output=True, text=True, env=dict(env, AUTOGRADER_SECRET="s"), timeout=600)
    assert given.returncode == 0 and "random secret" not in given.stderr


@pytest.mark.slow
def test_ctrl_c_ends_with_interrupted_and_no_traceback(tmp_path):
    """SIGINT while a case runs: the command says "interrupted", exits 130, results.json says so with no points,
    and no process of the run is left behind."""
    results = tmp_path / "results.json"
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(SOLUTIONS), "--component", "transformer",
                             "--results", str(results)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    # Its processes held for a second (the tier's probe, a child for an instant, is not a worker running student code).
    deadline, since = time.monotonic() + 60, None
    while time.monotonic() < deadline and not (since and time.monotonic() - since > 1.0):
        since = (since or time.monotonic()) if _children(proc.pid) else None
        time.sleep(0.1)
    assert since, f"no worker started (the grade {'is running' if proc.poll() is None else f'exited {proc.returncode}'})"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().endswith("interrupted") and "Traceback" not in err
    assert json.loads(results.read_text())["output"].endswith("grading was interrupted")
    assert not _children(proc.pid)


def _children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (the grader is a subreaper: whatever its workers leave is reparented to it)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.slow
def test_grade_of_an_empty_folder_is_one_message_and_no_points(tmp_path):
    (tmp_path / "empty").mkdir()
    results = tmp_path / "results.json"
    proc = autograder("grade", str(tmp_path / "empty"), "--results", str(results))
    message = (f"nothing in the submission can be graded: expected {', '.join(FILE_ORDER[:-1])} or {FILE_ORDER[-1]}, or "
               "a notebook named like one (ngram.ipynb), at the top level or in one folder. It is empty.")
    assert proc.returncode == 2 and not proc.stdout and proc.stderr.splitlines()[-1] == f"error: {message}"
    assert "isolation:" not in proc.stderr  # refused before the tier is probed
    data = json.loads(results.read_text())
    assert data["score"] == 0 and data["tests"] == [] and data["output"] == f"The autograder could not grade this submission: {message}"
    # a student's check, run where their files are not: the folder looked in is theirs, and named
    proc = autograder("check", cwd=tmp_path / "empty")
    assert proc.returncode == 2 and proc.stderr.splitlines()[-1] == (
        f"error: {message} (checked the folder {tmp_path / 'empty'}: run check where your files are, or give --dir)")


@pytest.mark.slow
def test_grade_accounts_for_every_file_and_grades_misnamed_ones_when_the_rubric_accepts_them(tmp_path):
    config = tmp_path / "grading.yaml"
    config.write_text((ROOT / "grading.yaml").read_text().replace("accept_misnamed: false", "accept_misnamed: true")
                      .replace("solutions: solutions", f"solutions: {SOLUTIONS}"))
    with_staff_tests(tmp_path)
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    shutil.copy(SOLUTIONS / "ngram.py", submitted / "NGram.py")
    (submitted / "notes.txt").write_text("mine")
    results = tmp_path / "results.json"
    proc = autograder("--config", str(config), "grade", str(submitted), "--component", "ngram", "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    account = ["Files in the submission:", "  NGram.py: graded: as ngram.py, though misnamed: rename `NGram.py` to `ngram.py`",
               "  notes.txt: ignored: not a component file or a notebook named like one"]
    assert "\n".join(account) in proc.stdout
    data = json.loads(results.read_text())
    assert data["score"] == data["extra_data"]["max_score"] > 0 and data["output"].endswith("\n".join(account))
    assert data["extra_data"]["files"] == [
        {"path": "NGram.py", "action": "graded", "why": "as ngram.py, though misnamed: rename `NGram.py` to `ngram.py`", "files": 1},
        {"path": "notes.txt", "action": "ignored", "why": "not a component file or a notebook named like one", "files": 1}]
