"""Inert wherever a person opens it (architecture.md): the rules every batch output holding student-controlled text
(names, ids, file names, outputs) goes through. A spreadsheet evaluates a CSV cell that starts a formula, so such a
cell gets a leading single quote (OWASP's CSV-injection advice); a Markdown reader renders whatever follows the end of
a fence, so student text is fenced with more backticks than it holds in a row, and text in a heading has every
character that could start markup backslash-escaped. HTML is the report's: html.escape on everything it shows.
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from pathlib import Path

# What a spreadsheet evaluates: a cell whose first character, or first after whitespace, starts a formula (with the
# full-width forms some read as the same), or that starts with a tab or CR (OWASP's list).
_TRIGGERS = tuple("=+-@＝＋－＠")
_NUMBER = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")  # the grader's numbers, negative ones too


def _formula(text: str) -> bool:
    return text.startswith(("\t", "\r")) or (text.lstrip().startswith(_TRIGGERS) and not _NUMBER.fullmatch(text.strip()))


def csv_cell(value: object) -> str:
    """The value as a cell that starts no formula: one single quote before it where it would. Quotes the value already
    leads with count as part of the start, so that csv_value can tell the added quote from a student's own."""
    text = str(value)
    return "'" + text if _formula(text.lstrip("'")) else text


def csv_value(cell: str) -> str:
    """The value csv_cell was given."""
    return cell[1:] if cell.startswith("'") and _formula(cell.lstrip("'")) else cell


def csv_text(rows: Iterable[Iterable]) -> str:
    """A CSV file of `rows`, every cell through csv_cell (headers too: they name staff's columns)."""
    out = io.StringIO()
    csv.writer(out).writerows([csv_cell(v) for v in row] for row in rows)
    return out.getvalue()


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file csv_text wrote, keyed by its header, each cell as it was before csv_cell."""
    with open(path, encoding="utf-8", newline="") as f:  # newline="": a CR inside a quoted cell is the cell's
        return [{csv_value(k): csv_value(v) for k, v in row.items()} for row in csv.DictReader(f)]


def md_fence(text: str, info: str = "") -> str:
    """`text` as the content of one fenced code block: a backtick fence longer than any run of backticks in it, which
    no line of it can close (tildes never close a backtick fence). `info`, the grader's word, holds no backtick."""
    fence = "`" * max(3, 1 + max(map(len, re.findall(r"`+", text)), default=0))
    end = "" if text == "" or text.endswith("\n") else "\n"
    return f"{fence}{info}\n{text}{end}{fence}"


_MARKUP = re.compile(r"[\\`*_\[\]<>&!#~]")  # what starts inline markup (GFM's ~ too), and a heading's closing #


def md_text(text: str) -> str:
    """`text` as plain text on one Markdown line (a heading's): its line breaks as spaces, markup characters escaped."""
    return _MARKUP.sub(r"\\\g<0>", re.sub(r"\r\n?|\n", " ", text))
