"""The Gradescope autograder zip, built by the command line and run as Gradescope runs it: unpacked
into a root's source/, setup.sh once (real pip, from this machine's configured indexes), then
run_autograder per submission, its results.json checked against Gradescope's results format."""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jsonschema
import pytest
from attacks import tier
from conftest import ROOT, SOLUTIONS

from autograder.cases import TIMING
from autograder.release.bundle import grading_pins
from autograder.report import results_json
from autograder.outcome import PASSED
from autograder.runner import CaseResult, GradeRun

SCRIPTS = ("setup.sh", "run_autograder")
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
NUMBER = {"type": "number"}
# Gradescope's results.json (gradescope-autograders.readthedocs.io/en/latest/specs/), and nothing else. The
# top-level score may be left out only when every test has one; there is no top-level max_score.
RESULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "score": NUMBER,
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "test_output_format": FORMAT,
        "test_name_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "score": NUMBER, "max_score": NUMBER, "status": {"enum": ["passed", "failed"]},
                "name": {"type": "string"}, "name_format": FORMAT, "number": {"type": "string"},
                "output": {"type": "string"}, "output_format": FORMAT, "tags": {"type": "array", "items": {"type": "string"}},
                "visibility": VISIBILITY, "extra_data": {"type": "object"},
            },
            "additionalProperties": False,
        }},
        "leaderboard": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "value": {"type": ["number", "string"]}, "order": {"enum": ["asc", "desc"]}},
            "required": ["name", "value"],
        }},
    },
    "additionalProperties": False,
    "anyOf": [{"required": ["score"]}, {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}}],
}


