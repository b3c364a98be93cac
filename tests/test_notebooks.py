"""Notebook submissions: ngram.ipynb stands for ngram.py, and the generated notebooks submit as their module."""
import ast
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, SOLUTIONS, grade_folder, scores_by_component
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.notebook_check import stale_definitions
from autograder.release import rules_text
from autograder.release.notebooks import Handout, render_notebook, write_notebook
from autograder.submission import open_submission
from autograder.submission.notebooks import CHECK_TAG, NotebookError, notebook_code
from autograder.submission.reading import MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES, SubmissionError


def ngram_notebook(folder: Path, source: Path) -> Path:
    """ngram.ipynb, generated as the release does, with `source` as its code."""
    folder.mkdir(parents=True, exist_ok=True)
    handout = Handout("ngram", "N-gram language model", (ROOT / "assignments" / "ngram.md").read_text())
    return write_notebook(folder, "ngram.py", source.read_text(), [handout])


def as_bytes(*cells) -> bytes:
    return nbformat.writes(new_notebook(cells=list(cells))).encode()


def test_magics_and_shell_escapes_are_left_out_and_line_numbers_kept():
    cell = ("%matplotlib inline\n"
            "!pip install numpy\n"
            "files = !ls\n"
            "t = %time sum([1])\n"
            "x = 5 % 3\n"
            's = """\n'
            "%d of them\n"
            "!not a shell command\n"
            '"""\n'
            "y = (7\n"
            "     % 4)\n"
            "def f():\n"
            "    %time f()\n"
            "    return x")
    code = notebook_code(as_bytes(new_markdown_cell("# Title"), new_code_cell(cell), new_code_cell("%%bash\necho hi"),
                                  new_code_cell("import subprocess", metadata={"tags": [CHECK_TAG]}),
                                  new_code_cell("z = f() + y")), "ngram.ipynb")
    lines = code.splitlines()
    assert lines[:16] == ["# cell 2", "", "", "", "", *cell.splitlines()[4:12], "", "    return x", ""]
    assert lines[16:] == ["# cell 5", "z = f() + y"]
    namespace = {}
    exec(code, namespace)
    assert (namespace["s"], namespace["y"], namespace["z"]) == ('\n%d of them\n!not a shell command\n', 3, 5)


@pytest.mark.parametrize("data, message", [
    (b"print('hello')", "ngram.ipynb could not be read as a Jupyter notebook: it is not valid JSON"),
    (b"[1, 2]", "ngram.ipynb could not be read as a Jupyter notebook: it does not have a notebook's structure"),
    (b'{"nbformat": 4, "cells": [{"cell_type": "code"}]}', "does not have a notebook's structure (KeyError: 'source')"),
    (b'{"nbformat": 3, "worksheets": []}', "it has nbformat 3; only version 4 notebooks"),
    (as_bytes(new_markdown_cell("# Title"), new_code_cell("x = 1"), new_code_cell("y = 2\ndef f(:\n    pass")),
     "ngram.ipynb holds code that is not valid Python: invalid syntax, in cell 3 (counting every cell from the top), line 2: def f(:"),
    (b" " * (MAX_NOTEBOOK_BYTES + 1), f"ngram.ipynb is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB; clear its outputs"),
    (as_bytes(new_code_cell("#" * MAX_FILE_BYTES), new_code_cell("x = 1")), "the code cells of ngram.ipynb add up to more than 1024 KiB"),
])
def test_unusable_notebooks_say_why(data, message):
    with pytest.raises(NotebookError) as caught:
        notebook_code(data, "ngram.ipynb")
    assert message in str(caught.value)


@pytest.mark.slow
def test_notebook_of_the_solution_earns_full_marks_as_folder_zip_or_file(rubric, tmp_path):
    path = ngram_notebook(tmp_path / "hw", SOLUTIONS / "ngram.py")
    archive = tmp_path / "hw.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(path, "hw/ngram.ipynb")
    for i, submitted in enumerate([path.parent, archive, path]):
        run = grade_folder(rubric, submitted, tmp_path / str(i), component_ids=["ngram"])
        got, most = scores_by_component(run)["ngram"]
        assert got == most > 0, (submitted, [r.output for r in run.results if not r.passed])


