"""What a notebook's check cell runs, in the student's kernel: `python -m autograder check` on the notebook as the
grader will read it.

Jupyter and VS Code check the saved notebook, so a cell edited and run but not saved would be checked as it was
saved, without a word: the check compares what the kernel last ran of each definition with the saved notebook, and
when they differ it says to save instead of grading. Colab keeps the notebook in the browser, not in the bundle: the
check writes the notebook the browser holds, unsaved edits included, into the bundle's notebooks/ folder first.
The kernel imports this module and autograder.submission (with the case modules it reads), none of the grader's
batch or report libraries.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from .submission.notebooks import cell_lines, cell_source, graded_cell

COLAB_WAIT_S = 30  # how long Colab's browser gets to hand over the notebook


def check_notebook(name: str, components: list[str]) -> None:
    """Run the visible cases of `components` on notebook `name` (ngram.ipynb) and print the results, or print why
    nothing was checked. Raises when no check could run, or the grader itself failed."""
    bundle = find_bundle()
    if "google.colab" in sys.modules:
        folder = bundle / "notebooks"
        _save_colab_notebook(folder / name)
    else:
        folder = Path.cwd() if (Path.cwd() / name).is_file() else bundle / "notebooks"
        stale = stale_definitions(_kernel_history(), folder / name)
        if stale:
            listed = ", ".join(f"`{n}`" for n in stale)
            cells = "the cell that defines" if len(stale) == 1 else "the cells that define"
            print(f"Not checked: this kernel last ran other code for {listed} than the saved {name} holds, and the check "
                  f"reads the saved file: save the notebook first (Ctrl+S / Cmd+S), then run this cell again (if it is "
                  f"saved, run {cells} {listed} again).")
            return
    command = [sys.executable, "-m", "autograder", "check", *components, "--dir", str(folder)]
    # UTF-8 both ways: a Windows pipe would otherwise carry the console's code page, which lacks the messages' symbols
    check = subprocess.run(command, cwd=bundle, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, encoding="utf-8",
                           errors="replace", env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    print(check.stdout)
    if check.returncode == 3:
        raise RuntimeError("The grader itself failed on a case (its message is above): that is not your code; tell course staff.")
    # Status 0: every case passes; 1: a case fails, and the table above says which. Anything else, or no
    # "Total:" line (Python's own status for an error is 1 too), means the check itself could not run.
    if check.returncode not in (0, 1) or "Total: " not in check.stdout:
        raise RuntimeError(f"`python -m autograder check {' '.join(components)} --dir {folder}` could not run in {bundle} (exit "
                           f"status {check.returncode}; its output is above). This notebook runs {sys.executable}: is that the "
                           "Python you ran `pip install -r requirements.txt` with?")


def find_bundle() -> Path:
    """The bundle (a folder holding autograder/, grading.yaml and notebooks/): the kernel's folder or one above it,
    as Jupyter and VS Code start a kernel in its notebook's folder; else the one this package was installed from."""
    here = Path.cwd()
    installed = Path(__file__).resolve().parents[1]
    for folder in [here, *here.parents, installed]:
        if (folder / "autograder").is_dir() and (folder / "grading.yaml").is_file() and (folder / "notebooks").is_dir():
            return folder
    raise FileNotFoundError(f"No bundle (a folder holding autograder/, grading.yaml and notebooks/) in {here} or above it, "
                            "and the grader here was not installed from one. Open this notebook from the notebooks/ folder of "
                            "your bundle, or run, in a terminal in the bundle's folder: python -m autograder check --dir notebooks")


def stale_definitions(history: list[str], saved: Path) -> list[str]:
    """The names the saved notebook defines whose definition the kernel last ran differs from the saved one, the
    notebook not having been saved since that run: code run but not saved. `history[n]` is the cell the kernel ran
    as execution count n; the notebook's own cells (set-up, check) are left out, as the grader leaves them out. A
    saved cell keeps the count it last ran with, so a definition edited and saved but not run since (its saved cell
    has the count of the run) is not stale."""
    try:  # (graded, source, count) of each code cell
        cells = [(graded_cell(cell), cell_source(cell), cell.get("execution_count"))
                 for cell in json.loads(saved.read_bytes())["cells"] if cell["cell_type"] == "code"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []  # unreadable: the check says why
    ours = {source.strip() for graded, source, _ in cells if not graded}
    ran = {}  # name -> (count, definition) of the last run that defined it
    for count, source in enumerate(history):
        if source.strip() not in ours:
            ran |= {name: (count, definition) for name, definition in _definitions(source).items()}
    defined, saved_runs = {}, set()
    for graded, source, count in cells:
        if graded:
            found = _definitions(source)
            defined |= found
            saved_runs |= {(count, name) for name in found}
    return sorted(name for name, (count, definition) in ran.items()
                  if name in defined and definition != defined[name] and (count, name) not in saved_runs)


def _definitions(source: str) -> dict[str, str]:
    """The names a cell's top-level statements bind (functions, classes, assignments, imports), each with the last
    statement binding it, as ast.dump has it (comments and spacing aside): as the grader reads the cell, IPython's own
    lines left out; none for a cell that is not valid Python, which defined nothing when it ran."""
    lines = cell_lines(source)
    try:
        body = ast.parse("\n".join(lines)).body if lines is not None else []
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return {}
    found = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*"]
        else:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        found |= dict.fromkeys(names, ast.dump(node))
    return found


def _kernel_history() -> list[str]:
    """The cells this IPython kernel ran, as typed, by execution count (the last one this check); none outside IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython else None
    return list(shell.history_manager.input_hist_raw) if shell else []


def _save_colab_notebook(path: Path) -> None:
    """Write to `path` the notebook that Colab's browser holds, unsaved edits included. Only Colab has google.colab:
    tests/test_bundle.py stands in a module that answers as Colab's does, so what Colab itself sends is untested."""
    from google.colab import _message
    reply = _message.blocking_request("get_ipynb", request="", timeout_sec=COLAB_WAIT_S)
    if not reply:
        raise RuntimeError(f"Colab did not hand over this notebook within {COLAB_WAIT_S} seconds; run this cell again.")
    path.write_text(json.dumps(reply["ipynb"]))
