"""What the benchmark modules share: where things are, the Markdown table, the machine's busy CPU, and a section of
BENCHMARKS.md replaced in place.

benchmarks/ is no installed package: a script here puts the project's root on sys.path and imports its siblings as
`benchmarks.<module>`, as tests/test_gpu.py does.
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"


def read_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []


def busy_cpu() -> float:
    """Core-seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    ticks = [int(x) for x in read_lines("/proc/stat")[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def replace_section(text: str, heading: str, section: str, before: str | None = None) -> str:
    """`text` (BENCHMARKS.md) with the section that starts at the line `heading` replaced by `section` (a top-level
    section ends where the next `## ` line starts; its `### ` subsections are its own). Where `text` has no such
    section, `section` goes before the line `before` when it is there, else at the end."""
    lines = text.rstrip("\n").split("\n")
    new = section.rstrip("\n").split("\n")
    if heading in lines:
        start = lines.index(heading)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        while end > start + 1 and lines[end - 1] == "":
            end -= 1
        return "\n".join(lines[:start] + new + lines[end:]) + "\n"
    if before is not None and before in lines:
        at = lines.index(before)
        return "\n".join(lines[:at] + new + [""] + lines[at:]) + "\n"
    return "\n".join(lines + [""] + new) + "\n"


def section_of(text: str, heading: str) -> str | None:
    """The section of `text` (BENCHMARKS.md) that starts at the line `heading`, to the next `## ` line; None if none."""
    lines = text.split("\n")
    if heading not in lines:
        return None
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]).rstrip("\n")