@pytest.mark.slow
def test_notebook_of_the_starter_earns_nothing(rubric, tmp_path):
    run = grade_folder(rubric, ngram_notebook(tmp_path / "hw", ROOT / "starter" / "ngram.py").parent, tmp_path,
                       component_ids=["ngram"])
    assert scores_by_component(run)["ngram"][0] == 0
    assert all(r.output.startswith("Not implemented yet") for r in run.results)


@pytest.mark.parametrize("garbage, why", [("{not json", "it is not valid JSON"), ('{"cells": []}', "it does not have a notebook's structure")])
@pytest.mark.slow
def test_unreadable_notebook_fails_its_component_only(rubric, tmp_path, garbage, why):
    folder = tmp_path / "hw"
    folder.mkdir()
    (folder / "ngram.ipynb").write_text(garbage)
    (folder / "backprop.py").write_bytes((SOLUTIONS / "backprop.py").read_bytes())
    run = grade_folder(rubric, folder, tmp_path, component_ids=["ngram", "backprop"])
    scores = scores_by_component(run)
    assert scores["ngram"][0] == 0 and scores["backprop"][0] == scores["backprop"][1] > 0
    assert all(r.output.startswith(f"Not graded: ngram.ipynb could not be read as a Jupyter notebook: {why}")
               for r in run.results if r.case.component == "ngram")


def test_worked_python_file_wins_over_the_starter_notebook(tmp_path):
    folder = tmp_path / "hw"
    ngram_notebook(folder, ROOT / "starter" / "ngram.py")
    (folder / "ngram.py").write_bytes((SOLUTIONS / "ngram.py").read_bytes())
    sub = open_submission(folder, tmp_path / "out")
    assert sub.files == {"ngram.py"} and not sub.problems and not sub.caveats
    assert (sub.dir / "ngram.py").read_bytes() == (SOLUTIONS / "ngram.py").read_bytes()
    assert [str(e) for e in sub.account] == [
        "ngram.ipynb: ignored: the untouched starter (its functions only raise NotImplementedError); ngram.py is graded instead",
        "ngram.py: graded"]


def test_single_notebook_must_be_named_like_a_component_file(tmp_path):
    (tmp_path / "homework.ipynb").write_bytes(as_bytes(new_code_cell("x = 1")))
    with pytest.raises(SubmissionError, match="or a notebook named like one"):
        open_submission(tmp_path / "homework.ipynb", tmp_path / "out")


def test_generated_cells_follow_the_handout_sections_and_the_definitions():
    handout = "# Title\n\nIntro.\n\n## One\n\n```python\n## a comment, not a heading\n```\n\n## Two\n"
    source = ('"""Doc."""\nimport functools\n\nN = 2\n\n\n# cached: called often\n@functools.cache\ndef f():\n    return N\n\n'
              'M = 3\n\n\nclass C:\n    pass\n')
    notebook = render_notebook("ngram.py", source, [Handout("ngram", "N-grams", handout)])
    markdown = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    assert markdown[1:4] == ["# Title\n\nIntro.", "## One\n\n```python\n## a comment, not a heading\n```", "## Two"]
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    assert code[1:-1] == ['"""Doc."""\nimport functools\n\nN = 2', "# cached: called often\n@functools.cache\ndef f():\n    return N\n\nM = 3",
                         "class C:\n    pass"]
    assert notebook.cells[1].metadata.tags == notebook.cells[-1].metadata.tags == [CHECK_TAG]  # Colab's set-up; the check
    assert "google.colab" in code[0] and "check_notebook('ngram.ipynb', ['ngram'])" in code[-1]


