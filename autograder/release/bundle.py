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
import re
import shutil
import tempfile
from pathlib import Path

import yaml

from ..cases import CHECKS, TIMING
from ..rubric import Rubric, load_rubric
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
# What a bundle holds of its own at its top, beside the starter files, the notebooks and the staff tests' folders:
# `check` in the bundle lists none of it (cli.students_own), only the student's files (tests/test_bundle.py checks it).
BUNDLE_OWN = ("README.md", "autograder", "expected.bin", "grading.yaml", "handouts", "pytest.ini", "requirements.txt",
              "test_visible.py")

PYTEST_FILE = '''"""The visible cases as pytest tests: `pytest` here runs what `python -m autograder check` runs. Each component is
one test function, each case one of its tests, named by its number and its name: `pytest -k test_attention` runs one
component's cases, `pytest -k pad_sentence` the cases of one function (any word of a case's name picks it)."""
import re
from pathlib import Path

import pytest

from autograder.rubric import load_rubric
from autograder.report import feedback
from autograder.runner import grade
from autograder.sandbox.host.tiers import isolation_for
from autograder.submission import open_submission

RUBRIC = load_rubric(Path(__file__).with_name("grading.yaml"))


@pytest.fixture(scope="session")
def results(tmp_path_factory):
    """Each component graded once, on the .py files beside this one, when its first case runs."""
    graded = {}

    def result(case):
        if case.component not in graded:
            submission = open_submission(Path(__file__).parent, tmp_path_factory.mktemp(case.component),
                                         accept_misnamed=RUBRIC.accept_misnamed)
            run = grade(RUBRIC, submission, secret="local", isolation=isolation, component_ids=[case.component], visible_only=True)
            graded[case.component] = {r.case.name: r for r in run.results}
        return graded[case.component][case.name]

    with isolation_for(RUBRIC.path.parent, None) as isolation:
        yield result


def words(name):
    """A case's name as one word pytest's -k can match: \"pad_sentence, n = 1\" -> \"pad_sentence_n_1\"."""
    return re.sub(r"\\W+", "_", name).strip("_")


def cases_of(component):
    """The test of one component: a test per case, its id the case's number and name (\"1.1-pad_sentence_n_1\")."""
    ids = [f"{case.number}-{words(case.name)}" for case in component.cases]

    @pytest.mark.parametrize("case", component.cases, ids=ids)
    def test(case, results):
        outcome = results(case)
        if not outcome.passed:  # the grader's feedback alone: pytest's traceback would show the grader's code, not yours
            pytest.fail(f"{case.number} {case.name}: {feedback(outcome)}", pytrace=False)
        print(feedback(outcome))  # what your code printed, with `pytest -rP`

    return test


for component in RUBRIC.components:
    globals()[f"test_{component.id}"] = cases_of(component)
'''

STAFF_ONLY = "# Only the staff's tools"  # constraints.txt: the pins from this line on serve only staff (Ray, hypothesis)


def grading_pins(constraints: Path) -> list[str]:
    """The pins of constraints.txt that grading needs: the staff's tools left out (Ray alone is some 80 MB)."""
    lines = constraints.read_text().split(STAFF_ONLY)[0].splitlines()
    return [line for line in lines if line and not line.startswith("#")]


REQUIREMENTS = """# What this folder's autograder needs, at the versions it is graded with: pip install -r requirements.txt
# torch is its CPU build, from PyTorch's own index: from PyPI alone, torch 2.13.0 on Linux pulls several GB of
# CUDA packages, which nothing here uses. pip takes no index per package in a requirements file, so that index
# is an extra one, beside PyPI; the pins are exact either way, and torch's CPU build (2.13.0+cpu) sorts above
# PyPI's 2.13.0, so pip picks it.
--extra-index-url https://download.pytorch.org/whl/cpu
"""

README = """# {course}: {title}

This folder is your starting point. It holds:

| path | what |
| --- | --- |
{files}| `handouts/` | the handout of each component |
| `notebooks/` | the same starter code as Jupyter notebooks, after the handout, with a cell that runs the checks |
| `grading.yaml`, `expected.bin`, `autograder/`, `test_visible.py` | the visible cases and the grader that runs them; do not edit |

## Set up (Linux, Python 3.11 or later)

```
python3 -m venv .venv && . .venv/bin/activate
pip install -r requirements.txt
```

`requirements.txt` pins the versions the grader uses, with the CPU build of torch from PyTorch's index
(download.pytorch.org): no GPU or CUDA is needed, and none is downloaded.

## Check your work

```
python -m autograder check            # every component
{check_one}# one component
pytest                                # the same cases, as pytest tests
{pytest_one}# one component's cases
{pytest_word}# the cases whose name holds this word: one function's
```

These run the visible cases exactly as the grader does: in a separate, walled-off process, with the
grader's own feedback. `check` exits with status 0 when every visible case passes, 1 when one fails,
2 when it cannot run (an unknown component, an unreadable `grading.yaml`), and 3 when the grader itself
failed on a case (its message says so: not your code; tell course staff). {not_here} more cases
run only when you submit (hidden cases, and the timing cases that race your code against the
reference's), so passing here does not mean full marks.

What your code prints (`print`, `sys.stdout`, `sys.stderr`) is shown under the case that ran it, up to
2,000 characters per case, each line behind `| `; what is written below Python (`os.write(1, ...)`, C
code) is not shown, nor, when you submit, what your code prints in hidden cases.

To work in a notebook instead, open `notebooks/<file>.ipynb`, save it, and run its last cell; or run
`python -m autograder check --dir notebooks`.

## Submit

Upload the `.py` files (or the `.ipynb` notebooks, one per file) to Gradescope.
"""


