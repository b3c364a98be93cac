"""The Gradescope autograder zip, built by the command line and run as Gradescope runs it: unpacked
into a root's source/, setup.sh once (real pip, from this machine's configured indexes), then
run_autograder per submission, its results.json checked against Gradescope's results format. The zip
set up is part 1's, an assignment of its own; the whole course's zip runs in the same image."""
import dataclasses
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
import yaml
from attacks import tier
from conftest import ROOT, SOLUTIONS

from autograder.cases import TIMING
from autograder.release.bundle import grading_pins
from autograder.release.gradescope import build_zip, zip_entries, zip_name
from autograder.report import results_json
from autograder.outcome import PASSED
from autograder.rubric import RubricError, load_rubric
from autograder.runner import CaseResult, GradeRun
from autograder.submission import open_submission
from autograder.submission.reading import SubmissionError

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


def build(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "autograder", "--config", str(ROOT / "grading.yaml"), "gradescope", "build", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


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


def test_parts_are_chosen_by_number_or_name_and_name_the_zip(rubric):
    names = rubric.parts
    chosen = rubric.select(["3", names[0], "1"])
    assert [c.id for c in chosen] == [c.id for c in rubric.components if c.part in (names[0], names[2])]  # the course's order
    assert zip_name(rubric, chosen) == "autograder-part1-part3.zip"
    assert zip_name(rubric, rubric.select(["2"])) == "autograder-part2.zip"
    assert zip_name(rubric, rubric.select([])) == "autograder.zip"
    assert zip_name(rubric, rubric.select([str(n) for n in range(1, len(names) + 1)])) == "autograder.zip"
    with pytest.raises(RubricError, match=f"no part '{len(names) + 1}'; expected a number from 1 to {len(names)} or one of: "):
        rubric.select(["1", str(len(names) + 1)])


# What a zip of some parts holds apart from every other zip; the rest is what setup.sh reads, the same in every zip.
OWN_TO_THE_PARTS = ("grading.yaml", "solutions", "autograder_tests")


@pytest.mark.parametrize("parts", [["2"], ["1", "3"]], ids=["part 2", "parts 1 and 3"])
def test_a_zip_of_some_parts_grades_their_every_case_numbered_as_in_the_course(rubric, tmp_path, parts):
    """Part 2's components follow part 1's, and part 3's follow part 2's: a rubric of their own would number their cases
    (the staff tests' too) from its own first component on. The zip's rubric keeps every case of theirs, hidden and timing
    ones too, with the course's number, and only their solutions and staff tests; all else is the whole course's zip's."""
    chosen = rubric.select(parts)
    entries = zip_entries(rubric, chosen)
    for name, data in entries.items():
        if name.split("/")[0] in OWN_TO_THE_PARTS:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_bytes(data)
    cut = load_rubric(tmp_path / "grading.yaml")

    def cases(components):
        return [(c.id, c.part, [(k.number, k.name, k.check, k.points, k.visibility, k.leaderboard) for k in c.cases]) for c in components]
    assert cases(cut.components) == cases(chosen)
    assert any(k.unittest for c in chosen for k in c.cases) and any(not k.visible for c in chosen for k in c.cases)
    assert sorted(n for n in entries if n.startswith("solutions/")) == [f"solutions/{f}" for f in sorted({c.file for c in chosen})]
    assert sorted(n for n in entries if n.startswith("autograder_tests/")) == cut.staff_files
    whole = zip_entries(rubric, rubric.components)
    assert ({n: d for n, d in entries.items() if n.split("/")[0] not in OWN_TO_THE_PARTS}
            == {n: d for n, d in whole.items() if n.split("/")[0] not in OWN_TO_THE_PARTS})


def test_another_parts_files_are_ignored_not_graded(rubric, tmp_path):
    """Part 1's assignment grades ngram.py and backprop.py: part 2's lstm.py and a misnamed rnn.py are ignored, saying
    so; not graded, not copied, and no rename asked for. A submission of part 2 only has nothing to grade there."""
    part1 = dataclasses.replace(rubric, components=rubric.select(["1"]))
    folder = tmp_path / "submission"
    folder.mkdir()
    for name in ("ngram.py", "lstm.py", "rnn_final.py", "helpers.py"):
        (folder / name).write_text("x = 1\n")
    submission = open_submission(folder, tmp_path / "part1", graded=part1.files)
    other = "is not graded in this assignment, only backprop.py and ngram.py"
    assert {e.path: (e.action, e.why) for e in submission.account} == {
        "ngram.py": ("graded", ""), "lstm.py": ("ignored", f"lstm.py {other}"), "rnn_final.py": ("ignored", f"rnn.py {other}"),
        "helpers.py": ("copied", "not a component file; your graded files may import it")}
    assert submission.files == {"ngram.py"} and sorted(p.name for p in submission.dir.iterdir()) == ["helpers.py", "ngram.py"]
    whole = open_submission(folder, tmp_path / "course", graded=rubric.files)
    assert {e.path: e.action for e in whole.account} == {"ngram.py": "graded", "lstm.py": "graded", "rnn_final.py": "misnamed",
                                                         "helpers.py": "copied"}
    (folder / "ngram.py").unlink()
    with pytest.raises(SubmissionError) as refused:
        open_submission(folder, tmp_path / "nothing", graded=part1.files)
    assert "can be graded: expected backprop.py or ngram.py, or a notebook named like one (ngram.ipynb), " in str(refused.value)
    assert f"\n  lstm.py: ignored: lstm.py {other}" in str(refused.value)


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
    """Part 1's zip, for an assignment of its own, built by the command line: the zip that setup.sh sets up."""
    out = tmp_path_factory.mktemp("gradescope") / "part1.zip"
    proc = build(out.parent, "--out", str(out), "--part", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def course_zip(tmp_path_factory, rubric) -> Path:
    """The whole course's zip, built here as the command line builds it (a process less)."""
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    build_zip(rubric, out)
    return out


def unpack(zip_path: Path, root: Path) -> None:
    """`root` as Gradescope lays it out: the zip unpacked into source/ (unzip applies the entries' modes), run_autograder
    copied next to it."""
    root.chmod(0o755)  # as /autograder is: the student uid of the root tier walks through it to the venv's Python
    (root / "source").mkdir()
    subprocess.run(["unzip", "-q", str(zip_path)], cwd=root / "source", check=True)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")


@pytest.fixture(scope="module")
def setup(built_zip, env):
    """A Gradescope root of part 1's zip after setup.sh, and setup.sh's output."""
    root = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        unpack(built_zip, root)
        proc = subprocess.run([root / "source" / "setup.sh"], cwd=root / "source", env={**env, "AUTOGRADER_ROOT": str(root)},
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        yield root, proc.stdout
    finally:
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def course_root(setup, course_zip):
    """A Gradescope root of the whole course's zip, in the image set up for part 1's: setup.sh reads only what every zip
    holds alike (the scripts, the package, the pins: test_a_zip_of_some_parts_grades_...), so this root's source/ beside
    that image's venv is what the course's zip would have after its own setup.sh, without running it again."""
    root = Path(tempfile.mkdtemp(prefix="gradescope-course-"))
    try:
        unpack(course_zip, root)
        (root / "venv").symlink_to(setup[0] / "venv")
        yield root
    finally:
        shutil.rmtree(root)


def run_autograder(script: Path, root: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([script], cwd=root, env={**env, "AUTOGRADER_ROOT": str(root)}, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_zip_holds_what_grading_needs_and_a_fresh_secret(built_zip, course_zip, rubric, tmp_path):
    """Part 1's zip: the scripts, the grader, the pins, part 1's rubric, solutions and staff tests (what zip_entries gives,
    test_a_zip_of_some_parts_grades_... says what that is), a secret; built again, only the secret changes."""
    part1 = rubric.select(["1"])
    with zipfile.ZipFile(built_zip) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        content = {name: zf.read(name) for name in infos}
    assert {name.split("/")[0] for name in infos} == {*SCRIPTS, "grading.yaml", "secret.txt", "pyproject.toml", "constraints.txt",
                                                        "autograder", "solutions", "autograder_tests"}
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "autograder").rglob("*.py") if "__pycache__" not in p.parts}
    assert package | {"autograder/cases/data/corpus.txt", *(f"autograder/release/gradescope/{s}" for s in SCRIPTS)} <= set(infos)
    assert not [name for name in infos if "__pycache__" in name or name.endswith(".pyc")]
    assert {name: data for name, data in content.items() if name != "secret.txt"} == zip_entries(rubric, part1)
    assert list(yaml.safe_load(content["grading.yaml"])["components"]) == [c.id for c in part1]
    assert {name: info.external_attr >> 16 for name, info in infos.items()} == {
        name: 0o100755 if name in SCRIPTS else 0o100644 for name in infos}
    assert len(content["secret.txt"].strip()) == 64
    with zipfile.ZipFile(course_zip) as zf:  # the whole course's: its own rubric, every solution
        course = {name: zf.read(name) for name in zf.namelist()}
    assert course["grading.yaml"] == (ROOT / "grading.yaml").read_bytes()
    assert {name for name in course if name.startswith("solutions/")} == {f"solutions/{p.name}" for p in SOLUTIONS.glob("*.py")}

    proc = build(tmp_path, "--part", "1")  # named for its part
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = [k for c in part1 for k in c.cases]
    assert (f"wrote autograder-part1.zip ({len(content)} files, " in " ".join(proc.stdout.split())
            and f"the Gradescope autograder of {part1[0].part}, {len(cases)} cases worth {sum(k.points for k in cases):g} points, "
                "with a new secret" in " ".join(proc.stdout.split())), proc.stdout
    with zipfile.ZipFile(tmp_path / "autograder-part1.zip") as zf:
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
def test_run_autograder_grades_a_submission(course_root, env, rubric, required):
    root = course_root
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
def test_a_part_zip_grades_its_part_only(setup, env, rubric, required):
    """Part 1's assignment on a part 1 submission (the n-grams right, backprop a syntax error) that holds part 2's lstm.py
    too: every case of part 1 and no other, each numbered as in the course, out of part 1's points; lstm.py ignored."""
    root, _ = setup
    part1 = rubric.select(["1"])
    shutil.rmtree(root / "submission", ignore_errors=True)
    (root / "submission").mkdir()
    shutil.copy(SOLUTIONS / "ngram.py", root / "submission")
    shutil.copy(SOLUTIONS / "lstm.py", root / "submission")
    (root / "submission" / "backprop.py").write_text("def softmax(x:\n")
    proc = run_autograder(root / "run_autograder", root, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = results_of(root)  # checked against Gradescope's schema
    assert data["extra_data"]["isolation"]["tier"] == required
    assert [t["number"] for t in data["tests"]] == [k.number for c in part1 for k in c.cases]
    assert data["extra_data"]["max_score"] == sum(t["max_score"] for t in data["tests"]) == sum(k.points for c in part1 for k in c.cases)
    assert data["score"] == sum(k.points for k in rubric.component("ngram").cases)
    assert all(t["status"] == "passed" for t in data["tests"] if t["tags"][0] == "ngram")
    assert any("SyntaxError" in t["output"] for t in data["tests"] if t["tags"][0] == "backprop")
    assert {"path": "lstm.py", "action": "ignored", "why": "lstm.py is not graded in this assignment, only backprop.py and ngram.py",
            "files": 1} in data["extra_data"]["files"]
    assert {e["name"] for e in data["leaderboard"]} == {k.leaderboard.name for k in rubric.component("ngram").cases if k.leaderboard}


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