@pytest.mark.parametrize("starter", sorted((ROOT / "starter").glob("*.py")), ids=lambda p: p.name)
def test_generated_notebook_gives_back_the_starter(starter):
    """One cell per definition, and the module graded is the starter: the notebook's own cells (Colab's set-up, the
    check) are left out."""
    notebook = render_notebook(starter.name, starter.read_text(), [Handout(starter.stem, starter.stem, "# Handout")])
    nbformat.validate(notebook)
    definitions = (ast.FunctionDef, ast.ClassDef)
    cells = [ast.parse(c.source).body for c in notebook.cells if c.cell_type == "code"][1:-1]
    assert not any(isinstance(node, definitions) for node in cells[0])
    assert all(len(body) == 1 and isinstance(body[0], definitions) for body in cells[1:])
    code = notebook_code(nbformat.writes(notebook).encode(), starter.with_suffix(".ipynb").name)
    names = lambda tree: [getattr(node, "name", None) or ast.unparse(node)[:40] for node in tree.body]
    assert names(ast.parse(code)) == names(ast.parse(starter.read_text()))


def test_generated_notebook_states_the_rules_in_the_handout_and_the_docstring(rubric):
    """The rules `autograder release` writes reach the notebook twice: the handout's section, and the starter's docstring."""
    transformer = rubric.component("transformer")
    handout = Handout("transformer", transformer.title, (ROOT / "assignments" / "transformer.md").read_text())
    notebook = render_notebook("transformer.py", (ROOT / "starter" / "transformer.py").read_text(), [handout])
    markdown = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    assert any(cell.startswith("\n".join(rules_text([transformer], markdown=True))) for cell in markdown)
    code = [c.source for c in notebook.cells if c.cell_type == "code" and CHECK_TAG not in c.metadata.get("tags", [])]
    docstring = ast.get_docstring(ast.parse(code[0]))
    assert docstring.endswith("\n".join(rules_text([transformer], markdown=False))) and "`group_norm`" in docstring


# The cells of ngram.ipynb a release adds (Colab's set-up, the check), which the kernel runs too.
SETUP, CHECK = (c.source for c in render_notebook("ngram.py", "N = 2\n", [Handout("ngram", "N-grams", "# H")]).cells
                if CHECK_TAG in c.metadata.get("tags", []))
F1, F2, F3 = ("def f():\n    return 1", "def f():\n    return 2", "def f():\n    return 3")
IMPORTS = "import os, sys\nN = 2"  # binds sys, as the set-up and check cells do (`import sys`), which are not the notebook's


@pytest.mark.parametrize("ran, saved, stale", [
    pytest.param([SETUP, IMPORTS, F1, F2, CHECK], [(2, IMPORTS), (3, F1)], ["f"], id="run-not-saved"),
    pytest.param([SETUP, IMPORTS, F1, F2, CHECK], [(2, IMPORTS), (4, F2)], [], id="an-older-run-saved-over"),
    pytest.param([SETUP, IMPORTS, F1, CHECK], [(2, IMPORTS), (3, F3)], [], id="saved-not-run"),
    pytest.param([SETUP, IMPORTS, F2, CHECK, F1, CHECK], [(2, IMPORTS), (3, F2)], ["f"], id="an-older-version-run-again"),
    pytest.param([IMPORTS, "%%time\nN = 3", "%time f()\ndef f():\n    return 2", CHECK], [(1, IMPORTS), (None, F1)], ["f"],
                 id="ipython-lines-left-out"),
    pytest.param([IMPORTS, "def f():  # a comment\n\n    return 1", CHECK], [(1, IMPORTS), (None, F1)], [], id="comments-aside"),
    pytest.param([IMPORTS, F1, "def g():\n    return 2\nN = 3", CHECK], [(1, IMPORTS), (2, F1)], ["N"], id="scratch-cell"),
])
def test_stale_definitions_are_those_run_since_the_notebook_was_saved(tmp_path, ran, saved, stale):
    """`ran` are the cells the kernel ran, by execution count from 1 (the last one the check), `saved` the graded cells
    of the saved notebook with the count each was saved with. A definition is stale when the kernel last ran another
    version of it than the notebook holds, and the notebook was saved before that run; a name only the kernel knows
    (g) is not the notebook's."""
    notebook = new_notebook(cells=[new_code_cell(SETUP, metadata={"tags": [CHECK_TAG]}),
                                   *(new_code_cell(source, execution_count=count) for count, source in saved),
                                   new_code_cell(CHECK, metadata={"tags": [CHECK_TAG]})])
    nbformat.write(notebook, tmp_path / "ngram.ipynb")
    assert stale_definitions(["", *ran], tmp_path / "ngram.ipynb") == stale