class BundleError(ReleaseError):
    """The bundle cannot be built; the message says why."""


def select_components(rubric: Rubric, part: str | None) -> list:
    """Every component, or those of one part, given by its number (1, 2...) or its name."""
    if part is None:
        return rubric.components
    parts = list(dict.fromkeys(c.part for c in rubric.components))
    chosen = parts[int(part) - 1] if part.isdigit() and 0 < int(part) <= len(parts) else part
    if chosen not in parts:
        raise BundleError(f"no part {part!r}; expected a number from 1 to {len(parts)} or one of: " + "; ".join(parts))
    return [c for c in rubric.components if c.part == chosen]


def check_bundle_target(rubric: Rubric, out: Path, part: str | None) -> list:
    """The components of a bundle of `part` written to `out`, or BundleError: all that can refuse it before recording."""
    if rubric.solutions_dir is None:
        raise BundleError(f"{rubric.path.name} is itself a student bundle; release from the course's rubric")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out} already exists and is not an empty folder; choose a new one")
    components = select_components(rubric, part)
    stale = stale_rules(rubric)  # the handouts and starter docstrings state the rules of this rubric, as released
    if stale:
        raise BundleError(f"the rules in {', '.join(stale)} are out of date with {rubric.path.name}; run `autograder release` first")
    return components


def write_bundle(rubric: Rubric, out: Path, part: str | None = None) -> dict:
    """Build the bundle in a temporary folder, prove it, then move it to `out` (which must not exist or be empty)."""
    components = check_bundle_target(rubric, out, part)
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
        pins = grading_pins(projects / "constraints.txt")
        (work / "requirements.txt").write_text(REQUIREMENTS + "\n".join(pins) + "\n")
        (work / "test_visible.py").write_text(PYTEST_FILE)
        (work / "pytest.ini").write_text("[pytest]\naddopts = -q\ntestpaths = test_visible.py\n")
        _write_rubric(rubric, components, work / "grading.yaml")
        _write_staff_tests(rubric, components, work)
        summary = _record(rubric, components, work / "grading.yaml", work / EXPECTED, Path(scratch))
        title = components[0].part if part else "all parts"
        listed = "".join(f"| `{f}` | starter code: fill in the bodies marked `raise NotImplementedError` |\n" for f in files)
        one = components[0].id  # the examples name a component this bundle holds
        (work / "README.md").write_text(README.format(course=rubric.course, title=title, files=listed, not_here=summary["not_here"],
                                                      check_one=f"python -m autograder check {one} ".ljust(38),
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


def _write_rubric(rubric: Rubric, components, path: Path) -> None:
    """The course's rubric, cut down to the visible cases, each keeping its number, and pointing at the recording."""
    spec = yaml.safe_load(rubric.path.read_text())
    ids = [c.id for c in components]
    spec["solutions"], spec["expected"] = None, EXPECTED
    spec["parts"] = [dict(p, components=[c for c in p["components"] if c in ids]) for p in spec["parts"]]
    spec["parts"] = [p for p in spec["parts"] if p["components"]]
    spec["components"] = {c.id: _component_spec(spec["components"][c.id], c) for c in components}
    path.write_text("# The visible cases of this release, generated by `autograder release`; do not edit.\n"
                    + yaml.safe_dump(spec, sort_keys=False, width=200))


def _component_spec(raw: dict, component) -> dict:
    kept = {c.name: c for c in _bundle_cases(component)}
    if not kept:
        raise BundleError(f"component {component.id} has no visible case to release; make at least one visible")
    cases = [dict(spec, number=kept[spec["name"]].number) for spec in raw.get("cases", []) if spec["name"] in kept]
    return dict(raw, cases=cases, not_here=len(component.cases) - len(kept))


def _write_staff_tests(rubric: Rubric, components, work: Path) -> None:
    """Each staff test file of `components` as the bundle holds it: the hidden tests' lines blank (their code, which
    may hold their answers, stays home), every other line where it was (a recorded `t.expect` is known by its line),
    and at the end each visible test given the number it has when graded."""
    kept = {k.unittest: k.number for c in components for k in _bundle_cases(c) if k.unittest}
    every = {k.unittest for c in components for k in c.cases if k.unittest}
    for file in sorted({source.file for source in every}):
        lines = (rubric.path.parent / file).read_text().splitlines()
        for cls in (node for node in ast.parse("\n".join(lines)).body if isinstance(node, ast.ClassDef)):
            hidden = [node for node in cls.body if StaffTest(file, f"{cls.name}.{getattr(node, 'name', '')}") in every - kept.keys()]
            for node in hidden:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                lines[first - 1:node.end_lineno] = [""] * (node.end_lineno - first + 1)
            if hidden and len(hidden) == len(cls.body):  # a class of hidden tests only keeps a body
                lines[cls.body[0].lineno - 1] = " " * cls.body[0].col_offset + "pass"
        lines += [f"\n# Written by `autograder release`: the visible tests of {file}, numbered as graded; hidden tests' lines are blank.",
                  "from gradescope_utils.autograder_utils.decorators import number as _grader_number  # noqa: E402"]
        lines += [f"{source.test} = _grader_number({number!r})({source.test})" for source, number in kept.items() if source.file == file]
        (work / file).parent.mkdir(parents=True, exist_ok=True)
        (work / file).write_text("\n".join(lines) + "\n")


def _record(rubric: Rubric, components, rubric_path: Path, path: Path, scratch: Path) -> dict:
    """Grade the reference solutions as the student on the bundle's cases, recording; then replay the recording
    against them, under the bundle's rubric loaded as the student's copy will load it: every case must pass both times."""
    live = dataclasses.replace(rubric, components=[dataclasses.replace(c, cases=_bundle_cases(c)) for c in components])
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