def build(out: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "autograder", "--config", str(ROOT / "grading.yaml"), "gradescope", "build", "--out", str(out)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def results_of(root: Path) -> dict:
    data = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(data, RESULTS_SCHEMA)
    return data


def test_results_keep_to_gradescopes_keys_and_tag_timing_cases(rubric):
    """Every case of the rubric, as report.py writes it: the total's maximum sits in extra_data, timing cases carry `timing`,
    staff tests their @tags after the component."""
    run = GradeRun(results=[CaseResult(case, PASSED) for component in rubric.components for case in component.cases])
    data = results_json(run)
    jsonschema.validate(data, RESULTS_SCHEMA)
    assert data["extra_data"]["max_score"] == sum(c.points for comp in rubric.components for c in comp.cases) > 0
    assert any(r.case.check in TIMING for r in run.results)
    assert [t["tags"] for t in data["tests"]] == [[r.case.component, *(["timing"] if r.case.check in TIMING else []), *r.case.tags]
                                                  for r in run.results]
    assert any(r.case.tags for r in run.results)


# Wheels for setup.sh, kept between runs (and clones) so that a run downloads each pinned wheel once. setup.sh still
# installs everything itself into a venv of its own, made new in a new root each run: the cache only saves downloads.
WHEELHOUSE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autograder-tests" / "wheelhouse"


def configured_find_links() -> list[str]:
    """pip's find-links from its configuration files and environment, which PIP_FIND_LINKS would otherwise replace."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60)
    links = []
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".find-links"):
            links += [link for link in shlex.split(value.strip().strip("'\"")) if link not in links]
    return links


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """Every pin of constraints.txt that grading needs but torch (which pip finds where the machine keeps it: a copy
    would only cost time), and setuptools for the editable install's build, downloaded into WHEELHOUSE once; later
    runs find them there and download nothing (pip download skips a file it already holds)."""
    pins = [line for line in grading_pins(ROOT / "constraints.txt") if not line.startswith("torch==")]
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-input",
                           "--no-deps", "--only-binary", ":all:", "--dest", str(WHEELHOUSE), *pins, "setuptools>=68"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return WHEELHOUSE


@pytest.fixture(scope="module")
def env(wheelhouse):
    """The scripts' environment: pip's configured indexes only (this machine reaches no PyTorch index), with the
    wheelhouse as one more find-links location; as root, the scripts' own default tier (root) is the one tested,
    else the strongest this user has."""
    find_links = " ".join([*configured_find_links(), str(wheelhouse)])
    return {**os.environ, "AUTOGRADER_TORCH_INDEX": "", "PIP_FIND_LINKS": find_links,
            **({} if os.geteuid() == 0 else {"AUTOGRADER_REQUIRE_TIER": tier().name})}


@pytest.fixture(scope="module")
def required(setup) -> str:
    """The tier the scripts must reach: the strongest here once setup.sh has run (it installs bubblewrap, which can
    make the root tier available where it was not before)."""
    return tier().name


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    proc = build(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def setup(built_zip, env):
    """A Gradescope root after setup.sh: the zip unpacked into source/ (unzip applies the entries' modes),
    run_autograder copied next to it, and setup.sh's output."""
    root = Path(tempfile.mkdtemp(prefix="gradescope-"))
    root.chmod(0o755)  # as /autograder is: the student uid of the root tier walks through it to the venv's Python
    try:
        (root / "source").mkdir()
        subprocess.run(["unzip", "-q", str(built_zip)], cwd=root / "source", check=True)
        shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
        proc = subprocess.run([root / "source" / "setup.sh"], cwd=root / "source", env={**env, "AUTOGRADER_ROOT": str(root)},
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        yield root, proc.stdout
    finally:
        shutil.rmtree(root)


def run_autograder(script: Path, root: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([script], cwd=root, env={**env, "AUTOGRADER_ROOT": str(root)}, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_zip_holds_what_grading_needs_and_a_fresh_secret(built_zip, tmp_path):
    with zipfile.ZipFile(built_zip) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        content = {name: zf.read(name) for name in infos}
    assert {name.split("/")[0] for name in infos} == {*SCRIPTS, "grading.yaml", "secret.txt", "pyproject.toml", "constraints.txt",
                                                        "autograder", "solutions", "autograder_tests"}
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "autograder").rglob("*.py") if "__pycache__" not in p.parts}
    assert package | {"autograder/cases/data/corpus.txt", *(f"autograder/release/gradescope/{s}" for s in SCRIPTS)} <= set(infos)
    assert not [name for name in infos if "__pycache__" in name or name.endswith(".pyc")]
    assert {name for name in infos if name.startswith("solutions/")} == {f"solutions/{p.name}" for p in SOLUTIONS.glob("*.py")}
    assert content["grading.yaml"] == (ROOT / "grading.yaml").read_bytes()
    assert {name: info.external_attr >> 16 for name, info in infos.items()} == {
        name: 0o100755 if name in SCRIPTS else 0o100644 for name in infos}
    assert len(content["secret.txt"].strip()) == 64

    proc = build(tmp_path / "again.zip")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(tmp_path / "again.zip") as zf:
        again = {name: zf.read(name) for name in zf.namelist()}
    assert list(again) == list(content)  # the same entries in the same order
    assert [name for name in content if again[name] != content[name]] == ["secret.txt"]


@pytest.mark.slow
@pytest.mark.network
def test_setup_proves_the_tier(setup, required):
    root, output = setup
    assert f"setup.sh: isolation: {required} (" in output
    assert os.access(root / "venv" / "bin" / "autograder", os.X_OK)


@pytest.mark.slow
@pytest.mark.network
def test_run_autograder_grades_a_submission(setup, env, rubric, required):
    root, _ = setup
    shutil.rmtree(root / "submission", ignore_errors=True)
    (root / "submission").mkdir()
    shutil.copy(SOLUTIONS / "ngram.py", root / "submission")
    shutil.copy(SOLUTIONS / "lstm.py", root / "submission")
    (root / "submission" / "backprop.py").write_text("def softmax(x:\n")  # a syntax error; the rest missing
    proc = run_autograder(root / "run_autograder", root, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = results_of(root)  # checked against Gradescope's schema, its leaderboard too
    assert data["extra_data"]["isolation"]["tier"] == required
    assert data["extra_data"]["max_score"] == sum(c.points for comp in rubric.components for c in comp.cases)
    untimed = [t for t in data["tests"] if t["tags"][0] in ("ngram", "lstm") and "timing" not in t["tags"]]
    assert all(t["status"] == "passed" for t in untimed) and len(untimed) > len(rubric.component("ngram").cases)
    assert any("SyntaxError" in t["output"] for t in data["tests"] if t["tags"] == ["backprop"])
    # The correct components rank: the n-gram staff test's perplexity, lstm_forward's speed-up; no other component does.
    board = {entry["name"]: entry for entry in data["leaderboard"]}
    assert set(board) == {"held-out perplexity", "LSTM speed-up"}
    assert board["held-out perplexity"]["order"] == "asc" and board["LSTM speed-up"]["order"] == "desc"
    assert board["LSTM speed-up"]["value"] > 0 and board["held-out perplexity"]["value"] > 1


@pytest.mark.slow
@pytest.mark.network
def test_a_grader_that_refuses_keeps_its_own_results(setup, env):
    """No submission: the grader writes why it could not grade, and run_autograder leaves that alone."""
    root, _ = setup
    shutil.rmtree(root / "submission", ignore_errors=True)
    proc = run_autograder(root / "run_autograder", root, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = results_of(root)
    assert data["score"] == 0 and "does not exist" in data["output"]


@pytest.mark.slow
@pytest.mark.network
def test_without_a_venv_the_results_still_say_zero(setup, env, tmp_path):
    """setup.sh never ran here: the grader cannot start, so run_autograder writes the zero score itself,
    over what an earlier run left."""
    root, _ = setup
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "results.json").write_text('{"score": 100}')
    proc = run_autograder(root / "run_autograder", tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = results_of(tmp_path)
    assert data["score"] == 0 and data["tests"] == []
    assert "failed before it could grade" in data["output"] and "exit status 127" in data["output"]
