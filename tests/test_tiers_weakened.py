"""Issue 41, observation 8: isolation never weakens behind anyone's back. Hiding the grader's files from the student uid
(root tier) never touches a Python environment, and gives every mode back when the grader leaves; a tier weaker than the
one this machine gave before is said first, and in results.json, with its cause and the command that mends it."""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from attacks import require_tier
from conftest import ROOT, SOLUTIONS

from autograder.sandbox.host import tiers
from autograder.sandbox.host.tiers import STUDENT_ID_BASE, Isolation, Tier, grader_files, hide, unhide


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> Path:
    """The grader's per-user state (the tier remembered, the modes hidden) in a folder of the test's own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "autograder"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def modes(folder: Path) -> dict[Path, int]:
    return {p: mode(p) for p in [folder, *folder.rglob("*")]}


@pytest.fixture
def project(tmp_path) -> Path:
    """A rubric's folder as the observation had it: the grader's files, the project's own .venv, and another Python
    environment beside them (the one another run came from, or the project's own seen from that run)."""
    root = tmp_path / "project"
    (root / "solutions").mkdir(parents=True)
    (root / "solutions" / "ngram.py").write_text("# BEGIN SOLUTION\n")
    (root / "grading.yaml").write_text("components: {}\n")
    for env in (".venv", "other-env"):
        (root / env / "bin").mkdir(parents=True)
        (root / env / "bin" / "python3").write_text("")
        (root / env / "lib").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a venv; other-env is an installation (bin/python*)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def root_tier(hidden, bwrap=None) -> Tier:
    return Tier("root", student_id=STUDENT_ID_BASE + os.getpid(), hidden=tuple(hidden), bwrap=bwrap)


def ours(project: Path) -> list[Path]:
    """grader_files of `project`, less the grader's own package: a test hides nothing of the real project."""
    return [p for p in grader_files(project, project / "solutions", []) if p.is_relative_to(project)]


def test_hiding_never_touches_a_python_environment_and_every_mode_comes_back(project):
    """The observation: a run from another environment hid the project's .venv for good, and every later run fell
    back to the same-user tier. Now no Python environment in the rubric's folder is hidden, what is hidden is hidden
    while the grader runs, and each mode comes back when it leaves."""
    before = modes(project)
    hidden = ours(project)
    assert {p.name for p in hidden} == {"solutions", "grading.yaml"}
    with Isolation(root_tier(hidden)):
        during = modes(project)
        assert {p for p in before if during[p] != before[p]} == set(hidden)
        assert all(during[p] & 0o007 == 0 for p in hidden)
    assert modes(project) == before


def test_at_the_root_tier_with_bubblewrap_no_mode_changes(project):
    """bubblewrap's mounts leave the grader's files out of the worker's sight: nothing is left to chmod."""
    before = modes(project)
    with Isolation(root_tier(ours(project), bwrap="/usr/bin/bwrap")):
        assert modes(project) == before
    assert modes(project) == before


def test_one_grader_ending_never_bares_what_another_still_hides(project, state):
    """Two graders hide the same files (a batch's jobs, two `grade` at once): the first to end leaves them hidden; the
    last gives back each mode it took, but not one someone changed since; a grader killed holds nothing."""
    before = modes(project)
    solutions, rubric = project / "solutions", project / "grading.yaml"
    hide((solutions, rubric), "first")
    hide((solutions, rubric), "second")
    unhide("first")
    assert mode(solutions) == 0o750 and mode(rubric) == 0o640
    rubric.chmod(0o600)  # a TA's own change while hidden
    record = json.loads((state / "hidden.json").read_text())
    record["holders"]["killed"] = [os.getpid(), -1]  # this pid, but another process's start: it ended long ago
    (state / "hidden.json").write_text(json.dumps(record))
    unhide("second")
    assert mode(solutions) == before[solutions] and mode(rubric) == 0o600
    assert json.loads((state / "hidden.json").read_text()) == {"holders": {}, "modes": {}}


def test_a_tier_weaker_than_before_says_when_why_and_how_to_mend_it(tmp_path, monkeypatch, state):
    """The strongest tier is remembered per machine and user; a weaker one later carries what it was, the cause (the
    probes' notes) and the mend, in its warning and its record (results.json's isolation)."""
    strong, cause = root_tier(()), "root tier unavailable: Python cannot start as an unprivileged uid (Permission denied)"
    weak = Tier("same-user", (cause,))
    venv = tmp_path / "venv"
    venv.mkdir()  # what the observation left: the venv the workers start from, closed to others
    venv.chmod(0o750)
    monkeypatch.setattr(tiers, "python_paths", lambda hidden: (venv,))
    assert tiers.compared_with_before(strong, "/usr/bin/bwrap") is None  # remembered, as the strongest yet
    assert tiers.compared_with_before(strong, "/usr/bin/bwrap") is None
    weakened = tiers.compared_with_before(weak, "/usr/bin/bwrap")
    assert weakened.was == "root" and cause in weakened.cause and weakened.remembered == str(state / "tiers.json")
    assert weakened.mend == (f"chmod o+rx {venv}" if os.geteuid() == 0 else "run the grader as root, as before")
    tier = Tier("same-user", (cause,), weakened=weakened)
    assert tier.warning.startswith("isolation is weaker than before: same-user (") and weakened.mend in tier.warning
    assert Isolation(tier).record()["weakened"] == {"was": "root", "since": weakened.since, "cause": cause,
                                                    "mend": weakened.mend, "remembered": str(state / "tiers.json")}
    assert "weakened" not in Isolation(strong).record()


def closed_env(folder: Path) -> Path:
    """A Python environment as another one of this project (a venv with the project installed), closed to others as
    the observation's .venv was: its site-packages reach the project's through a link inside it, so Python, numpy and
    the grader start for root, but the student uid of the root tier cannot import numpy from it."""
    env = folder / "env"
    site = env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    site.mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    home = Path(os.path.realpath(sys.executable)).parent
    (env / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n")
    shared = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)][0]
    (site / "shared").symlink_to(shared)
    (site / "project.pth").write_text(f"import site; site.addsitedir({str(site / 'shared')!r})\n")
    env.chmod(0o700)
    return env


