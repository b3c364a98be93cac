"""The student bundle: starter files, handouts, notebooks, the visible cases and the grader to run them.

A bundle holds no reference solution and no hidden case. Its grading.yaml lists the visible cases
only (timing cases need the reference, so they run only when graded) and points at `expected.bin`:
what every `t.expect` of those cases returned when they graded the reference solutions, recorded
here (expected.Recorder). The bundle's `autograder check` and its `pytest` replay those values
through the same checks, so students get the grader's own feedback. Before anything is written,
the recording is replayed against the reference, which must pass every case: a bundle that would
fail a correct solution is never released. Nor is one whose handouts or starter docstrings state other
rules than the rubric's (release/__init__.py writes them).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import yaml

from .. import __version__
from ..cases import CHECKS, TIMING
from ..rubric import Case, Component, Rubric, load_rubric
from ..expected import Recorder, Replay
from ..reference import Reference
from ..runner import grade
from ..sandbox.host.tiers import isolation_for
from ..submission import open_submission
from ..unittests import StaffTest
from . import PACKAGE, PROJECT, ReleaseError, package_files, stale_rules
from .notebooks import Handout, write_notebook
from .starter import render_starter

EXPECTED = "expected.bin"

PYTEST_FILE = '''"""The visible cases as pytest tests: `pytest` here runs what `python -m autograder check` runs. Each component is
one test function, each case one of its tests, named by its number and its name: `pytest -k test_attention` runs one
component's cases, `pytest -k pad_sentence` the cases of one function (any word of a case's name picks it), and grades
those alone."""
import re
from pathlib import Path

import pytest

from autograder.rubric import Case, load_rubric

RUBRIC = load_rubric(Path(__file__).with_name("grading.yaml"))


@pytest.fixture(scope="session")
def results(request, tmp_path_factory, pytestconfig):
    """Each component graded once, on the .py files beside this one, when its first case runs: the cases of it that
    this session runs (what -k selects), in one grade. A case gives whether it passed, and the grader's feedback."""
    # Running starts here, so the grader's modules are imported here, not while collecting: that needs the rubric alone,
    # and `pytest -k` picking cases that need no torch imports none.
    from autograder.report import feedback
    from autograder.runner import grade
    from autograder.sandbox.host.tiers import student_isolation
    from autograder.submission import open_submission

    selected = {}  # component -> the numbers of its cases that run
    for item in request.session.items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("case")
        if isinstance(case, Case):
            selected.setdefault(case.component, set()).add(case.number)
    graded = {}

    def result(case):
        if case.component not in graded:
            submission = open_submission(Path(__file__).parent, tmp_path_factory.mktemp(case.component),
                                         accept_misnamed=RUBRIC.accept_misnamed)
            run = grade(RUBRIC, submission, secret="local", isolation=isolation, component_ids=[case.component],
                        case_numbers=selected[case.component], visible_only=True)
            graded[case.component] = {r.case.number: r for r in run.results}
        outcome = graded[case.component][case.number]
        return outcome.passed, feedback(outcome)

    isolation, portable = student_isolation(RUBRIC.path.parent, None)
    if portable:  # said once, as `check` says it, past pytest's capture of what tests print
        with pytestconfig.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
            print("\\n" + portable)
    with isolation:
        yield result


def words(name):
    """A case's name as one word pytest's -k can match: \"pad_sentence, n = 1\" -> \"pad_sentence_n_1\"."""
    return re.sub(r"\\W+", "_", name).strip("_")


def cases_of(component):
    """The test of one component: a test per case, its id the case's number and name (\"1.1-pad_sentence_n_1\")."""
    ids = [f"{case.number}-{words(case.name)}" for case in component.cases]

    @pytest.mark.parametrize("case", component.cases, ids=ids)
    def test(case, results):
        passed, said = results(case)
        if not passed:  # the grader's feedback alone: pytest's traceback would show the grader's code, not yours
            pytest.fail(f"{case.number} {case.name}: {said}", pytrace=False)
        print(said)  # what your code printed, with `pytest -rP`

    return test


