"""Generate a Jupyter notebook for each component file, for students who work in Jupyter.

A notebook holds the handout, then the starter code, one cell per top-level
function or class, then a cell that runs `autograder check` on the saved
notebook. It is named like the file (attention.ipynb), so it can be submitted
in place of attention.py: the grader takes its code cells, less the check cell
(autograder/submission.py). The notebooks sit in the `notebooks/` folder of
the student bundle, whose root holds the `autograder` package.
"""
from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from ..submission import CHECK_TAG, notebook_name

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
KERNEL = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
          "language_info": {"name": "python"}}


class Handout(NamedTuple):
    component: str  # the component id, e.g. "causal_mask"
    title: str  # e.g. "Causal masking"
    markdown: str  # the text of assignments/<component>.md


def render_notebook(file: str, source: str, handouts: Sequence[Handout]) -> nbformat.NotebookNode:
    """The notebook for component file `file` (e.g. "attention.py") with code `source` and the handouts
    of the components graded from it, in order."""
    name = notebook_name(file)
    intro = (f"# `{file}`: {', '.join(h.title for h in handouts)}\n\n"
             f"The handout first, then your code, then a cell that checks it. Submit this notebook as `{name}`, "
             f"or your code as `{file}`: when both are there, the one you worked on is graded (the `.py` if both are). The code cells are graded "
             f"as the module `{file}`, top to bottom; lines that only IPython understands (`%time`, `!pip`) and "
             "the check cell are left out.")
    cells = [new_markdown_cell(intro)]
    cells += [new_markdown_cell(section) for h in handouts for section in _sections(h.markdown)]
    cells.append(new_markdown_cell("## Your code\n\nReplace each `raise NotImplementedError` with your implementation."))
    cells += [new_code_cell(chunk) for chunk in _chunks(source)]
    cells.append(new_code_cell(_check_cell(name, [h.component for h in handouts]), metadata={"tags": [CHECK_TAG]}))
    for i, cell in enumerate(cells):
        cell.id = f"cell-{i}"  # fixed ids (nbformat draws random ones), so a regenerated notebook is the same file
    notebook = new_notebook(cells=cells, metadata=KERNEL)
    nbformat.validate(notebook)
    return notebook


def write_notebook(folder: Path, file: str, source: str, handouts: Sequence[Handout]) -> Path:
    """Write the notebook of `file` into `folder`; return its path."""
    path = folder / notebook_name(file)
    nbformat.write(render_notebook(file, source, handouts), path)
    return path


def _sections(markdown: str) -> list[str]:
    """A handout cut before each `## ` heading (one inside a code fence is code, not a heading)."""
    sections, fenced = [[]], False
    for line in markdown.splitlines():
        fenced ^= line.lstrip().startswith(("```", "~~~"))
        if line.startswith("## ") and not fenced:
            sections.append([])
        sections[-1].append(line)
    return [text for text in ("\n".join(s).strip() for s in sections) if text]


def _chunks(source: str) -> list[str]:
    """`source` cut before each top-level function or class, with its decorators and the comments right
    above it: first the docstring, imports and constants, then one definition per cell."""
    lines = source.splitlines(keepends=True)
    body = ast.parse(source).body
    cuts = [0]
    for before, node in zip([None, *body], body):
        if isinstance(node, DEFINITIONS):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            while start > (before.end_lineno if before else 0) and lines[start - 1].startswith("#"):
                start -= 1
            cuts.append(start)
    cuts.append(len(lines))
    return [text for text in ("".join(lines[a:b]).strip() for a, b in zip(cuts, cuts[1:])) if text]


def _check_cell(name: str, components: list[str]) -> str:
    return f'''# Runs the visible cases on your code exactly as the grader will. Save the notebook first
# (Ctrl+S or Cmd+S): the check reads the saved notebooks/{name}, not what this kernel has run.
import subprocess
import sys
from pathlib import Path

# The bundle is the folder holding autograder/ and grading.yaml: the one this notebook was opened from, or one above it.
bundle = next((folder for folder in [Path.cwd(), *Path.cwd().parents]
               if (folder / "autograder").is_dir() and (folder / "grading.yaml").is_file()), None)
if bundle is None:
    raise FileNotFoundError(f"No bundle (a folder holding autograder/ and grading.yaml) in {{Path.cwd()}} or above it. Open "
                            "this notebook from the notebooks/ folder of your bundle, or run, in a terminal in the bundle's "
                            "folder: python -m autograder check --dir notebooks")
for component in {components!r}:
    check = subprocess.run([sys.executable, "-m", "autograder", "check", component, "--dir", "notebooks"],
                           cwd=bundle, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(check.stdout)
    # Status 0: every case passes; 1: a case fails, and the table above says which. Anything else, or no
    # "Total:" line (Python's own status for an error is 1 too), means the check itself could not run.
    if check.returncode not in (0, 1) or "Total: " not in check.stdout:
        raise RuntimeError(f"`python -m autograder check {{component}} --dir notebooks` could not run in {{bundle}} (exit status "
                           f"{{check.returncode}}; its output is above). This notebook runs {{sys.executable}}: is that the "
                           "Python you ran `pip install -r requirements.txt` with?")'''
