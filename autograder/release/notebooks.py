"""Generate a Jupyter notebook for each component file, for students who work in Jupyter.

A notebook holds a cell that installs the bundle in Colab (and does nothing
elsewhere), the handout, then the starter code, one cell per top-level function
or class, then a cell that checks the notebook (autograder/notebook_check.py).
It is named like the file (attention.ipynb), so it can be submitted in place of
attention.py: the grader takes its code cells, less the two it added, which are
tagged CHECK_TAG (autograder/submission/notebooks.py). The notebooks sit in the
`notebooks/` folder of the student bundle, whose root holds the `autograder`
package.
"""
from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from ..submission.names import notebook_name
from ..submission.notebooks import CHECK_TAG

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
             "The cell below sets up Colab (elsewhere it does nothing); then come the handout, your code, and a cell "
             f"that checks it. Submit this notebook as `{name}`, "
             f"or your code as `{file}`: when both are there, the one you worked on is graded (the `.py` if both are). The code cells are graded "
             f"as the module `{file}`, top to bottom; lines that only IPython understands (`%time`, `!pip`), "
             "the set-up cell and the check cell are left out.")
    cells = [new_markdown_cell(intro), new_code_cell(_setup_cell(name), metadata={"tags": [CHECK_TAG]})]
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


def _setup_cell(name: str) -> str:
    """The cell that installs, in Colab, the bundle whose zip the student uploaded (the bundle's README says how)."""
    return f'''# Colab only: unpacks the bundle's zip, which you uploaded through the Files pane, and installs what it needs
# (the bundle's README, "Set up: Colab"). Anywhere else this cell does nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess
    import zipfile
    from pathlib import Path

    here = Path.cwd()  # /content, where the Files pane uploads
    for archive in here.glob("*.zip"):
        if not (here / archive.stem).exists() and any(n.endswith("notebooks/{name}") for n in zipfile.ZipFile(archive).namelist()):
            zipfile.ZipFile(archive).extractall(here / archive.stem)
    bundles = sorted(path.parents[1] for path in [*here.glob("*/notebooks/{name}"), *here.glob("*/*/notebooks/{name}")]
                     if (path.parents[1] / "grading.yaml").is_file())
    if not bundles:
        raise FileNotFoundError(f"No bundle holding notebooks/{name} in {{here}}: upload the bundle's zip through the Files pane "
                                "(the folder icon on the left), wait until the upload is done, then run this cell again.")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", "requirements.txt"], cwd=bundles[0], check=True)
    sys.path.append(str(bundles[0]))  # the grader's install counts from Python's next start; this kernel finds it here now
    print(f"Installed the grader of {{bundles[0]}}: the last cell of this notebook checks your code.")'''


def _check_cell(name: str, components: list[str]) -> str:
    return f'''# Runs the visible cases on your code exactly as the grader will. It checks the saved notebook, so save first
# (Ctrl+S or Cmd+S): if this kernel ran code the saved notebook does not hold, it says so and checks nothing.
# In Colab it checks this notebook as it stands.
import sys

try:
    from autograder.notebook_check import check_notebook
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(f"This notebook runs {{sys.executable}}, which lacks {{missing.name}}: choose the kernel of the Python "
                              "you ran `pip install -r requirements.txt` with (in Colab, run the first cell).") from None
check_notebook({name!r}, {components!r})'''