@pytest.mark.slow
def test_a_grade_weaker_than_before_says_so_first_and_in_results_and_its_mend_mends_it(tmp_path, state):
    """The observation end to end: this machine gave the root tier; grading from a Python whose folder lost its
    permissions for others falls back to same-user, and says so on its first lines and in results.json, with the
    chmod that mends it; after that chmod, the root tier is back."""
    here = require_tier("root")  # remembered in the test's state folder
    if here.bwrap is None:  # without it, the folders above the environment (pytest's, closed to others) count too
        pytest.skip("needs bubblewrap at the root tier")
    env = closed_env(tmp_path)
    results = tmp_path / "results.json"
    proc = subprocess.run([env / "bin" / "python", "-m", "autograder", "grade", str(SOLUTIONS), "--component", "causal_mask",
                           "--results", str(results)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    warned = next(i for i, line in enumerate(lines) if line.startswith("warning: isolation is weaker than before: same-user"))
    assert warned < 3 and lines[warned + 1].startswith("isolation: same-user"), proc.stderr
    isolation = json.loads(results.read_text())["extra_data"]["isolation"]
    assert isolation["tier"] == "same-user" and isolation["weakened"]["was"].startswith(here.name)
    assert isolation["weakened"]["mend"] == f"chmod o+rx {env}" and "numpy" in isolation["weakened"]["cause"]
    assert f"To mend: chmod o+rx {env}." in lines[warned]
    env.chmod(0o755)  # the mend
    probe = "from autograder.sandbox.host.tiers import *; t = choose_tier([]); print(t.name, t.bwrap is not None, t.warning)"
    done = subprocess.run([env / "bin" / "python", "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == [here.name, str(here.bwrap is not None), "None"], done.stdout + done.stderr
