"""Finding a submission's files: a folder, a .zip of one, or a single .py or .ipynb file.

The files are copied (never imported) into a private folder. Component files
are looked for at the top level, then in one nested folder, which is how
students zip a folder and how Gradescope stores uploads. A Jupyter notebook
named after a component file (ngram.ipynb) stands for that file: its code
cells become the module (ngram.py), unless ngram.py is there too.
"""
from __future__ import annotations

import json
import re
import tokenize
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .collect import COMPONENT_FILES

API_FILES = frozenset(COMPONENT_FILES.values())


def notebook_name(file: str) -> str:
    """The notebook that may stand for component file `file`: ngram.py -> ngram.ipynb."""
    return file.removesuffix(".py") + ".ipynb"


NOTEBOOKS = frozenset(notebook_name(f) for f in API_FILES)
MAX_FILE_BYTES = 1 << 20
MAX_NOTEBOOK_BYTES = 16 << 20  # outputs and images make notebooks far larger than their code
MAX_ZIP_BYTES = 64 << 20
CHECK_TAG = "autograder-check"  # the notebook cell that runs `autograder check`: never part of the module
# A line IPython runs as a magic or a shell command: `%time f()`, `!pip install x`, `files = !ls`.
# None of these is valid Python at the start of a statement, so blanking them never changes valid code.
_MAGIC = re.compile(r"\s*([%!]|[\w.]+(\s*,\s*[\w.]+)*\s*=\s*[%!])")


class SubmissionError(Exception):
    """The submission cannot be read at all; the message says why."""


class NotebookError(Exception):
    """A notebook cannot stand for its component file; the message names it and says why."""


@dataclass(frozen=True)
class Submission:
    dir: Path  # flat folder of the submission's .py files
    files: frozenset[str]  # the student-API files present
    notes: tuple[str, ...] = ()  # what was skipped, for the report
    problems: dict[str, str] = field(default_factory=dict)  # API file -> why its notebook could not stand for it


def open_submission(path: Path, workdir: Path) -> Submission:
    """Copy the submission's Python files from `path` into `workdir`, and the code of its notebooks."""
    if not path.exists():
        raise SubmissionError(f"{path} does not exist")
    workdir.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        sources = {p.relative_to(path).as_posix(): p.read_bytes for p in path.rglob("*") if _wanted(p.name) and p.is_file()}
    elif path.suffix == ".zip":
        sources = _zip_sources(path)
    elif path.suffix in (".py", ".ipynb"):
        if path.name not in API_FILES | NOTEBOOKS:
            raise SubmissionError(f"a single file must be one of {', '.join(sorted(API_FILES))}, "
                                  f"or a notebook named like one (ngram.ipynb); got {path.name}")
        sources = {path.name: path.read_bytes}
    else:
        raise SubmissionError(f"{path.name}: expected a folder, a .zip or a .py file or .ipynb notebook")
    folder = _component_folder(sources)
    notes, problems = [], {}
    for rel, read in sources.items():
        rel_path = PurePosixPath(rel)
        module = rel_path.stem + ".py"
        if rel_path.parent.as_posix() != folder:
            continue
        if rel_path.suffix == ".py":
            data = read()
            if len(data) > MAX_FILE_BYTES:
                notes.append(f"{rel} skipped: larger than {MAX_FILE_BYTES >> 10} KiB")
                continue
        elif rel_path.with_suffix(".py").as_posix() in sources:
            notes.append(f"{rel} ignored: {module} is there too, and is graded instead")
            continue
        else:
            try:
                data = notebook_code(read(), rel_path.name).encode()
            except NotebookError as exc:
                problems[module] = str(exc)
                continue
        (workdir / module).write_bytes(data)
    files = frozenset(p.name for p in workdir.iterdir() if p.name in API_FILES)
    return Submission(workdir, files, tuple(notes), problems)


