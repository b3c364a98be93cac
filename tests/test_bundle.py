"""The student bundle: what `autograder release --out` writes, that it leaks nothing, and that its
visible cases, replayed from the recording, say exactly what the grader says."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
import yaml
from packaging.utils import canonicalize_name
from conftest import MISTAKES as CATALOGUE
from conftest import ROOT, SOLUTIONS, grade_folder, isolation, solutions_with
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

import bundle_probe
from autograder.cases import BUILDS_ON, FILES, TIMING
from autograder.rubric import load_rubric
from autograder.expected import ROUNDED, Diverged, Live, Recorder, Replay
from autograder.reference import Reference
from autograder import __version__
from autograder.release import BUNDLE_OWN
from autograder.release.bundle import DISTRIBUTION, student_pins, student_requirements
from autograder.release.notebooks import Handout, write_notebook
from autograder.runner import grade
from autograder.sandbox.host.tiers import Tier
from autograder.submission import open_submission
from autograder.submission.notebooks import CHECK_TAG
from autograder.verify import one_per_file, write_edits

# The bundle's own files at its top (release.BUNDLE_OWN, which `check` leaves out of its account), and the notebooks.
RELEASED = {*BUNDLE_OWN, "notebooks"}
# A Python that stands for a laptop without Linux loads tests/not_linux/not_linux.py at start-up, through these .pth lines.
NOT_LINUX = ROOT / "tests" / "not_linux"
NOT_LINUX_PTH = (str(NOT_LINUX), "import not_linux")


def release(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "release", "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def in_bundle(bundle: Path, *args: str) -> subprocess.CompletedProcess:
    """A command run the way a student runs it: from the bundle, with the bundle's own grader package."""
    return subprocess.run([sys.executable, *args], cwd=bundle, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The whole course's bundle."""
    out = tmp_path_factory.mktemp("release") / "bundle"
    proc = release(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def release_of_part1(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The course's release per part, of part 1 only: its folder and what the command printed."""
    out = tmp_path_factory.mktemp("release")
    proc = release(out, "--each-part", "--part", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


@pytest.fixture(scope="module")
def part1(release_of_part1):
    """Part 1's bundle."""
    return release_of_part1[0] / "part1" / "bundle"


@pytest.mark.slow
def test_the_release_per_part_writes_each_parts_bundle_and_gradescope_zip(release_of_part1, rubric):
    out, proc = release_of_part1
    part1 = [c for c in rubric.components if c.part == rubric.components[0].part]
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/*")) == ["part1/autograder.zip", "part1/bundle"]
    with zipfile.ZipFile(out / "part1" / "autograder.zip") as zf:
        assert list(yaml.safe_load(zf.read("grading.yaml"))["components"]) == [c.id for c in part1]
    printed = " ".join(proc.stdout.split())
    assert printed.startswith(f"{out / 'part1'}: {part1[0].part} wrote the student bundle for {', '.join(c.id for c in part1)} "
                              f"to {out / 'part1' / 'bundle'}: "), printed
    assert "replayed against the reference: all pass" in printed
    assert f"wrote {out / 'part1' / 'autograder.zip'} (" in printed and f"the Gradescope autograder of {part1[0].part}, " in printed
    assert printed.endswith(f"released 1 part to {out}: give each part's bundle/ to its students, and upload its autograder.zip "
                            "as the autograder of its Gradescope assignment")


@pytest.mark.slow
def test_the_bundle_holds_starter_handouts_notebooks_and_the_visible_cases_only(bundle, rubric):
    files = {c.file for c in rubric.components}
    assert {p.name for p in bundle.iterdir()} == RELEASED | files | {"autograder_tests"}
    shipped = (bundle / "autograder_tests" / "test_ngram_extra.py").read_text()  # a staff test file, its visible tests only
    assert "def test_add_k_rows_sum_to_one" in shipped and "def test_unseen_history_is_uniform" not in shipped
    assert "\n\n\n\n" not in shipped  # hidden tests are left out, not blanked: no run of empty lines where they were
    for file in files:
        assert (bundle / file).read_text() == (ROOT / "starter" / file).read_text()
        nbformat.validate(nbformat.read(bundle / "notebooks" / file.replace(".py", ".ipynb"), as_version=4))
    assert {p.name for p in (bundle / "handouts").iterdir()} == {f"{c.id}.md" for c in rubric.components}
    spec = yaml.safe_load((bundle / "grading.yaml").read_text())
    assert spec["solutions"] is None and spec["expected"] == "expected.bin"
    released = load_rubric(bundle / "grading.yaml")
    for component in rubric.components:
        want = [(c.number, c.name) for c in component.cases if c.visible and c.check not in TIMING]
        got = released.component(component.id)
        assert [(c.number, c.name) for c in got.cases] == want
        assert got.not_here == len(component.cases) - len(want)


@pytest.mark.slow
def test_the_bundle_holds_the_check_code_of_its_parts_and_no_oracle(part1, bundle):
    """The grader-only oracles and mistake simulators never ship; of the case modules, only those of the released
    checks (and what they import) do: part 1's bundle holds no attention or LSTM checks, and no bundle the timing ones."""
    for folder, modules in ((part1, {"__init__", "common", "ngram", "backprop"}),
                            (bundle, {"__init__", "common", "generation", *FILES})):  # every component's module, no `speed`
        assert not (folder / "autograder" / "oracles").exists()
        assert {p.stem for p in (folder / "autograder" / "cases").glob("*.py")} == modules


def solution_bodies() -> dict[str, str]:
    """Every solution function's body, docstring dropped, in ast.unparse's normal form."""
    bodies = {}
    for path in sorted(SOLUTIONS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                text = "\n".join(ast.unparse(s) for s in body)
                if "NotImplementedError" not in text and len(text) > 20:
                    bodies[f"{path.name}:{node.name}"] = text
    return bodies


def solution_lines() -> set[str]:
    """The lines between the solution markers that no public text holds: the starter's docstrings and the
    handouts state some formulas on purpose (c_t = f * c_prev + i * g). The grader's own code is not exempt."""
    public = "\n".join(p.read_text() for folder in ("starter", "assignments") for p in (ROOT / folder).rglob("*.[pm][yd]"))
    lines = set()
    for path in SOLUTIONS.glob("*.py"):
        for region in re.findall(r"# BEGIN SOLUTION\n(.*?)# END SOLUTION", path.read_text(), re.S):
            lines |= {line.split("  #")[0].strip() for line in region.splitlines()}
    return {line for line in lines if len(line) >= 24 and not line.startswith("#") and line not in public}


def bundle_texts(bundle: Path) -> dict[str, tuple[str, list[str]]]:
    """Every file a student can read in the bundle, by path: (its text, the Python sources in it), a
    notebook as its cells' sources."""
    texts = {}
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        name = str(path.relative_to(bundle))
        if path.suffix == ".ipynb":
            cells = nbformat.read(path, as_version=4).cells
            texts[name] = ("\n".join(c.source for c in cells), [c.source for c in cells if c.cell_type == "code"])
        else:
            text = path.read_bytes().decode("utf-8", errors="replace")
            texts[name] = (text, [text] if path.suffix == ".py" else [])
    return texts


def function_bodies(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {"\n".join(ast.unparse(s) for s in f.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)))
            for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def leaks(bundle: Path) -> list[str]:
    """Solution function bodies (as code, in any Python file or notebook cell) and solution lines (as text,
    anywhere, the recording included) found in the bundle."""
    bodies, lines, found = solution_bodies(), solution_lines(), []
    for name, (text, sources) in bundle_texts(bundle).items():
        held = set().union(*(function_bodies(source) for source in sources))
        found += [f"{name} holds the body of {where}" for where, body in bodies.items() if body in held]
        found += [f"{name} holds the solution line {line!r}" for line in lines if line in text]
    return found


@pytest.mark.slow
def test_no_solution_code_appears_anywhere_in_the_bundle(bundle):
    assert len(solution_bodies()) >= 30 and len(solution_lines()) >= 100  # the scan has something to look for
    assert leaks(bundle) == []


@pytest.mark.slow
def test_the_leak_scan_finds_a_planted_solution(bundle, tmp_path):
    """The scan above can fail: a solution function pasted into a notebook, or one solution line into a handout."""
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    notebook = nbformat.read(copy / "notebooks" / "lstm.ipynb", as_version=4)
    solution = (SOLUTIONS / "lstm.py").read_text()
    notebook.cells.append(nbformat.v4.new_code_cell(solution[solution.index("def lstm_step"):solution.index("def lstm_forward")]))
    nbformat.write(notebook, copy / "notebooks" / "lstm.ipynb")
    line = sorted(solution_lines())[0]
    with open(copy / "handouts" / "ngram.md", "a") as handout:
        handout.write(f"\n    {line}\n")
    found = leaks(copy)
    assert any("lstm.py:lstm_step" in f for f in found), found
    assert any(repr(line) in f for f in found), found


@pytest.mark.slow
def test_check_in_the_bundle_fails_the_starter_cleanly(bundle, rubric):
    proc = in_bundle(bundle, "-m", "autograder", "check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "grader itself failed" not in proc.stdout and "Traceback" not in proc.stderr
    for component in rubric.components:
        visible = sum(c.points for c in component.cases if c.visible and c.check not in TIMING)
        assert f"{component.id}: 0 / {visible:g}" in proc.stdout


def readme_block(bundle: Path, heading: str) -> list[str]:
    """The lines of the first code block under `heading` in the bundle's README, comments dropped."""
    block = re.search(rf"## {heading}[^\n]*\n\n.*?```\n(.*?)```", (bundle / "README.md").read_text(), re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines()]


# ---- the student's install: one command, and `check` on the PATH ---------------------------------------------------

REFUSED = '''import sys
class Refused:
    """Stands for modules that are not installed."""
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in MODULES:
            raise ModuleNotFoundError(f"No module named {name!r} (" + WHY + ")", name=name)
sys.meta_path.insert(0, Refused())
'''


def refusing(modules, why: str) -> str:
    """One line, for a .pth file or `python -c`, after which importing any of `modules` (top-level names) fails as the
    import of a module that is not installed does, saying `why`."""
    return "import sys; exec(" + repr(REFUSED.replace("MODULES", repr(set(modules))).replace("WHY", repr(why))) + ")"


def pinned(requirements: Path) -> set[str]:
    """The distributions a requirements file pins, by canonical name."""
    return {canonicalize_name(line.split("==")[0]) for line in requirements.read_text().splitlines() if "==" in line}


def typed(cwd: Path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`script` run by bash in `cwd`, line by line as typed, stopping at a failure; `python3` is the Python this
    project's venv was made from."""
    python3 = f"python3() {{ {shlex.quote(sys._base_executable)} \"$@\"; }}\n"
    return subprocess.run(["bash", "-ec", python3 + script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def student_env(**settings: str) -> dict[str, str]:
    """A student's terminal: no settings of this machine's pip or Python, and no pytest plugin of the staff's tools
    (xdist, hypothesis), which a student venv sees here through this project's packages; wide, for the tables."""
    own = {name: value for name, value in os.environ.items()
           if not name.startswith("PIP_") and name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**own, "PIP_CONFIG_FILE": os.devnull, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "COLUMNS": "200", **settings}


def make_student_venv(bundle: Path, extra_pth_lines: Iterable[str] = ()) -> subprocess.CompletedProcess:
    """The README's macOS and Linux set-up run as written in `bundle`, offline; pip's run. After `python3 -m venv .venv`,
    a .pth file in the new venv puts this project's packages ahead of the venv's own (Python 3.11's venv brings
    setuptools 65.5, older than torch's setuptools>=77.0.3 and unable to build the bundle without `wheel`: a student's
    pip fetches a newer one), so that every pin is met and nothing downloads; refuses the modules of every distribution
    that a student's install would not hold; then holds `extra_pth_lines`. The console scripts of the pins are written
    as pip writes them (`pytest`). Then `pip install -r requirements.txt`, with no index and no build isolation (the
    build takes setuptools from this project's venv)."""
    make, *install = readme_block(bundle, "Set up: macOS and Linux")
    made = typed(bundle, make, student_env())
    assert made.returncode == 0, made.stdout + made.stderr
    venv = bundle / ".venv"
    site = next((venv / "lib").glob("python3*/site-packages"))
    pins = pinned(bundle / "requirements.txt")
    kept = pins | {"pip", "setuptools", "autograder"}  # the venv's own, and the grader, which the bundle brings
    absent = {module for module, dists in metadata.packages_distributions().items()
              if not any(canonicalize_name(d) in kept for d in dists)}
    ours = sysconfig.get_path("purelib")
    (site / "zz_student_venv.pth").write_text("\n".join([
        f"import sys; sys.path.insert(sys.path.index({str(site)!r}), {ours!r})",
        refusing(absent, "a student's install has none"), *extra_pth_lines]) + "\n")
    for command in metadata.entry_points(group="console_scripts"):
        if canonicalize_name(command.dist.name) in pins:
            script = venv / "bin" / command.name
            script.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {command.module} import {command.attr.split('.')[0]}\n"
                              f"sys.exit({command.attr}())\n")
            script.chmod(0o755)
    return typed(bundle, "\n".join(install), student_env(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1"))


def as_student(bundle: Path, cwd: Path, command: str) -> subprocess.CompletedProcess:
    """`command` typed in a new terminal in `cwd`, the venv of `bundle` activated as the README says."""
    proc = typed(cwd, f"source {shlex.quote(str(bundle / '.venv' / 'bin' / 'activate'))}\n{command}", student_env())
    assert "Error processing line" not in proc.stderr, proc.stderr  # a .pth of make_student_venv's failed: the venv is not what it stands for
    return proc


@pytest.fixture(scope="module")
def student_venv(part1, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of part 1's bundle set up by its README's commands (make_student_venv), and pip's run, on a laptop
    without Linux: what runs in its venv finds nothing of Linux's (tests/not_linux/not_linux.py), as on macOS or
    Windows, so its `check` and `pytest` grade in the portable tier."""
    bundle = tmp_path_factory.mktemp("student") / "part1"
    shutil.copytree(part1, bundle)
    pip = make_student_venv(bundle, NOT_LINUX_PTH)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return bundle, pip


def account(stdout: str) -> set[str]:
    """The files `check` lists as the submission's."""
    listed = stdout.split("Files in the submission:")[1].split("These are the")[0]
    return {line.split(":")[0].strip() for line in listed.strip().splitlines()}


@pytest.mark.slow
def test_one_command_installs_the_pins_of_what_students_need_and_the_bundle(part1, student_venv, tmp_path):
    """requirements.txt: PyTorch's CPU index, the pins of what a student's install takes (the grader's dependencies and
    pytest, with everything they require: release.bundle.student_pins), none of the staff's tools, and the bundle
    itself, editable. The README's set-up, run offline over this project's packages, met every pin and installed the
    bundle alone, and its `check` is the bundle's; pip refuses a pin that is not met, so it resolves them, skipping none.
    Not exercised, as nothing may download in tests: an install from PyPI and PyTorch's CPU index. That pip then takes
    torch 2.13.0+cpu from the extra index is PEP 440's order (a local version sorts above its public one)."""
    text = (part1 / "requirements.txt").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "--extra-index-url https://download.pytorch.org/whl/cpu" and lines[-1] == "-e ."
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert lines[1:-1] == student_pins(ROOT / "constraints.txt", student_requirements(project))
    pins = pinned(part1 / "requirements.txt")
    assert {"numpy", "torch", "pytest", "packaging", "jinja2"} <= pins  # packaging: pytest requires it; Jinja2: torch does
    assert not pins & {"matplotlib", "copydetect", "pytest-xdist", "ray", "hypothesis", "execnet", "pillow"}
    assert "make" not in " ".join(line for line in text.splitlines() if line.startswith("#")).lower()  # the bundle has no Makefile
    bundle, pip = student_venv
    assert re.findall(r"^(?:Installing collected packages: |Successfully installed ).*", pip.stdout, re.M) == [
        f"Installing collected packages: {DISTRIBUTION}", f"Successfully installed {DISTRIBUTION}-{__version__}"], pip.stdout
    grader = as_student(bundle, tmp_path, "python -c 'import autograder.commands as c; print(c.PROJECT_ROOT)'")
    assert grader.stdout.strip() == str(bundle), grader.stdout + grader.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "requirements.txt").write_text(re.sub(r"^numpy==.*$", "numpy==1.0.0", text.replace("-e .\n", ""), flags=re.M))
    refused = as_student(bundle, other, "pip install --dry-run --no-index --quiet -r requirements.txt")
    assert refused.returncode != 0 and "numpy==1.0.0" in refused.stderr, refused.stdout + refused.stderr


@pytest.mark.slow
def test_check_grades_the_folder_it_runs_in_or_the_one_it_is_given(student_venv, tmp_path):
    """`check`, on the PATH of the set-up's venv, runs anywhere: run in notebooks/ it grades the notebooks there, and
    `check --dir` grades the notebooks from an unrelated folder; the account lists the notebooks alone."""
    bundle, _ = student_venv
    points = {c.id: sum(k.points for k in c.cases) for c in load_rubric(bundle / "grading.yaml").components}
    for cwd, command in ((bundle / "notebooks", "check"), (tmp_path, f"check --dir {shlex.quote(str(bundle / 'notebooks'))}")):
        proc = as_student(bundle, cwd, command)
        assert proc.returncode == 1 and "Not implemented yet" in proc.stdout, (command, proc.stdout[-2000:], proc.stderr[-2000:])
        assert f"ngram: 0 / {points['ngram']:g}" in proc.stdout and f"backprop: 0 / {points['backprop']:g}" in proc.stdout
        assert account(proc.stdout) == {"ngram.ipynb", "backprop.ipynb"}, proc.stdout


@pytest.mark.slow
def test_the_readme_commands_run_as_written(part1, student_venv):
    """The set-up blocks hold the commands the student_venv fixture ran (Windows' block its own venv and activate lines,
    and the same pip line), and every command of "Check your work" runs as written in the set-up's venv, in the bundle's
    folder: on the starter each exits 1 with the grader's messages alone; `check ngram` checks ngram alone, `pytest -k
    test_ngram` runs ngram's cases and no others, `pytest -k pad_sentence` those of that function. On the solutions
    `check` and `pytest` exit 0, and `check` lists the student's files, not the bundle's own (its grader, handouts,
    rubric, the venv and what installing left, pytest's cache)."""
    bundle, _ = student_venv
    unix = readme_block(bundle, "Set up: macOS and Linux")
    assert unix == ["python3 -m venv .venv", "source .venv/bin/activate", "pip install -r requirements.txt"]
    assert readme_block(bundle, "Set up: Windows") == ["py -m venv .venv", r".venv\Scripts\activate", unix[-1]]
    assert 'pip install -e ".[jupyter]"' in (bundle / "README.md").read_text()
    commands = readme_block(bundle, "Check your work")
    assert commands == ["check", "check ngram", "pytest", "pytest -k test_ngram", "pytest -k pad_sentence"]
    rubric = load_rubric(bundle / "grading.yaml")
    ngram, backprop = (len(rubric.component(c).cases) for c in ("ngram", "backprop"))
    picked = {"test_ngram": ngram, "pad_sentence": sum("pad_sentence" in c.name for c in rubric.component("ngram").cases)}
    points = {c.id: sum(k.points for k in c.cases) for c in rubric.components}
    for command in commands:
        starter = as_student(bundle, bundle, command)
        assert starter.returncode == 1, (command, starter.stdout[-2000:], starter.stderr[-2000:])
        assert "Not implemented yet" in starter.stdout and "CaseResult(" not in starter.stdout and "Traceback" not in starter.stdout
        if "-k" in command:
            n = picked[command.split()[-1]]
            assert f"{n} failed, {ngram + backprop - n} deselected" in starter.stdout, (command, starter.stdout[-2000:])
        elif command == "check ngram":
            assert f"ngram: 0 / {points['ngram']:g}" in starter.stdout and "backprop:" not in starter.stdout, starter.stdout
    try:
        for name in ("ngram.py", "backprop.py"):
            shutil.copy(SOLUTIONS / name, bundle / name)
        checked, tested = (as_student(bundle, bundle, command) for command in ("check", "pytest"))
    finally:  # the other tests of the fixture's bundle check the starter
        for name in ("ngram.py", "backprop.py"):
            shutil.copy(part1 / name, bundle / name)
    assert checked.returncode == 0, (checked.stdout[-2000:], checked.stderr[-2000:])
    for component in ("ngram", "backprop"):
        assert f"{component}: {points[component]:g} / {points[component]:g}" in checked.stdout, checked.stdout[-2000:]
    assert account(checked.stdout) == {"ngram.py", "backprop.py", "notebooks/ngram.ipynb", "notebooks/backprop.ipynb"}, checked.stdout
    assert tested.returncode == 0 and f"{ngram + backprop} passed" in tested.stdout, (tested.stdout[-2000:], tested.stderr[-2000:])
    for proc in (starter, checked):  # without Linux: the portable tier, said once
        assert (proc.stdout + proc.stderr).count("No sandbox here (") == 1, proc.stderr
    assert tested.stdout.count("No sandbox here (") == 1, tested.stdout


def test_grade_takes_the_cases_asked_for_and_those_they_build_on(rubric, tmp_path):
    """grade's case_numbers (the bundle's pytest gives the cases it selects): those cases, in the rubric's order, with the
    visible cases of the checks they build on, so that a failure still names its cause first (runner._causes_first); a
    component with none of them is not graded, and a visible case left out is not counted as hidden. Of the components
    asked for, nothing is submitted, so no worker starts; backprop.py is, and none of its cases is asked for."""
    pad = next(k for k in rubric.component("ngram").cases if k.name.startswith("pad_sentence"))
    lm = next(k for k in rubric.component("transformer").cases if k.check == "transformer.lm")
    parts = [k.number for k in rubric.component("transformer").cases if k.visible and k.check in BUILDS_ON[lm.check]]
    (tmp_path / "submitted").mkdir()
    shutil.copy(ROOT / "starter" / "backprop.py", tmp_path / "submitted")
    runs = [grade_folder(rubric, tmp_path / "submitted", tmp_path / str(n), Tier("same-user"), case_numbers=numbers,
                         visible_only=True) for n, numbers in enumerate(({pad.number, lm.number}, set()))]
    assert len(parts) >= 4 and [r.case.number for r in runs[0].results] == [pad.number, *parts, lm.number]
    assert runs[1].results == [] and runs[0].hidden_not_run == runs[1].hidden_not_run > 0
    assert runs[0].isolation["held"] == {}  # what a started worker held: none started, not even backprop's


# A pytest plugin (-p) that records what `pytest` in a bundle imported and graded: whether torch was imported when
# collecting ended and when the session did, and the number of each case run in a worker (every case goes through
# runner.run_case, looked up where it runs, so this sees the cases graded whenever the test file imported `grade`).
RECORDER = """import json, os, sys
import pytest

RAN, SEEN = [], {}


def pytest_collection_finish(session):
    SEEN["collected"] = "torch" in sys.modules


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    import autograder.runner as runner
    if not hasattr(runner.run_case, "recorded"):
        real = runner.run_case

        def run_case(case, *args, **kwargs):
            RAN.append(case.number)
            return real(case, *args, **kwargs)

        run_case.recorded = True
        runner.run_case = run_case


def pytest_sessionfinish(session):
    SEEN["finished"] = "torch" in sys.modules
    with open(os.environ["RECORD"], "w") as f:
        json.dump({**SEEN, "ran": RAN}, f)
"""


@pytest.mark.slow
def test_pytest_k_grades_the_cases_it_selects_alone_and_imports_no_torch_they_do_not_need(part1, tmp_path):
    """`pytest -k pad_sentence` in a bundle grades those three cases, each once, not the rest of ngram's; collecting
    imports the rubric, not the grader or torch, and ngram's cases need no torch, so grading them imports none either."""
    (tmp_path / "recorder.py").write_text(RECORDER)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), RECORD=str(tmp_path / "record.json"), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-k", "pad_sentence", "-p", "no:cacheprovider", "-p", "recorder"],
                          cwd=part1, env=env, capture_output=True, text=True, timeout=300)
    rubric = load_rubric(part1 / "grading.yaml")
    picked = [c.number for c in rubric.component("ngram").cases if "pad_sentence" in c.name]
    deselected = sum(len(c.cases) for c in rubric.components) - len(picked)
    assert len(picked) == 3 and f"3 failed, {deselected} deselected" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads((tmp_path / "record.json").read_text()) == {"collected": False, "finished": False, "ran": picked}


@pytest.mark.slow
def test_the_grader_imports_and_check_starts_without_the_staffs_libraries(tmp_path):
    """The class report's and the cluster's libraries are the staff's: with matplotlib, copydetect, Jinja2 and Ray
    refused, autograder.cli imports and `check` runs up to its files (here a folder that does not exist: status 2)."""
    script = "\n".join([refusing({"matplotlib", "copydetect", "jinja2", "ray"}, "refused"),
                        "import sys", "from autograder.cli import check_main", "sys.argv[1:] = ['--dir', 'missing']",
                        "sys.exit(check_main())"])
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "missing does not exist" in proc.stderr, proc.stdout + proc.stderr


def run_cell(notebook: Path, cwd: Path, *options: str) -> subprocess.CompletedProcess:
    """A notebook's check cell run by this Python with `options`, not IPython (so what a kernel ran is not compared), in
    the folder the notebook was opened from."""
    cell = nbformat.read(notebook, as_version=4).cells[-1]
    assert cell.metadata.tags == [CHECK_TAG]
    return subprocess.run([sys.executable, *options, "-c", cell.source], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, COLUMNS="200"))


def solution_notebook(bundle: Path, folder: Path) -> Path:
    """ngram.ipynb in `folder`, as the release writes it, with the solution's code in its cells."""
    folder.mkdir(exist_ok=True)
    return write_notebook(folder, "ngram.py", (SOLUTIONS / "ngram.py").read_text(),
                          [Handout("ngram", "N-grams", (bundle / "handouts" / "ngram.md").read_text())])


@pytest.mark.slow
def test_the_notebook_check_cell_finds_its_bundle_and_fails_visibly_when_it_cannot_check(part1, tmp_path):
    """From the notebooks folder, the bundle's root or a folder below, the cell checks the saved notebooks/ngram.ipynb;
    a failing case is shown, not raised; outside a bundle, under a Python without the grader, or when the check cannot
    run (status 2), the cell raises, and when the grader itself fails (status 3) it says that is not the student's code."""
    bundle = tmp_path / "bundle"
    shutil.copytree(part1, bundle)
    ngram = solution_notebook(bundle, bundle / "notebooks")
    (bundle / "notebooks" / "drafts").mkdir()
    points = {c.id: sum(k.points for k in c.cases) for c in load_rubric(bundle / "grading.yaml").components}
    for cwd in (bundle / "notebooks", bundle, bundle / "notebooks" / "drafts"):
        proc = run_cell(ngram, cwd)
        assert proc.returncode == 0 and f"ngram: {points['ngram']:g} / {points['ngram']:g}" in proc.stdout, (cwd, proc.stdout, proc.stderr)
    starter = run_cell(bundle / "notebooks" / "backprop.ipynb", bundle / "notebooks")
    assert starter.returncode == 0 and f"backprop: 0 / {points['backprop']:g}" in starter.stdout, starter.stdout + starter.stderr
    (tmp_path / "elsewhere").mkdir()
    lost = run_cell(ngram, tmp_path / "elsewhere")
    assert lost.returncode == 1 and "FileNotFoundError: No bundle" in lost.stderr, lost.stderr
    assert "run, in a terminal in the bundle's folder: python -m autograder check --dir notebooks" in lost.stderr
    bare = run_cell(ngram, bundle / "notebooks", "-S")  # no site-packages: a Python where nothing was installed
    assert bare.returncode == 1 and f"ModuleNotFoundError: This notebook runs {sys.executable}, which lacks autograder:" in bare.stderr
    checks = bundle / "autograder" / "cases" / "ngram.py"  # a bug planted in the grader's own check of the padding
    planted = re.sub(r"(\ndef padding\(.*\):\n)", r'\1    raise RuntimeError("a bug of the grader")\n', checks.read_text())
    checks.write_text(planted)
    failed = run_cell(ngram, bundle / "notebooks")
    assert failed.returncode == 1 and "a bug of the grader" in failed.stdout, failed.stdout + failed.stderr
    assert "RuntimeError: The grader itself failed on a case (its message is above): that is not your code" in failed.stderr
    with open(bundle / "grading.yaml", "a") as rubric:
        rubric.write("not_a_key: 1\n")
    broken = run_cell(ngram, bundle / "notebooks")
    assert broken.returncode == 1 and "not_a_key" in broken.stdout, broken.stdout + broken.stderr
    assert f"RuntimeError: `python -m autograder check ngram --dir {bundle / 'notebooks'}` could not run" in broken.stderr
    assert "exit status 2" in broken.stderr


def executed(client: NotebookClient, index: int) -> str:
    """Cell `index` of the client's notebook run in its kernel, as Shift+Enter runs it; what the cell printed."""
    cell = client.execute_cell(client.nb.cells[index], index)
    return "".join(output.get("text", "") for output in cell.outputs)


@pytest.mark.slow
def test_the_check_cell_grades_the_saved_notebook_only_when_it_holds_what_the_kernel_ran(part1, tmp_path):
    """Issue 31: a cell edited and run but not saved is never graded as it was saved, without a word. In a real kernel
    (nbclient), the notebook of the solution runs; pad_sentence is broken and its cell run, not saved: the check cell
    says to save first and grades nothing. Saved, the check grades the broken code; the fix saved but not run yet is
    graded next, as the saved file, with no word of saving."""
    bundle = tmp_path / "bundle"
    shutil.copytree(part1, bundle)
    path = solution_notebook(bundle, bundle / "notebooks")
    points = sum(k.points for k in load_rubric(bundle / "grading.yaml").component("ngram").cases)
    client = NotebookClient(nbformat.read(path, as_version=4), timeout=600, resources={"metadata": {"path": str(path.parent)}})
    code = [i for i, cell in enumerate(client.nb.cells) if cell.cell_type == "code"]
    pad = next(i for i in code if "def pad_sentence" in client.nb.cells[i].source)
    right = client.nb.cells[pad].source
    assert "[BOS] * (n - 1)" in right
    with client.setup_kernel(env=dict(os.environ, COLUMNS="200", IPYTHONDIR=str(tmp_path / "ipython"))):  # no profile of the home's
        for i in code[:-1]:
            executed(client, i)
        client.nb.cells[pad].source = right.replace("[BOS] * (n - 1)", "[BOS] * n")
        executed(client, pad)
        unsaved = executed(client, code[-1])
        assert unsaved.startswith("Not checked: this kernel last ran other code for `pad_sentence` than the saved ngram.ipynb")
        assert "save the notebook first (Ctrl+S / Cmd+S), then run this cell again" in unsaved and "Total:" not in unsaved
        nbformat.write(client.nb, path)
        broken = executed(client, code[-1])
        assert re.search(rf"^ngram: \d+ / {points:g}$", broken, re.M) and f"ngram: {points:g} / {points:g}" not in broken, broken
        client.nb.cells[pad].source = right
        nbformat.write(client.nb, path)
        fixed = executed(client, code[-1])
        assert f"ngram: {points:g} / {points:g}" in fixed and "Not checked" not in fixed, fixed


def project_venv(folder: Path, *pth_lines: str) -> Path:
    """A fresh venv's Python that has the packages of this project's venv (a .pth names its site-packages: nothing is
    downloaded), then runs `pth_lines` at start-up; not the project's own grader."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True,
                                  text=True, check=True, timeout=120).stdout.strip())
    (purelib / "project.pth").write_text(sysconfig.get_path("purelib") + "\n")
    if pth_lines:  # after the packages: .pth files load in name order
        (purelib / "zz_more.pth").write_text("\n".join(pth_lines) + "\n")
    return python


def colab_python(folder: Path) -> Path:
    """Colab's Python: pip and ipykernel among its packages, and not the bundle's grader, which the notebook's first
    cell installs (make_student_venv's venv has the grader installed, and not ipykernel)."""
    return project_venv(folder)


COLAB_MESSAGE = '''"""Stands in for Colab's: get_ipynb answers with the notebook the browser holds, here the file $BROWSER_NOTEBOOK."""
import json
import os


def blocking_request(kind, request, timeout_sec):
    assert kind == "get_ipynb", kind
    with open(os.environ["BROWSER_NOTEBOOK"]) as f:
        return {"ipynb": json.load(f)}
'''


@pytest.mark.slow
def test_in_colab_the_first_cell_installs_the_uploaded_bundle_and_the_check_grades_the_notebook_open_there(part1, tmp_path):
    """Colab, as far as it can be stood in for offline: a kernel of a fresh Python with the grading packages but not
    the grader (Colab's), started in a folder standing for /content, where the bundle's zip was uploaded, with a stand-in
    google.colab, imported at the kernel's start as Colab's is, whose get_ipynb answers with the notebook open in the
    browser. The first cell, as written, unpacks the zip and installs it (pip offline: the pins are met by this
    project's venv); the check cell then grades the notebook open in the browser (the solution), not the bundle's copy
    (the starter). Not exercised: Colab's own get_ipynb, and pip downloading the pins."""
    content = tmp_path / "content"
    shutil.copytree(part1, tmp_path / "upload" / "part1", ignore=shutil.ignore_patterns(".venv", "__pycache__", ".pytest_cache"))
    shutil.make_archive(str(content / "part1"), "zip", tmp_path / "upload", "part1")
    browser = solution_notebook(part1, tmp_path / "browser")
    stub = tmp_path / "stub" / "google" / "colab"  # google is a namespace package (protobuf's), so no google/__init__.py
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("")
    (stub / "_message.py").write_text(COLAB_MESSAGE)
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "colab.py").write_text("import google.colab\n")
    kernels = tmp_path / "kernels"
    (kernels / "colab").mkdir(parents=True)
    (kernels / "colab" / "kernel.json").write_text(json.dumps({
        "argv": [str(colab_python(tmp_path / "venv")), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab", "language": "python"}))
    client = NotebookClient(nbformat.read(browser, as_version=4), timeout=600, resources={"metadata": {"path": str(content)}},
                            km=KernelManager(kernel_name="colab", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)])))
    code = [i for i, cell in enumerate(client.nb.cells) if cell.cell_type == "code"]
    env = student_env(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONPATH=str(tmp_path / "stub"),
                      IPYTHONDIR=str(tmp_path / "ipython"), BROWSER_NOTEBOOK=str(browser))
    with client.setup_kernel(env=env):
        installed = executed(client, code[0])
        bundle = content / "part1" / "part1"
        assert installed.strip() == f"Installed the grader of {bundle}: the last cell of this notebook checks your code."
        for i in code[1:-1]:
            executed(client, i)
        checked = executed(client, code[-1])
    points = sum(k.points for k in load_rubric(bundle / "grading.yaml").component("ngram").cases)
    assert f"ngram: {points:g} / {points:g}" in checked, checked
    assert nbformat.read(bundle / "notebooks" / "ngram.ipynb", as_version=4) == nbformat.read(browser, as_version=4)


def without_training(rubric):
    """The training cases take half a minute and say nothing about replay that the others do not."""
    return dataclasses.replace(rubric, components=[dataclasses.replace(c, cases=[k for k in c.cases if k.check != "transformer.training"])
                                                   for c in rubric.components])


# (file, anchor, replacement): mistakes whose visible feedback the bundle must repeat word for word
MISTAKES = [
    ("ngram.py", "return [BOS] * (n - 1) + list(tokens) + [EOS]", "return [BOS] * n + list(tokens) + [EOS]"),
    ("attention.py", "scores = Q @ K.transpose(-2, -1) / math.sqrt(dk)", "scores = Q @ K.transpose(-2, -1)"),
    ("transformer.py", "            logits = logits / temperature", "            logits = logits"),
    ("lstm.py", "i, f, g, o = gates.chunk(4, dim=-1)  # 4 x (B, H), i, f, g, o", "i, f, o, g = gates.chunk(4, dim=-1)  # 4 x (B, H), i, f, g, o"),
]


@pytest.mark.parametrize("file, old, new", MISTAKES, ids=[m[0] for m in MISTAKES])
@pytest.mark.slow
def test_replayed_cases_say_what_the_grader_says(bundle, rubric, tmp_path, file, old, new):
    """Word for word, but for what mutants of the reference name: that needs the reference, which a bundle never holds
    (the grader appends it to a message, tests/test_mutants.py)."""
    variant = solutions_with(tmp_path, file, old, new)
    ids = [c.id for c in rubric.components if c.file == file]
    live = grade_folder(without_training(rubric), variant, tmp_path / "live", component_ids=ids, visible_only=True, explain=False)
    released = without_training(load_rubric(bundle / "grading.yaml"))
    with isolation(released) as entered:
        replayed = grade(released, open_submission(variant, tmp_path / "replayed"), secret="local", isolation=entered, component_ids=ids)
    want = {r.case.name: (r.passed, r.output) for r in live.results if r.case.check not in TIMING}
    got = {r.case.name: (r.passed, r.output) for r in replayed.results if r.case.name in want}
    assert not all(passed for passed, _ in want.values())  # the mistake shows in the visible cases
    assert got == want


def test_a_replay_asked_for_what_it_did_not_record_fails_the_case(rubric, tmp_path):
    """The same t.expect call with other integers or strings in what it closes over (a student's sampled
    tokens steering the check) is not in the recording, nor is any call of another case."""
    first, second = rubric.component("ngram").cases[:2]

    def padded(tokens):
        return lambda ref: ref.ngram.pad_sentence(tokens, 2)

    rng = np.random.default_rng(0)
    recorder = Recorder(Reference(SOLUTIONS))
    recorder.for_case(first).expect(rng, padded(["a", "b"]))
    recorder.save(tmp_path / "expected.bin")
    replay = Replay(tmp_path / "expected.bin")
    assert replay.for_case(first).expect(rng, padded(["a", "b"])) == ["<s>", "a", "b", "</s>"]
    with pytest.raises(Diverged, match="recorded only for the reference's outputs"):
        replay.for_case(first).expect(rng, padded(["a", "c"]))
    with pytest.raises(Diverged):
        replay.for_case(second).expect(rng, padded(["a", "b"]))


@pytest.mark.slow
def test_release_refuses_a_used_folder_and_an_unknown_part(tmp_path):
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    proc = release(used)
    assert proc.returncode == 2 and "not an empty folder" in proc.stderr and "recording" not in proc.stderr  # refused first
    assert (used / "notes.txt").read_text() == "mine"
    proc = release(tmp_path / "new", "--part", "9")
    assert proc.returncode == 2 and "no part '9'" in proc.stderr and not (tmp_path / "new").exists()
    assert "recording" not in proc.stderr


@pytest.mark.slow
def test_a_bundle_cannot_release_itself(part1, tmp_path):
    proc = in_bundle(part1, "-m", "autograder", "release", "--out", str(tmp_path / "again"))
    assert proc.returncode == 2 and "is itself a student bundle" in proc.stderr


@pytest.mark.slow
def test_the_recording_is_data_only(bundle):
    """expected.bin is one wire frame: JSON whose only tags are plain data, and raw array bytes; never pickle. A
    float32 case's expected value is a dict of plain data under one string key (expected.ROUNDED)."""
    data = (bundle / "expected.bin").read_bytes()
    header = json.loads(data[4:4 + int.from_bytes(data[:4], "little")])
    tags = set(re.findall(r'"(__[a-z]+__)"', json.dumps(header)))
    assert tags <= {"__dict__", "__tuple__", "__set__", "__tensor__", "__ndarray__", "__npscalar__", "__float__", ROUNDED}, tags
    assert ROUNDED in tags  # the visible float32 cases are recorded with their error model
    assert len(header["cases"]) == len(load_rubric(bundle / "grading.yaml").components[0].cases) + sum(
        len(c.cases) for c in load_rubric(bundle / "grading.yaml").components[1:])


# ---- the behavioural probe: no function the bundle ships computes a solution's result ----------------------


def recorded_solution_calls(rubric, tmp_path, per_function: int = 2) -> list:
    """The first calls of every solution function (and method) while the grader grades the solutions on every
    case but the training and timing ones: (function, args, kwargs, result), modules as their weights."""
    reference = Reference(SOLUTIONS)
    recorded, counts, originals = [], {}, []

    def recording(name, fn):
        def call(*args, **kwargs):
            inputs = data_or_none((args, kwargs)) if counts.get(name, 0) < per_function else None
            result = fn(*args, **kwargs)
            output = data_or_none(result) if inputs is not None else None
            if output is not None:  # an RNG, a model object: not what a bundle function could be given or return
                recorded.append((name, *inputs, output))
                counts[name] = counts.get(name, 0) + 1
            return result

        return call

    for path in sorted(SOLUTIONS.glob("*.py")):
        module = getattr(reference, path.stem)
        owners = [module, *(c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__)]
        for owner in owners:
            for attr, fn in list(vars(owner).items()):
                if inspect.isfunction(fn) and fn.__module__ == module.__name__ and attr != "__init__":
                    originals.append((owner, attr, fn))
                    setattr(owner, attr, recording(f"{path.name}:{fn.__qualname__}", fn))
    quick = dataclasses.replace(rubric, components=[dataclasses.replace(c, cases=[k for k in c.cases if k.check not in TIMING
                                                                                    and k.check != "transformer.training"])
                                                    for c in rubric.components])
    try:
        with isolation(quick) as entered:
            grade(quick, open_submission(SOLUTIONS, tmp_path / "recording"), secret="probe", isolation=entered, expected=Live(reference))
    finally:
        for owner, attr, fn in originals:
            setattr(owner, attr, fn)
    return recorded


def data_or_none(value):
    try:
        return bundle_probe.as_data(value)
    except bundle_probe.NotData:
        return None


def run_probe(bundle: Path, recorded: list, scratch: Path, files: str = "**/*.py") -> list[list[str]]:
    torch.save(recorded, scratch / "inputs.pt")
    proc = subprocess.run([sys.executable, "-I", str(ROOT / "tests" / "bundle_probe.py"), str(bundle), str(scratch / "inputs.pt"),
                           str(scratch / "found.json"), files], cwd=scratch, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((scratch / "found.json").read_text())


@pytest.fixture(scope="module")
def solution_calls(rubric, tmp_path_factory):
    calls = recorded_solution_calls(rubric, tmp_path_factory.mktemp("recording"))
    assert len({c[0] for c in calls}) >= 20  # every solution function given data (not an RNG or a model object)
    return calls


@pytest.mark.slow
def test_no_function_in_the_bundle_computes_a_solution_result(bundle, solution_calls, tmp_path):
    assert run_probe(bundle, solution_calls, tmp_path) == []


@pytest.mark.slow
def test_the_probe_finds_the_grader_only_oracles_if_they_were_shipped(part1, solution_calls, tmp_path):
    """The probe can fail: the mistake simulators compute the solutions at their default arguments, which is
    why they live in autograder/oracles/ and no bundle holds them. Planted in a bundle, they are found."""
    copy = tmp_path / "bundle"
    shutil.copytree(part1, copy)
    for name in ("lstm.py", "ngram.py"):
        shutil.copy(ROOT / "autograder" / "oracles" / name, copy / "autograder" / "cases" / f"planted_{name}")
    found = run_probe(copy, solution_calls, tmp_path, "autograder/cases/planted_*.py")  # the rest is probed just above
    assert ["autograder/cases/planted_lstm:forward", "lstm.py:lstm_forward"] in found, found
    assert ["autograder/cases/planted_lstm:step", "lstm.py:lstm_step"] in found, found
    assert ["autograder/cases/planted_ngram:counts", "ngram.py:count_ngrams"] in found, found


# ---- the portable runner: a student's check on macOS or Windows, proven on this Linux machine ----------------
# A venv of its own stands for a laptop without Linux: not_linux.py, loaded at its start-up, refuses to the grader's
# code every module and call that only Linux has (its LINUX_ONLY). The bundle's `check` run there must fall back to
# the portable tier, say so in one line, and print exactly what the sandbox prints on solutions/, starter/, every
# check of parts 1 and 3 failed by a catalogue mistake, and solution files saved with CRLF line endings, a UTF-8 BOM and tabs.

PARTS = ("1", "3")
# The refusals a portable check meets, each a probe that falls back: tiers.sandbox_missing tries Linux's modules (and
# so chooses the portable tier), runner.usable_cores asks for the process's CPU affinity (and counts the cores instead).
PROBES = {("import fcntl", "sandbox/host/tiers.py"), ("os.sched_getaffinity", "runner.py")}


def each_check_once(mistakes: list) -> list:
    """Few mistakes that together must fail every check the given ones must fail (greedy: the one adding the most
    checks first): every check's failure, and so every path its message takes through the worker and the runner, is
    compared across the two tiers at least once."""
    needed, chosen, seen = set().union(*(m.must_fail for m in mistakes)), [], set()
    while seen != needed:
        best = max(mistakes, key=lambda m: len(m.must_fail - seen))  # ties: the catalogue's order
        chosen.append(best)
        seen |= best.must_fail
    return chosen


def not_linux_python(folder: Path) -> Path:
    """A laptop without Linux: a venv that sees this project's packages and loads not_linux.py before anything runs."""
    return project_venv(folder, *NOT_LINUX_PTH)


def crlf_bom_tabs(folder: Path, files: list[str]) -> Path:
    """The solution files as an editor on Windows may save them: CRLF line endings, a UTF-8 BOM, tabs for indentation."""
    folder.mkdir()
    for name in files:
        lines = (SOLUTIONS / name).read_text().splitlines()
        tabbed = [re.sub(r"^(    )+", lambda m: "\t" * (len(m.group()) // 4), line) for line in lines]
        (folder / name).write_bytes(b"\xef\xbb\xbf" + "\r\n".join(tabbed).encode() + b"\r\n")
    return folder


def without_timings(stdout: str) -> str:
    """check's output less what differs by nature between two runs: the seconds taken and the isolation tier, which
    close the Total line (and may wrap onto the lines after it)."""
    return re.sub(r"(Total: [^\n(]*?)\s+\(\d.*?(?=\nFiles in the submission:|\nThese are the)", r"\1", stdout, flags=re.S)


@pytest.fixture(scope="module")
def laptop(tmp_path_factory) -> Path:
    """The Python of a laptop without Linux (not_linux_python)."""
    return not_linux_python(tmp_path_factory.mktemp("laptop") / "venv")


@pytest.fixture(scope="module")
def checked(bundle, laptop, tmp_path_factory):
    """Each job checked by the bundle's `check`, in one Python per run (tests/not_linux/check_each.py): once in the
    sandbox, once on a laptop without Linux; with what each run met of not_linux's refusals."""
    scratch = tmp_path_factory.mktemp("portable")
    rubric = load_rubric(bundle / "grading.yaml")
    part_names = list(dict.fromkeys(c.part for c in rubric.components))
    components = [c for c in rubric.components if str(part_names.index(c.part) + 1) in PARTS]
    ids = [c.id for c in components]
    first = [c for c in components if c.part == components[0].part]  # reading a file is the same for every component
    crlf = crlf_bom_tabs(scratch / "crlf", sorted({c.file for c in first}))
    todo = [(SOLUTIONS, ids, "solutions"), (bundle, ids, "starter"), (crlf, [c.id for c in first], "crlf, BOM, tabs")]
    for k, mistakes in enumerate(one_per_file(rubric, each_check_once([m for m in CATALOGUE if m.component in ids]))):
        edits = [(rubric.component(m.component).file, m.old, m.new) for m in mistakes]
        variant = write_edits(SOLUTIONS, edits, scratch / f"mistakes{k}")
        todo.append((variant, [m.component for m in mistakes], "mistakes: " + "; ".join(m.name for m in mistakes)))
    listing = scratch / "jobs.json"
    listing.write_text(json.dumps([[str(folder), job] for folder, job, _ in todo]))
    runs = {}
    for mode, interpreter in (("sandbox", Path(sys.executable)), ("portable", laptop)):
        log, out = scratch / f"{mode}.log", scratch / f"{mode}.json"
        env = dict(os.environ, PYTHONPATH=str(bundle), NOT_LINUX_LOG=str(log), COLUMNS="200")
        proc = subprocess.run([interpreter, NOT_LINUX / "check_each.py", listing, out], cwd=bundle, env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        for (_, _, what), result in zip(todo, json.loads(out.read_text())):
            runs.setdefault(what, {})[mode] = result
        runs[mode] = {tuple(line.split("\t")) for line in log.read_text().splitlines()} if log.exists() else set()
    return runs


@pytest.mark.slow
def test_the_laptop_without_linux_refuses_the_sandbox_and_nothing_else(checked):
    """The stand-in works (the sandbox's probe met a refusal, so the check chose the portable tier); nothing of Linux's
    was reached on the portable path but the probes that fall back; nothing was refused in the sandbox's run."""
    assert ("import fcntl", "sandbox/host/tiers.py") in checked["portable"]
    assert checked["portable"] <= PROBES, checked["portable"] - PROBES
    assert checked["sandbox"] == set()


# POSIX's signals that Windows's `signal` module lacks: a name of these read when the grader's command line is imported
# or starts a check would fail there, and not_linux.py cannot take them away (the standard library uses them here).
WINDOWS_LACKS = ("SIGHUP", "SIGKILL", "SIGSTOP", "SIGCONT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGPIPE",
                 "SIGXCPU", "SIGXFSZ")


@pytest.mark.slow
def test_the_command_line_starts_with_the_signals_windows_has():
    """With Windows's signals only, the command line and the student's commands import, and the stop handlers install
    (cli.stops_as_interrupts); a missing one would show: deleting SIGINT too fails the same run."""
    def run(names) -> subprocess.CompletedProcess:
        script = "import signal\n" + "".join(f"del signal.{n}\n" for n in names) + (
            "from autograder import cli\nfrom autograder.commands import check, watch\nwith cli.stops_as_interrupts([]):\n    print(cli.build_parser().parse_args(['check']).command_module)\n")
        return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)

    windows = run(WINDOWS_LACKS)
    assert windows.returncode == 0 and windows.stdout.strip() == "check", windows.stderr
    assert "AttributeError" in run((*WINDOWS_LACKS, "SIGINT")).stderr


@pytest.mark.slow
def test_grading_never_falls_back_to_the_portable_tier(laptop, tmp_path):
    """Without Linux, `grade` (as grade-all's jobs and Gradescope's run, through choose_tier) refuses to grade, says
    why, and its results say no points; only a student's `check` runs without the sandbox."""
    results = tmp_path / "results.json"
    proc = subprocess.run([laptop, "-m", "autograder", "grade", str(SOLUTIONS), "--results", str(results)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2 and "grading runs only in the sandbox (the sandbox needs Linux's" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and json.loads(results.read_text())["score"] == 0


@pytest.mark.slow
def test_a_portable_check_prints_what_the_sandbox_prints(checked, rubric):
    """Every job: the same exit status, table, feedback and file account in both runs; the portable run says once,
    on stderr, that it runs without the sandbox, and the sandbox's run does not."""
    jobs = {what: modes for what, modes in checked.items() if what not in ("sandbox", "portable")}
    part_names = list(dict.fromkeys(c.part for c in rubric.components))
    ours = {c.id for c in rubric.components if str(part_names.index(c.part) + 1) in PARTS}
    checked = {name for what in jobs if what.startswith("mistakes: ") for name in what.removeprefix("mistakes: ").split("; ")}
    catalogued = [m for m in CATALOGUE if m.component in ours]
    assert set().union(*(m.must_fail for m in catalogued if m.name in checked)) == set().union(*(m.must_fail for m in catalogued))
    for what, modes in jobs.items():
        sandbox, portable = modes["sandbox"], modes["portable"]
        assert portable["status"] == sandbox["status"], (what, portable["stdout"][-3000:], sandbox["stdout"][-3000:])
        assert without_timings(portable["stdout"]) == without_timings(sandbox["stdout"]), what
        assert portable["stderr"].count("No sandbox here (") == 1 and "No sandbox here" not in sandbox["stderr"], what
    status = {what: modes["sandbox"]["status"] for what, modes in jobs.items()}
    assert (status["solutions"], status["crlf, BOM, tabs"], status["starter"]) == (0, 0, 1)
    assert 3 not in status.values()  # the grader never failed on its own


def test_the_docs_list_each_linux_only_thing_the_stand_in_refuses():
    """The Portability table (docs/architecture.md) and not_linux.LINUX_ONLY name the same things (read from its
    source: importing it would take them from this process)."""
    source = (NOT_LINUX / "not_linux.py").read_text()
    table = next(node for node in ast.parse(source).body if isinstance(node, ast.Assign) and node.targets[0].id == "LINUX_ONLY")
    refused = [key.value for key in table.value.keys]
    section = (ROOT / "docs" / "architecture.md").read_text().split("## Portability")[1].split("\n## ")[0]
    listed = re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)
    assert listed == refused
