"""Generate student starter code from the reference solutions.

In a solution file, each function's implementation sits in a region that
follows the docstring and runs to the end of the body::

    def pad_sentence(tokens, n):
        \"\"\"Return tokens with n - 1 BOS in front and one EOS at the end.\"\"\"
        # BEGIN SOLUTION
        return [BOS] * (n - 1) + tokens + [EOS]
        # END SOLUTION

The starter keeps everything else byte for byte and replaces each region with
``raise NotImplementedError("pad_sentence is not implemented yet")``.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "StarterError",
    "render_starter",
    "stale_starter",
    "strip_solution",
    "write_starter",
]

HEADER_LINES = (
    "# Starter code generated from the reference solution by `autograder release`.",
    "# Replace each `raise NotImplementedError` with your implementation.",
)
MARKER_TEXTS = ("BEGIN SOLUTION", "END SOLUTION")
_MARKER_COMMENT = re.compile(r"#\s*(BEGIN|END) SOLUTION\s*")
# Tokens that carry no code; a line holding only these is blank or a comment.
_LAYOUT_TOKENS = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
)

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class StarterError(ValueError):
    """A solution file cannot be turned into starter code."""


@dataclass(frozen=True)
class _Marker:
    kind: str  # "BEGIN" or "END"
    line: int
    col: int


@dataclass(frozen=True)
class _Function:
    qualname: str
    node: FunctionNode


@dataclass(frozen=True)
class _Region:
    begin: _Marker
    end: _Marker
    qualname: str


def strip_solution(source: str, filename: str) -> str:
    """Return the starter text for one solution file's `source`.

    Raises StarterError, naming `filename` and the line, when the solution
    regions are malformed or the file is not valid Python.
    """
    tree = _parse(source, filename)
    lines = io.StringIO(source, newline="").readlines()
    tokens = list(tokenize.generate_tokens(functools.partial(next, iter(lines), "")))
    markers = _find_markers(tokens, filename)
    code_lines = _code_lines(tokens)
    functions = _functions(tree)
    regions = [
        _check_region(begin, end, functions, code_lines, filename)
        for begin, end in _pair_markers(markers, filename)
    ]
    stripped = _replace_regions(lines, regions)
    _verify_stripped(stripped, filename)
    return _header(lines) + "".join(text for _, text in stripped)


def _parse(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename)
    except SyntaxError as err:
        raise _error(filename, err.lineno, f"syntax error: {err.msg}") from err


def _error(filename: str, line: int | None, message: str) -> StarterError:
    return StarterError(f"{filename}:{line}: {message}")


def _find_markers(tokens: list[tokenize.TokenInfo], filename: str) -> list[_Marker]:
    """BEGIN/END SOLUTION comments in file order; any other mention is an error."""
    markers = []
    for token in tokens:
        if token.type != tokenize.COMMENT or not _mentions_marker(token.string):
            continue
        line, col = token.start
        match = _MARKER_COMMENT.fullmatch(token.string)
        if match is None:
            raise _error(
                filename,
                line,
                f"malformed solution marker {token.string!r}; "
                "write exactly '# BEGIN SOLUTION' or '# END SOLUTION'",
            )
        if token.line[:col].strip():
            raise _error(filename, line, "a solution marker must be on a line of its own")
        markers.append(_Marker(match.group(1), line, col))
    return markers


def _mentions_marker(text: str) -> bool:
    return any(marker in text for marker in MARKER_TEXTS)


def _code_lines(tokens: list[tokenize.TokenInfo]) -> set[int]:
    """Line numbers touched by code (multi-line strings included)."""
    return {
        line
        for token in tokens
        if token.type not in _LAYOUT_TOKENS
        for line in range(token.start[0], token.end[0] + 1)
    }


def _functions(tree: ast.Module) -> list[_Function]:
    """Every function and method, with its qualname as Python computes it."""
    found: list[_Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = prefix + child.name
                found.append(_Function(qualname, child))
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _pair_markers(markers: list[_Marker], filename: str) -> list[tuple[_Marker, _Marker]]:
    pairs = []
    open_begin: _Marker | None = None
    for marker in markers:
        if marker.kind == "BEGIN":
            if open_begin is not None:
                raise _error(
                    filename,
                    marker.line,
                    f"BEGIN SOLUTION nested in the region opened at line {open_begin.line}",
                )
            open_begin = marker
        elif open_begin is None:
            raise _error(filename, marker.line, "END SOLUTION without a matching BEGIN SOLUTION")
        else:
            pairs.append((open_begin, marker))
            open_begin = None
    if open_begin is not None:
        raise _error(filename, open_begin.line, "BEGIN SOLUTION without a matching END SOLUTION")
    return pairs


def _check_region(
    begin: _Marker,
    end: _Marker,
    functions: list[_Function],
    code_lines: set[int],
    filename: str,
) -> _Region:
    """Check that begin..end is the tail of one function body, after its docstring."""
    owner = _owning_function(functions, begin, code_lines)
    if owner is None:
        raise _error(
            filename,
            begin.line,
            "solution region is not inside a function body "
            "(markers must be indented like the body they replace)",
        )
    body = owner.node.body
    name = owner.qualname
    has_docstring = ast.get_docstring(owner.node, clean=False) is not None
    if has_docstring and body[0].lineno > begin.line:
        raise _error(
            filename, begin.line, f"solution region in {name} must start after its docstring"
        )
    if any(stmt.lineno < begin.line <= stmt.end_lineno for stmt in body):
        raise _error(filename, begin.line, f"BEGIN SOLUTION splits a statement of {name}")
    last_line = body[-1].end_lineno
    if end.line <= last_line:
        raise _error(
            filename,
            end.line,
            f"solution region in {name} does not reach the end of its body "
            f"(code continues to line {last_line})",
        )
    if _owning_function(functions, end, code_lines) is not owner:
        raise _error(
            filename,
            end.line,
            f"END SOLUTION is not in the body of {name}; "
            "indent it like the body, right after the body's last line",
        )
    if not any(stmt.lineno > begin.line for stmt in body):
        raise _error(
            filename,
            begin.line,
            f"solution region in {name} holds no code, so there is no body to replace",
        )
    return _Region(begin, end, name)


def _owning_function(
    functions: list[_Function], marker: _Marker, code_lines: set[int]
) -> _Function | None:
    """The function whose body holds the marker line.

    Comments carry no indentation in Python's grammar, so the marker must sit
    at the body's column, below the def line, and before any code that follows
    the body (a trailing comment after the last statement still belongs to it).
    """
    return next(
        (
            function
            for function in functions
            if function.node.body[0].col_offset == marker.col
            and function.node.lineno < marker.line
            and not any(
                line in code_lines for line in range(function.node.end_lineno + 1, marker.line)
            )
        ),
        None,
    )


def _replace_regions(lines: list[str], regions: list[_Region]) -> list[tuple[int, str]]:
    """The starter's lines, each with the source line it comes from (for errors)."""
    starts = {region.begin.line: region for region in regions}
    kept: list[tuple[int, str]] = []
    skip_through = 0
    for number, line in enumerate(lines, start=1):
        if number <= skip_through:
            continue
        region = starts.get(number)
        if region is None:
            kept.append((number, line))
            continue
        indent = line[: region.begin.col]
        newline = line[len(line.rstrip("\r\n")) :]
        message = f"{region.qualname} is not implemented yet"
        raise_line = f'{indent}raise NotImplementedError("{message}")'
        kept.append((number, raise_line + newline))
        skip_through = region.end.line
    return kept