for component in RUBRIC.components:
    globals()[f"test_{component.id}"] = cases_of(component)
'''

STAFF_ONLY = "# Only the staff's tools"  # constraints.txt: the pins from this line on serve only staff (Ray, hypothesis)


def grading_pins(constraints: Path) -> list[str]:
    """The pins of constraints.txt that grading needs: the staff's tools left out (Ray alone is some 80 MB)."""
    lines = constraints.read_text().split(STAFF_ONLY)[0].splitlines()
    return [line for line in lines if line and not line.startswith("#")]


DISTRIBUTION = "autograder-student"  # the bundle's name once installed: not the staff's `autograder`, so the two never clash

REQUIREMENTS = """# One command installs what this folder's grader needs, at the versions it is graded with, and the grader itself:
#     pip install -r requirements.txt
# torch is its CPU build, from PyTorch's own index: from PyPI alone, torch 2.13.0 on Linux pulls several GB of
# CUDA packages, which nothing here uses. pip takes no index per package in a requirements file, so that index
# is an extra one, beside PyPI; the pins are exact either way, and torch's CPU build (2.13.0+cpu) sorts above
# PyPI's 2.13.0, so pip picks it.
--extra-index-url https://download.pytorch.org/whl/cpu
{pins}
# This folder's grader (pyproject.toml), installed editable: it stays here, beside the grading.yaml it reads, and
# the venv gets its commands, `check` and `autograder`.
-e .
"""

PYPROJECT = """# This folder's grader as a Python project: `pip install -r requirements.txt` installs it editable (-e .), with the
# commands `check` (the same as `autograder check`) and `autograder`. Written by `autograder release`; do not edit.
[build-system]
requires = {build}
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{version}"
description = {description}
requires-python = "{python}"
dependencies = {dependencies}

[project.optional-dependencies]
jupyter = ["notebook>=7", "ipykernel>=6"]  # pip install -e ".[jupyter]": the notebooks in Jupyter, on your own machine

[project.scripts]
{scripts}

[tool.setuptools.packages.find]
include = ["autograder", "autograder.*"]

[tool.setuptools.package-data]
autograder = {package_data}
"""


def student_requirements(project: dict) -> list[str]:
    """What a student's install requires, from the grader's pyproject.toml: its dependencies, and pytest for the bundle's
    test_visible.py; none of the staff's extras (the class report's plots and similarity, Ray, the suite's other tools)."""
    from packaging.requirements import Requirement  # pip's own parser: releasing needs it, grading never does

    pytest = [r for r in project["project"]["optional-dependencies"]["test"] if Requirement(r).name == "pytest"]
    return [*project["project"]["dependencies"], *pytest]


def student_pins(constraints: Path, requirements: list[str]) -> list[str]:
    """The pins of constraints.txt that installing `requirements` takes, in its order: every distribution they require,
    directly or through what those require (importlib.metadata of what is installed here), but for the extras not asked
    for and the markers this machine does not meet."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {canonicalize_name(line.split("==")[0]): line for line in constraints.read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    seen, todo = set(), [Requirement(r) for r in requirements]
    while todo:
        wanted = todo.pop()
        name = canonicalize_name(wanted.name)
        for extra in {"", *wanted.extras} - {e for n, e in seen if n == name}:
            seen.add((name, extra))
            try:
                requires = metadata.requires(name) or []
            except metadata.PackageNotFoundError:
                if name in pins:
                    raise BundleError(f"constraints.txt pins {pins[name]}, which is not installed here; install the project first (make)")
                continue
            todo += [r for r in map(Requirement, requires) if r.marker is None or r.marker.evaluate({"extra": extra})]
    needed = {name for name, _ in seen}
    return [line for name, line in pins.items() if name in needed]


def write_install(rubric: Rubric, work: Path) -> None:
    """The bundle's pyproject.toml and requirements.txt: the grader's dependencies as pyproject.toml states them,
    pinned to the versions of constraints.txt."""
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    requirements = student_requirements(project)
    scripts = {"check": "autograder.cli:check_main", **project["project"]["scripts"]}
    (work / "pyproject.toml").write_text(PYPROJECT.format(
        build=json.dumps(project["build-system"]["requires"]), name=DISTRIBUTION, version=__version__,
        description=json.dumps(f"The visible cases of {rubric.course}, and the grader that runs them"),
        python=project["project"]["requires-python"], dependencies=json.dumps(requirements, indent=4),
        scripts="\n".join(f"{name} = {json.dumps(target)}" for name, target in scripts.items()),
        package_data=json.dumps(project["tool"]["setuptools"]["package-data"]["autograder"])))
    pins = student_pins(rubric.path.parent / "constraints.txt", requirements)
    (work / "requirements.txt").write_text(REQUIREMENTS.format(pins="\n".join(pins)))

README = """# {course}: {title}

This folder is your starting point. It holds:

| path | what |
| --- | --- |
{files}| `handouts/` | the handout of each component |
| `notebooks/` | the same starter code as Jupyter notebooks, after the handout; a first cell sets up Colab, a last one runs the checks |
| `grading.yaml`, `expected.bin`, `autograder/`, `test_visible.py` | the visible cases and the grader that runs them; do not edit |
| `requirements.txt`, `pyproject.toml` | what the set-up installs; do not edit |

## Set up: macOS and Linux

You need Python 3.11 or later (`python3 --version` says which). In a terminal, in this folder:

```
python3 -m venv .venv
source .venv/bin/activate
pip install -r requirements.txt
```

## Set up: Windows

You need Python 3.11 or later, from python.org (`py --version` says which). In PowerShell or cmd, in this folder:

```
py -m venv .venv
.venv\\Scripts\\activate
pip install -r requirements.txt
```

If PowerShell refuses to run the second line ("running scripts is disabled on this system"), run
`Set-ExecutionPolicy -Scope CurrentUser RemoteSigned` once, then the line again.

## Set up: Colab

Nothing to install on your machine: the notebooks run in Google Colab, in your browser.

1. On colab.research.google.com, File → Upload notebook, and pick `notebooks/<file>.ipynb` from this folder.
2. Upload this folder's zip (the file you downloaded; or zip this folder, without its `.venv`) through the Files
   pane: the folder icon on the left. Wait until the upload is done.
3. Run the notebook's first cell. In Colab it unpacks the zip beside it and runs `pip install -r requirements.txt`
   there: the versions the grader uses, with the CPU build of torch (a few minutes). pip may warn that Colab's own
   packages (torchvision, torchaudio) want another torch: nothing here uses them. Elsewhere the cell does nothing.

When Colab gives you a new runtime (after some time idle, or Runtime → Disconnect and delete runtime), the Files
pane starts empty: upload the zip again and run the first cell again. Your notebook itself is kept, in your Google
Drive. The last cell checks the notebook as it is open in Colab, edits not saved included. To submit, download it
(File → Download → Download .ipynb) and upload that file, named `<file>.ipynb`.

## What the set-up installs

`pip install -r requirements.txt` installs the versions the grader uses, with the CPU build of torch from
PyTorch's index (download.pytorch.org): no GPU or CUDA is needed, and none is downloaded. It also installs
this folder's grader, which gives you the `check` command. The venv and the grader belong to this folder: if
you move or rename it, delete `.venv` and set up again. In a new terminal, activate the venv again first (the
second line of the set-up, in this folder).

To run the notebooks in Jupyter on your own machine, install it into the same venv, from this folder:
`pip install -e ".[jupyter]"`; then `jupyter notebook` opens it.

## Check your work

```
check                                 # every component
{check_one}# one component
pytest                                # the same cases, as pytest tests
{pytest_one}# one component's cases
{pytest_word}# the cases whose name holds this word: one function's
```

These run the visible cases exactly as the grader does, with the grader's own feedback: on Linux in a
walled-off process; on macOS and Windows, where that wall cannot be built, in a plain process per
component, which `check` says first ("No sandbox here"): the same cases, time limits and messages. `check` exits with status 0 when every visible case passes, 1 when one fails,
2 when it cannot run (an unknown component, an unreadable `grading.yaml`), and 3 when the grader itself
failed on a case (its message says so: not your code; tell course staff). {not_here} more cases
run only when you submit (hidden cases, and the timing cases that race your code against the
reference's), so passing here does not mean full marks.

`check` checks the files of the folder it runs in, so run it in this folder; in `notebooks/` (`cd notebooks`,
then `check`) it checks the notebooks. `check --dir FOLDER` checks another folder. `python -m autograder check`,
run in this folder, is the same as `check`. `pytest` runs in this folder only. `check --watch` (or `check --watch
ngram`) checks again each time you save a file, in about the time the cases take, until Ctrl-C.

What your code prints (`print`, `sys.stdout`, `sys.stderr`) is shown under the case that ran it, up to
2,000 characters per case, each line behind `| `; what is written below Python (`os.write(1, ...)`, C
code) is not shown, nor, when you submit, what your code prints in hidden cases.

To work in a notebook instead, open `notebooks/<file>.ipynb` in Jupyter or VS Code, with this folder's `.venv` as
its kernel, and run its last cell. It checks the notebook as saved, so save first (Ctrl+S / Cmd+S): if you ran code
that the saved notebook does not hold, it says so instead of checking. Or run `check` in `notebooks/`. For Colab, see
"Set up: Colab".

## Submit

Upload the `.py` files (or the `.ipynb` notebooks, one per file) to Gradescope.
"""


class BundleError(ReleaseError):
    """The bundle cannot be built; the message says why."""


def check_bundle_target(rubric: Rubric, out: Path, parts: Sequence[str] = ()) -> list[Component]:
    """The components of a bundle of `parts` (none: all) written to `out`, or BundleError: all that can refuse it before
    recording."""
    if rubric.solutions_dir is None:
        raise BundleError(f"{rubric.path.name} is itself a student bundle; release from the course's rubric")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out} already exists and is not an empty folder; choose a new one")
    components = rubric.select(parts)
    stale = stale_rules(rubric)  # the handouts and starter docstrings state the rules of this rubric, as released
    if stale:
        raise BundleError(f"the rules in {', '.join(stale)} are out of date with {rubric.path.name}; run `autograder release` first")
    return components


def write_bundle(rubric: Rubric, out: Path, parts: Sequence[str] = ()) -> dict:
    """Build the bundle of `parts` (none: all) in a temporary folder, prove it, then move it to `out` (which must not
    exist or be empty)."""
    components = check_bundle_target(rubric, out, parts)
    projects = rubric.path.parent
    starter = render_starter(rubric.solutions_dir)
    with tempfile.TemporaryDirectory(prefix="autograder-bundle-") as scratch:
        work = Path(scratch) / "bundle"
        work.mkdir()
        files = sorted({c.file for c in components})
        for file in files:
            (work / file).write_text(starter[file])
        _copy_handouts(projects / "assignments", work / "handouts", components)
        (work / "notebooks").mkdir()
        for file in files:
            held = [c for c in components if c.file == file]
            write_notebook(work / "notebooks", file, starter[file], [Handout(c.id, c.title, (work / "handouts" / f"{c.id}.md").read_text()) for c in held])
        for path in shipped_package(components):
            copy = work / path.relative_to(PROJECT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, copy)
        write_install(rubric, work)
        (work / "test_visible.py").write_text(PYTEST_FILE)
        (work / "pytest.ini").write_text("[pytest]\naddopts = -q\ntestpaths = test_visible.py\n")
        _write_rubric(rubric, components, work / "grading.yaml")
        _write_staff_tests(rubric, components, work)
        summary = _record(rubric, components, work / "grading.yaml", work / EXPECTED, Path(scratch))
        title = "; ".join(dict.fromkeys(c.part for c in components)) if parts else "all parts"
        listed = "".join(f"| `{f}` | starter code: fill in the bodies marked `raise NotImplementedError` |\n" for f in files)
        one = components[0].id  # the examples name a component this bundle holds
        (work / "README.md").write_text(README.format(course=rubric.course, title=title, files=listed, not_here=summary["not_here"],
                                                      check_one=f"check {one} ".ljust(38),
                                                      pytest_one=f"pytest -k test_{one} ".ljust(38),
                                                      pytest_word=f"pytest -k {_first_word(components[0].cases[0].name)} ".ljust(38)))
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.rmdir()
        shutil.move(str(work), out)
    return {**summary, "files": files, "components": [c.id for c in components]}


def _first_word(name: str) -> str:
    """The first word of a case's name, which names the function it grades ("pad_sentence, n = 1")."""
    return re.match(r"\w+", name)[0]


def _copy_handouts(source: Path, target: Path, components) -> None:
    target.mkdir()
    for c in components:
        handout = source / f"{c.id}.md"
        if not handout.is_file():
            raise BundleError(f"no handout for component {c.id}: {handout} is missing")
        shutil.copy(handout, target / handout.name)


def shipped_package(components) -> list[Path]:
    """The grader's package as the bundle of `components` holds it: never the grader-only oracles and mistake
    simulators (autograder/oracles/), and of the case modules only those that define the released checks and
    the case modules they import. Nothing that computes a reference result reaches students."""
    cases = PACKAGE / "cases"
    needed = set()
    todo = {CHECKS[c.check].__module__.rsplit(".", 1)[-1] for comp in components for c in _bundle_cases(comp) if not c.unittest}
    while todo:
        name = todo.pop()
        if name not in needed and (cases / f"{name}.py").is_file():  # `from . import check` names no module
            needed.add(name)
            todo |= _imported_siblings(cases / f"{name}.py")
    return [p for p in package_files() if PACKAGE / "oracles" not in p.parents
            and not (p.parent == cases and p.suffix == ".py" and p.stem not in needed | {"__init__"})]


def _imported_siblings(path: Path) -> set[str]:
    """The modules of the same package that `path` imports (`from . import x`, `from .x import y`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names |= {node.module} if node.module else {alias.name for alias in node.names}
    return names


def _bundle_cases(component) -> list:
    return [c for c in component.cases if c.visible and c.check not in TIMING]


def cut_rubric(rubric: Rubric, components: list[Component], cases_of: Callable[[Component], list[Case]]) -> dict:
    """The course's rubric, as the data of its YAML, cut down to `components` and to the cases `cases_of` keeps of each,
    every case keeping the number the course gives it (which counts the components before it); a part left with no
    component is dropped. Staff tests take their numbers from their files: cut_staff_tests numbers those."""
    spec = yaml.safe_load(rubric.path.read_text())
    ids = [c.id for c in components]
    spec["parts"] = [dict(p, components=[c for c in p["components"] if c in ids]) for p in spec["parts"]]
    spec["parts"] = [p for p in spec["parts"] if p["components"]]
    spec["components"] = {c.id: _cut_component(spec["components"][c.id], cases_of(c)) for c in components}
    return spec


def _cut_component(raw: dict, cases: list[Case]) -> dict:
    kept = {c.name: c.number for c in cases}
    return dict(raw, cases=[dict(spec, number=kept[spec["name"]]) for spec in raw.get("cases", []) if spec["name"] in kept])


def cut_staff_tests(rubric: Rubric, components: list[Component], cases_of: Callable[[Component], list[Case]]) -> dict[str, str]:
    """Each staff test file of `components` (its path relative to the rubric's folder, and its text) cut down to the tests
    `cases_of` keeps: a test left out is deleted, not skipped (a hidden test's code may hold its answers), and at the end
    each test kept is given the number the course gives it, which a rubric of fewer components would not."""
    kept = {k.unittest: k.number for c in components for k in cases_of(c) if k.unittest}
    every = {k.unittest for c in components for k in c.cases if k.unittest}
    texts = {}
    for file in sorted({source.file for source in every}):
        lines = (rubric.path.parent / file).read_text().splitlines()
        cut: list[tuple[int, int, list[str]]] = []  # (first line, last line, what replaces them), 1-based
        for cls in (node for node in ast.parse("\n".join(lines)).body if isinstance(node, ast.ClassDef)):
            left_out = [node for node in cls.body if StaffTest(file, f"{cls.name}.{getattr(node, 'name', '')}") in every - kept.keys()]
            for node in left_out:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                cut.append((first, node.end_lineno, []))
            if left_out and len(left_out) == len(cls.body):  # a class whose every test is left out keeps a body
                cut[-1] = (*cut[-1][:2], [" " * cls.body[0].col_offset + "pass"])
        for first, last, instead in sorted(cut, reverse=True):
            while first > 1 and not lines[first - 2].strip():  # the blank lines before it go with it
                first -= 1
            lines[first - 1:last] = instead
        held = "the tests it holds (the others left out)" if cut else "every test"
        lines += [f"\n# Written by the autograder's release: {held}, numbered as in the course.",
                  "from gradescope_utils.autograder_utils.decorators import number as _grader_number  # noqa: E402"]
        lines += [f"{source.test} = _grader_number({number!r})({source.test})" for source, number in kept.items() if source.file == file]
        texts[file] = "\n".join(lines) + "\n"
    return texts


def _write_rubric(rubric: Rubric, components: list[Component], path: Path) -> None:
    """The course's rubric, cut down to the visible cases, each keeping its number, and pointing at the recording."""
    spec = cut_rubric(rubric, components, _bundle_cases)
    spec["solutions"], spec["expected"] = None, EXPECTED
    for c in components:
        if not _bundle_cases(c):
            raise BundleError(f"component {c.id} has no visible case to release; make at least one visible")
        spec["components"][c.id]["not_here"] = len(c.cases) - len(_bundle_cases(c))
    path.write_text("# The visible cases of this release, generated by `autograder release`; do not edit.\n"
                    + yaml.safe_dump(spec, sort_keys=False, width=200))


def _write_staff_tests(rubric: Rubric, components: list[Component], work: Path) -> None:
    """Each staff test file of `components` as the bundle holds it: its visible tests only, numbered as graded. The
    recording is made against these copies (_record), so a `t.expect` is known by its line in the file the student has."""
    for file, text in cut_staff_tests(rubric, components, _bundle_cases).items():
        (work / file).parent.mkdir(parents=True, exist_ok=True)
        (work / file).write_text(text)


def _record(rubric: Rubric, components, rubric_path: Path, path: Path, scratch: Path) -> dict:
    """Grade the reference solutions as the student on the bundle's cases, recording; then replay the recording
    against them, under the bundle's rubric loaded as the student's copy will load it: every case must pass both times."""
    live = dataclasses.replace(rubric, path=rubric_path,  # staff tests from the bundle's copies (_write_staff_tests)
                               components=[dataclasses.replace(c, cases=_bundle_cases(c)) for c in components])
    ids = [c.id for c in components]
    recorder = Recorder(Reference(rubric.solutions_dir))
    with isolation_for(rubric.path.parent, rubric.solutions_dir) as isolation:
        recorded = grade(live, open_submission(rubric.solutions_dir, scratch / "recorded"), secret="release", isolation=isolation,
                         component_ids=ids, visible_only=True, expected=recorder)
        _all_pass(recorded, "while recording")
        recorder.save(path)
        bundle_rubric = load_rubric(rubric_path)
        replayed = grade(bundle_rubric, open_submission(rubric.solutions_dir, scratch / "replayed"), secret="release",
                         isolation=isolation, component_ids=ids, visible_only=True, expected=Replay(path))
    _all_pass(replayed, "when its recording was replayed")
    return {"cases": len(replayed.results), "not_here": replayed.hidden_not_run, "seconds": recorded.seconds + replayed.seconds,
            "bytes": path.stat().st_size, "isolation": recorded.isolation.get("tier")}


def _all_pass(run, when: str) -> None:
    failed = [r for r in run.results if not r.passed]
    if failed:
        raise BundleError(f"the reference solutions fail {len(failed)} visible case(s) {when}: "
                          + "; ".join(f"{r.case.number} {r.case.name}: {r.output}" for r in failed[:5]))