def notebook_code(data: bytes, name: str) -> str:
    """The module that notebook `name` stands for: its code cells in order, each under a `# cell N` line,
    less the check cell, cell magics, and lines IPython runs as magics or shell commands (blanked, so
    that line numbers within a cell hold). NotebookError when the notebook or its code is unusable."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB; clear its outputs, save it and submit it again")
    cells = _code_cells(data, name)
    if sum(len(source.encode()) for _, source in cells) > MAX_FILE_BYTES:
        raise NotebookError(f"the code cells of {name} add up to more than {MAX_FILE_BYTES >> 10} KiB")
    lines, origin = [], []  # origin[i]: (cell, line in the cell) of the module's line i + 1
    for number, source in cells:
        if source.lstrip().startswith("%%"):  # a cell magic hands the whole cell to IPython
            continue
        cell_lines = _without_magics(source.split("\n"))
        lines += [f"# cell {number}", *cell_lines, ""]
        origin += [(number, i) for i in range(len(cell_lines) + 2)]
    code = "\n".join(lines)
    try:
        compile(code, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = ""
        if exc.lineno:
            cell, line = origin[min(exc.lineno, len(origin)) - 1]
            where = f", in cell {cell} (counting every cell from the top), line {line}: {(exc.text or '').strip()}"
        raise NotebookError(f"{name} holds code that is not valid Python: {exc.msg}{where}") from None
    except (ValueError, MemoryError, RecursionError) as exc:  # null bytes; nesting too deep for the parser
        raise NotebookError(f"{name} holds code that Python cannot compile ({type(exc).__name__}: {exc})") from None
    return code


def _code_cells(data: bytes, name: str) -> list[tuple[int, str]]:
    """(number, source) of the notebook's code cells, the check cell left out; only what that needs is checked."""
    def unreadable(why: str) -> NotebookError:
        return NotebookError(f"{name} could not be read as a Jupyter notebook: {why}")

    try:
        notebook = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise unreadable(f"it is not valid JSON ({exc})") from None
    try:
        if notebook["nbformat"] != 4:
            raise unreadable(f"it has nbformat {notebook['nbformat']!r}; only version 4 notebooks (Jupyter's format since 2015) are read")
        return [(number, cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"]))
                for number, cell in enumerate(notebook["cells"], 1)
                if cell["cell_type"] == "code" and CHECK_TAG not in cell.get("metadata", {}).get("tags", [])]
    except (KeyError, TypeError, AttributeError) as exc:  # a missing key, or a value of the wrong kind
        raise unreadable(f"it does not have a notebook's structure ({type(exc).__name__}: {exc})") from None


def _without_magics(lines: list[str]) -> list[str]:
    """`lines` of one cell, those IPython runs as magics or shell commands blanked. Only a line that starts
    a statement can be one, and tokenize says where statements end: a `%` line that continues a string
    or an expression is kept. Tokenize reads one line at a time, after the tokens of the one before."""
    out, ends, depth = [], {0}, 0  # ends: lines on which a statement ended (0: before the first)

    def readline() -> str:
        if len(out) == len(lines):
            return ""
        line = lines[len(out)]
        out.append("" if len(out) in ends and _MAGIC.match(line) else line)
        return out[-1] + "\n"

    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.OP:
                depth += (token.string in "([{") - (token.string in ")]}")
            elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
                ends.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass  # not Python: the rest stays as written, and compiling it names the line
    return out + lines[len(out):]


def _wanted(name: str) -> bool:
    return name.endswith(".py") or PurePosixPath(name).name in NOTEBOOKS


def _component_folder(sources: dict) -> str:
    """The folder holding the student-API files: the top level, else one nested folder."""
    by_folder: dict[str, int] = {}
    for rel in sources:
        p = PurePosixPath(rel)
        if p.name in API_FILES | NOTEBOOKS and len(p.parts) <= 2 and not p.parts[0].startswith(("__MACOSX", ".")):
            by_folder[p.parent.as_posix()] = by_folder.get(p.parent.as_posix(), 0) + 1
    if not by_folder:
        return "."
    return "." if "." in by_folder else max(by_folder, key=by_folder.get)


def _zip_sources(path: Path) -> dict:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{path.name} is not a readable zip file ({exc})") from None
    members = [m for m in archive.infolist() if _wanted(m.filename) and not m.is_dir()]
    for m in members:
        p = PurePosixPath(m.filename)
        if p.is_absolute() or ".." in p.parts:
            raise SubmissionError(f"{path.name} holds an unsafe path: {m.filename}")
    if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
        raise SubmissionError(f"{path.name} unpacks to more than {MAX_ZIP_BYTES >> 20} MiB of Python files and notebooks")
    return {m.filename: (lambda m=m: archive.read(m)) for m in members}