def _header(lines: list[str]) -> str:
    # Match the file's line endings so a CRLF checkout still compares equal.
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    return "".join(line + newline for line in HEADER_LINES)


def _verify_stripped(stripped: list[tuple[int, str]], filename: str) -> None:
    """The starter must compile and must not leak marker text; errors name source lines."""
    try:
        ast.parse("".join(text for _, text in stripped), filename)
    except SyntaxError as err:
        source_line = stripped[err.lineno - 1][0] if err.lineno else None
        message = f"stripped code is not valid Python: {err.msg}"
        raise _error(filename, source_line, message) from err
    for number, text in stripped:
        if _mentions_marker(text):
            raise _error(filename, number, "solution marker text left outside any region")


def render_starter(solutions_dir: Path) -> dict[str, str]:
    """Starter text for each solution file, keyed by file name, sorted."""
    return {
        path.name: strip_solution(path.read_bytes().decode("utf-8"), str(path))
        for path in _released_files(solutions_dir)
    }


def _released_files(directory: Path) -> list[Path]:
    """The *.py files that have a starter counterpart (no helpers or tests)."""
    return sorted(
        path
        for path in directory.glob("*.py")
        if path.is_file() and not path.name.startswith(("_", "test_"))
    )


def write_starter(solutions_dir: Path, starter_dir: Path) -> list[str]:
    """Regenerate starter_dir from solutions_dir; return the names written.

    Starter files whose solution is gone are removed; files starting with
    `_` or `test_` in starter_dir are left alone, as they are never generated.
    """
    rendered = render_starter(solutions_dir)
    starter_dir.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.items():
        (starter_dir / name).write_bytes(text.encode("utf-8"))
    for path in _released_files(starter_dir):
        if path.name not in rendered:
            path.unlink()
    return list(rendered)


def stale_starter(solutions_dir: Path, starter_dir: Path) -> list[str]:
    """Names of starter files that are out of date, missing or extra; [] when current."""
    expected = {name: text.encode("utf-8") for name, text in render_starter(solutions_dir).items()}
    committed = (
        {path.name: path.read_bytes() for path in _released_files(starter_dir)}
        if starter_dir.is_dir()
        else {}
    )
    return sorted(
        name
        for name in expected.keys() | committed.keys()
        if expected.get(name) != committed.get(name)
    )
