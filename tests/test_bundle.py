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
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
import yaml
from conftest import ROOT, SOLUTIONS, grade_folder, isolation, solutions_with

import bundle_probe
from autograder.cases import FILES, TIMING
from autograder.rubric import load_rubric
from autograder.expected import ROUNDED, Diverged, Live, Recorder, Replay
from autograder.reference import Reference
from autograder.release.bundle import BUNDLE_OWN, grading_pins
from autograder.release.notebooks import Handout, write_notebook
from autograder.runner import grade
from autograder.submission import CHECK_TAG, open_submission

# The bundle's own files at its top (release.bundle.BUNDLE_OWN, which `check` leaves out of its account), and the notebooks.
RELEASED = {*BUNDLE_OWN, "notebooks"}


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
def part1(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "part1"
    proc = release(out, "--part", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all pass" in proc.stdout
    return out


@pytest.mark.slow
def test_the_bundle_holds_starter_handouts_notebooks_and_the_visible_cases_only(bundle, rubric):
    files = {c.file for c in rubric.components}
    assert {p.name for p in bundle.iterdir()} == RELEASED | files | {"autograder_tests"}
    shipped = (bundle / "autograder_tests" / "test_ngram_extra.py").read_text()  # a staff test file, its visible tests only
    assert "def test_add_k_rows_sum_to_one" in shipped and "def test_unseen_history_is_uniform" not in shipped
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


@pytest.mark.slow
def test_check_in_the_bundle_reads_the_notebooks(bundle):
    notebooks = in_bundle(bundle, "-m", "autograder", "check", "causal_mask", "--dir", "notebooks")
    assert notebooks.returncode == 1 and "causal_mask: 0 /" in notebooks.stdout, notebooks.stdout + notebooks.stderr


def readme_block(bundle: Path, heading: str) -> list[str]:
    """The lines of the first code block under `heading` in the bundle's README, comments dropped."""
    block = re.search(rf"## {heading}[^\n]*\n\n.*?```\n(.*?)```", (bundle / "README.md").read_text(), re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines()]


def as_typed(bundle: Path, command: str) -> subprocess.CompletedProcess:
    """`command` run word for word in `bundle`, as in a shell whose `python` and `pytest` are this project's venv's
    (where the bundle's requirements are installed: see the requirements test)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(shlex.split(command), cwd=bundle, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PATH=path, COLUMNS="200"))


@pytest.mark.slow
def test_the_readme_commands_run_as_written(part1, tmp_path):
    """Every command the README gives for checking work (the code block, and the notebooks' command in its text), run
    literally in the bundle: on the starter each exits 1 with the grader's messages alone, on the solutions 0; `pytest
    -k test_ngram` runs ngram's cases and no others, `pytest -k pad_sentence` those of that function; `check` lists the
    student's files, not the bundle's own (its grader, handouts, rubric, pytest's cache)."""
    commands = readme_block(part1, "Check your work")
    commands += re.findall(r"`(python -m autograder check --dir notebooks)`", (part1 / "README.md").read_text())
    assert commands == ["python -m autograder check", "python -m autograder check ngram", "pytest", "pytest -k test_ngram",
                        "pytest -k pad_sentence", "python -m autograder check --dir notebooks"]
    rubric = load_rubric(part1 / "grading.yaml")
    ngram, backprop = (len(rubric.component(c).cases) for c in ("ngram", "backprop"))
    picked = {"test_ngram": ngram, "pad_sentence": sum("pad_sentence" in c.name for c in rubric.component("ngram").cases)}
    points = {c.id: sum(k.points for k in c.cases) for c in rubric.components}
    solved = tmp_path / "student"
    shutil.copytree(part1, solved)
    for name in ("ngram.py", "backprop.py"):
        shutil.copy(SOLUTIONS / name, solved / name)
    for command in commands:
        starter = as_typed(part1, command)
        assert starter.returncode == 1, (command, starter.stdout[-2000:], starter.stderr[-2000:])
        assert "Not implemented yet" in starter.stdout and "CaseResult(" not in starter.stdout and "Traceback" not in starter.stdout
        if "notebooks" in command:
            continue  # the notebooks hold the starter in both copies
        done = as_typed(solved, command)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
        if command.startswith("pytest"):
            n = picked[command.split()[-1]] if "-k" in command else ngram + backprop
            want = f"{n} passed, {ngram + backprop - n} deselected" if "-k" in command else f"{n} passed"
            assert want in done.stdout, (command, done.stdout[-2000:])
            if "-k" in command:
                assert f"{n} failed, {ngram + backprop - n} deselected" in starter.stdout, (command, starter.stdout[-2000:])
        else:
            for component in ("ngram",) if command.endswith("ngram") else ("ngram", "backprop"):
                assert f"{component}: {points[component]:g} / {points[component]:g}" in done.stdout, (command, done.stdout[-2000:])
            listed = done.stdout.split("Files in the submission:")[1].split("These are the")[0]
            assert {line.split(":")[0].strip() for line in listed.strip().splitlines()} == {
                "ngram.py", "backprop.py", "notebooks/ngram.ipynb", "notebooks/backprop.ipynb"}, listed


@pytest.mark.slow
def test_pytest_k_picks_one_components_cases_or_one_functions(bundle):
    """Each component is one test function (test_attention), each case one of its tests named by number and name:
    `pytest -k test_attention` collects the attention cases and nothing else, though other components' case names
    say "attention"; `pytest -k pad_sentence` collects the cases of that function."""
    rubric = load_rubric(bundle / "grading.yaml")
    assert any("attention" in case.name for c in rubric.components if c.id != "attention" for case in c.cases)

    def collected(word: str) -> list[str]:
        proc = in_bundle(bundle, "-m", "pytest", "--collect-only", "-k", word)  # pytest.ini adds -q: one id a line
        return [line.split("[")[1].split("-")[0] for line in proc.stdout.splitlines() if "::" in line]

    assert collected("test_attention") == [c.number for c in rubric.component("attention").cases]
    assert collected("pad_sentence") == [c.number for c in rubric.component("ngram").cases if "pad_sentence" in c.name] != []


@pytest.mark.slow
def test_requirements_pin_the_grading_versions_with_torch_from_the_cpu_index(part1, tmp_path):
    """What runs here: the README's set-up block is checked for its words, and pip's own parser and resolver read the
    bundle's requirements.txt offline (`--dry-run --no-index` against this project's venv, which holds exactly
    constraints.txt's versions, torch 2.13.0+cpu): every line parses and every pin is met, nothing to download.
    Not exercised, as nothing may download in tests: a fresh install from PyPI and PyTorch's CPU index. That pip then
    takes torch 2.13.0+cpu from the extra index is PEP 440's order (a local version sorts above its public one)."""
    assert readme_block(part1, "Set up") == ["python3 -m venv .venv && . .venv/bin/activate", "pip install -r requirements.txt"]
    text = (part1 / "requirements.txt").read_text()
    lines = text.splitlines()
    constraints = grading_pins(ROOT / "constraints.txt")
    assert "ray==2.60.0" in (ROOT / "constraints.txt").read_text() and not any(line.startswith("ray==") for line in constraints)
    assert [line for line in lines if line.startswith("-")] == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    assert [line for line in lines if line and not line.startswith(("#", "-"))] == constraints and "torch==2.13.0" in constraints
    assert "make" not in " ".join(line for line in lines if line.startswith("#")).lower()  # the bundle has no Makefile

    def dry_run(folder: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--disable-pip-version-check",
                               "--quiet", "--report", str(tmp_path / "report.json"), "-r", "requirements.txt"],
                              cwd=folder, capture_output=True, text=True, timeout=300)

    proc = dry_run(part1)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "report.json").read_text())["install"] == []
    other = tmp_path / "other"  # the same run fails on a pin the venv does not hold: pip resolves the pins, it skips none
    other.mkdir()
    (other / "requirements.txt").write_text(re.sub(r"^numpy==.*$", "numpy==1.0.0", text, flags=re.M))
    refused = dry_run(other)
    assert refused.returncode != 0 and "numpy==1.0.0" in refused.stderr, refused.stderr


def run_cell(notebook: Path, cwd: Path) -> subprocess.CompletedProcess:
    """A notebook's check cell run as its kernel runs it: this Python, in the folder the notebook was opened from."""
    cell = nbformat.read(notebook, as_version=4).cells[-1]
    assert cell.metadata.tags == [CHECK_TAG]
    return subprocess.run([sys.executable, "-c", cell.source], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, COLUMNS="200"))


@pytest.mark.slow
def test_the_notebook_check_cell_finds_its_bundle_and_fails_visibly_when_it_cannot_check(part1, tmp_path):
    """From the notebooks folder, the bundle's root or a folder below, the cell checks the saved notebooks/ngram.ipynb;
    a failing case is shown, not raised; outside a bundle, or when the check cannot run (status 2), the cell raises."""
    bundle = tmp_path / "bundle"
    shutil.copytree(part1, bundle)
    ngram = write_notebook(bundle / "notebooks", "ngram.py", (SOLUTIONS / "ngram.py").read_text(),
                           [Handout("ngram", "N-grams", (bundle / "handouts" / "ngram.md").read_text())])
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
    with open(bundle / "grading.yaml", "a") as rubric:
        rubric.write("not_a_key: 1\n")
    broken = run_cell(ngram, bundle / "notebooks")
    assert broken.returncode == 1 and "not_a_key" in broken.stdout, broken.stdout + broken.stderr
    assert "RuntimeError: `python -m autograder check ngram --dir notebooks` could not run" in broken.stderr
    assert "exit status 2" in broken.stderr


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
    variant = solutions_with(tmp_path, file, old, new)
    ids = [c.id for c in rubric.components if c.file == file]
    live = grade_folder(without_training(rubric), variant, tmp_path / "live", component_ids=ids, visible_only=True)
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


def run_probe(bundle: Path, recorded: list, scratch: Path) -> list[list[str]]:
    torch.save(recorded, scratch / "inputs.pt")
    proc = subprocess.run([sys.executable, "-I", str(ROOT / "tests" / "bundle_probe.py"), str(bundle), str(scratch / "inputs.pt"),
                           str(scratch / "found.json")], cwd=scratch, capture_output=True, text=True, timeout=1200)
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
    found = run_probe(copy, solution_calls, tmp_path)
    assert ["autograder/cases/planted_lstm:forward", "lstm.py:lstm_forward"] in found, found
    assert ["autograder/cases/planted_lstm:step", "lstm.py:lstm_step"] in found, found
    assert ["autograder/cases/planted_ngram:counts", "ngram.py:count_ngrams"] in found, found
