"""Tools that turn the reference solutions into student-facing releases.

Also the rules: what each component forbids (grading.yaml) and what the tamper scan refuses (the tables of
forbidden.py), written in words into a marked region of each handout and of each solution file's module
docstring, which the starter keeps. `autograder release` rewrites the regions; `--check` finds one that
drifted from its sources.
"""
from __future__ import annotations

import ast
import textwrap
import tomllib
from pathlib import Path

from ..rubric import Component, Rubric
from ..forbidden import forbidden_rules, tamper_rules
from ..sandbox.host.process import Forbidden

PACKAGE = Path(__file__).resolve().parents[1]
PROJECT = PACKAGE.parent
# What a bundle holds of its own at its top, beside the starter files, the notebooks and the staff tests' folders:
# `check` in the bundle lists none of it (commands/check.students_own), only the student's files (tests/test_bundle.py
# checks it). Here, not in bundle.py, whose notebooks library a check need not import.
BUNDLE_OWN = ("README.md", "autograder", "expected.bin", "grading.yaml", "handouts", "pyproject.toml", "pytest.ini",
              "requirements.txt", "test_visible.py")

# The lines around the rules: in a handout, comments that Markdown does not show; in a solution, a heading,
# and the rules run to the end of the module docstring.
RULES_BEGIN = {".md": "<!-- BEGIN RULES: written by `autograder release` from grading.yaml and autograder/forbidden.py -->",
               ".py": "What you may not use here (written by `autograder release` from grading.yaml):"}
RULES_END = {".md": "<!-- END RULES -->", ".py": '"""'}
WIDTH = 79
WHAT_RUNS = ("A forbidden call that your code makes while it is graded fails every case of the component, with the call "
             "and its line in the feedback, however your code reaches it: by an alias, through another module that holds "
             "it, with `getattr`, or by creating or subclassing a forbidden class. So does any of your code that runs a "
             "forbidden operator, whatever route reaches it, and importing a forbidden module. A forbidden name in code that never runs (a call in a branch the cases never take, an import "
             "in a function nothing calls) costs nothing: the grader reports it, with its line, and flags it for course "
             "staff to review.")
BACK_DOORS = ("Your files, and every file of yours they import, may not use the interpreter's back doors, which no "
              "solution needs. The grader reads your files before running any of them and refuses a file that uses one, "
              "even in code that would never run: every case of the component fails, and the feedback names the line. "
              "An attribute counts in any form: `x.name`, `getattr(x, 'name')`, `from x import name`, a "
              "`case C(name=...)` pattern. Refused:")


class ReleaseError(Exception):
    """A release cannot be made from here; the message says why."""


def package_files() -> list[Path]:
    """The grader's package as installing it would install it: its modules and the package data pyproject.toml lists."""
    pyproject = PROJECT / "pyproject.toml"
    if not pyproject.is_file():
        raise ReleaseError(f"no pyproject.toml next to the grader's package {PACKAGE}: release from the project's checkout")
    data = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["autograder"]
    return sorted({p for pattern in ["**/*.py", *data] for p in PACKAGE.glob(pattern) if p.is_file() and "__pycache__" not in p.parts})


def render_rules(rubric: Rubric) -> dict[Path, str]:
    """Each handout (assignments/<component>.md) and solution file there is, with its rules as `autograder release` writes them."""
    if rubric.solutions_dir is None:
        raise ReleaseError(f"{rubric.path.name} is a student bundle's; release from the course's rubric")
    documents = {rubric.path.parent / "assignments" / f"{c.id}.md": [c] for c in rubric.components}
    for c in rubric.components:
        documents.setdefault(rubric.solutions_dir / c.file, []).append(c)
    return {path: _with_rules(path, rules_text(components, path.suffix == ".md"))
            for path, components in documents.items() if path.is_file()}


def write_rules(rubric: Rubric) -> list[str]:
    """Rewrite the rules of every handout and solution file that has drifted; return their paths, from the rubric's folder."""
    stale = _stale(rubric)
    for path, text in stale.items():
        path.write_text(text)
    return [_shown(rubric, path) for path in stale]


def stale_rules(rubric: Rubric) -> list[str]:
    """The handouts and solution files whose rules have drifted from grading.yaml and forbidden.py; [] when current."""
    return [_shown(rubric, path) for path in _stale(rubric)]


def _stale(rubric: Rubric) -> dict[Path, str]:
    return {path: text for path, text in render_rules(rubric).items() if path.read_text() != text}


def _shown(rubric: Rubric, path: Path) -> str:
    root = rubric.path.parent.resolve()
    return str(path.resolve().relative_to(root)) if path.resolve().is_relative_to(root) else str(path)


def rules_text(components: list[Component], markdown: bool) -> list[str]:
    """The rules of `components` (those of one handout, or of one file), as lines of a handout or of a docstring."""
    groups: dict[Forbidden, list[str]] = {}  # components of one file that forbid the same are described once
    for c in components:
        groups.setdefault(c.forbidden, []).append(f"`{c.id}`")
    blocks: list[str | list[str]] = []  # a paragraph, or a list's items
    for forbidden, ids in groups.items():
        who = "this component" if len(components) == 1 else f"component{'s' * (len(ids) > 1)} {' and '.join(ids)}"
        if forbidden != Forbidden():
            blocks += [f"Forbidden in {who}:", forbidden_rules(forbidden), WHAT_RUNS]
        else:
            blocks.append(f"No module or call is forbidden in {who}.")
    blocks += [BACK_DOORS, tamper_rules()]
    lines = ["## What your code may not use", ""] if markdown else []
    for block in blocks:
        if isinstance(block, str):
            lines += _wrap(block) + [""]
        else:
            lines += [line for item in block for line in _wrap(item, "- ", "  ")] + [""]
    return lines[:-1]


def _wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False)


def _with_rules(path: Path, rules: list[str]) -> str:
    """The text of `path` with `rules` between its rules markers."""
    begin, end = RULES_BEGIN[path.suffix], RULES_END[path.suffix]
    text = path.read_text()
    lines = text.split("\n")
    if lines.count(begin) != 1:
        raise ReleaseError(f"{path}: put the line {begin!r} once where `autograder release` is to write the rules"
                           + (", at the end of the module docstring" if path.suffix == ".py" else f", and {end!r} after it"))
    start = lines.index(begin) + 1
    stop = next((i for i in range(start, len(lines)) if lines[i] == end), None)
    if stop is None or (path.suffix == ".py" and not _closes_module_docstring(path, text, stop + 1)):
        raise ReleaseError(f"{path}: the rules that start at line {start} must end with a line {end!r}"
                           + (" that closes the module docstring" if path.suffix == ".py" else ""))
    return "\n".join(lines[:start] + rules + lines[stop:])


def _closes_module_docstring(path: Path, source: str, line: int) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise ReleaseError(f"{path}:{err.lineno}: syntax error: {err.msg}") from err
    return ast.get_docstring(tree) is not None and tree.body[0].end_lineno == line
