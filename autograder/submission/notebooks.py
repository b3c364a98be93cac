"""A notebook's code as a module: a Jupyter notebook named after a component file (ngram.ipynb), in any folder, stands
for that file, its code cells in order becoming the module (ngram.py). The cells a release adds (tagged CHECK_TAG)
and what IPython runs as magics or shell commands are left out; a notebook's check cell (notebook_check.py) reads the
cells as this module does.
"""
from __future__ import annotations

import json
import re
import tokenize

from .reading import MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES

CHECK_TAG = "autograder-check"  # the cells a release adds to a notebook (Colab's set-up, the check): never part of the module
_NOT_TEXT = re.compile("[\0\ud800-\udfff]")  # what Python cannot compile, or a string cannot hold as UTF-8
# A line IPython runs as a magic or a shell command: `%time f()`, `!pip install x`, `files = !ls`.
# None of these is valid Python at the start of a statement, so blanking them never changes valid code.
_MAGIC = re.compile(r"\s*([%!]|[\w.]+(\s*,\s*[\w.]+)*\s*=\s*[%!])")


class NotebookError(Exception):
    """A notebook cannot stand for its component file; the message names it and says why."""


def notebook_code(data: bytes, name: str) -> str:
    """The module that notebook `name` stands for: its code cells in order, each under a `# cell N` line,
    less the cells tagged CHECK_TAG, cell magics, and lines IPython runs as magics or shell commands (blanked,
    so that line numbers within a cell hold). NotebookError when the notebook or its code is unusable."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB; clear its outputs, save it and submit it again")
    cells = _code_cells(data, name)
    if sum(len(source.encode()) for _, source in cells) > MAX_FILE_BYTES:
        raise NotebookError(f"the code cells of {name} add up to more than {MAX_FILE_BYTES >> 10} KiB")
    lines, origin = [], []  # origin[i]: (cell, line in the cell) of the module's line i + 1
    for number, source in cells:
        kept = cell_lines(source)
        if kept is None:
            continue
        lines += [f"# cell {number}", *kept, ""]
        origin += [(number, i) for i in range(len(kept) + 2)]
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
        raise NotebookError(f"{name} holds code that Python cannot compile ({type(exc).__name__}: {str(exc) or 'nested too deeply'})") from None
    return code


def graded_cell(cell: dict) -> bool:
    """Whether a notebook's cell (its JSON) is part of the module: a code cell not tagged CHECK_TAG."""
    return cell["cell_type"] == "code" and CHECK_TAG not in cell.get("metadata", {}).get("tags", [])


def cell_source(cell: dict) -> str:
    """A notebook cell's text (nbformat allows a string or a list of lines)."""
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def cell_lines(source: str) -> list[str] | None:
    """The lines of a code cell as the module holds them, those IPython runs as magics or shell commands blanked;
    None for a cell magic (`%%bash`), which hands the whole cell to IPython."""
    return None if source.lstrip().startswith("%%") else _without_magics(source.split("\n"))


def _code_cells(data: bytes, name: str) -> list[tuple[int, str]]:
    """(number, source) of the notebook's graded cells; only what that needs is checked."""
    def unreadable(why: str) -> NotebookError:
        return NotebookError(f"{name} could not be read as a Jupyter notebook: {why}")

    try:
        notebook = json.loads(data)  # UTF-16 and UTF-32 too, as JSON allows
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise unreadable(f"it is not valid JSON ({exc}); open it in Jupyter, save it and submit it again") from None
    try:
        if notebook["nbformat"] != 4:
            raise unreadable(f"it has nbformat {notebook['nbformat']!r}; only version 4 notebooks (Jupyter's format since 2015) are "
                             "read: open it in Jupyter, which converts it, save it and submit it again")
        cells = [(number, cell_source(cell)) for number, cell in enumerate(notebook["cells"], 1) if graded_cell(cell)]
    except (KeyError, TypeError, AttributeError) as exc:  # a missing key, or a value of the wrong kind
        raise unreadable(f"it does not have a notebook's structure ({type(exc).__name__}: {exc})") from None
    for number, source in cells:  # JSON's escapes can write what no text file holds
        bad = _NOT_TEXT.search(source)
        if bad:
            raise unreadable(f"cell {number}, line {source.count(chr(10), 0, bad.start()) + 1}, holds {ascii(bad[0])}, which is not "
                             "text (a NUL or half of a UTF-16 pair); delete it, save the notebook and submit it again")
    return cells


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
