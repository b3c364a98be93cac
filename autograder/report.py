"""Reporting: Gradescope's results.json and the terminal table.

results.json holds only the keys of Gradescope's specification: tests[] with
name, number, score, max_score, status, visibility, tags (the component, and
`timing` on timing cases, a staff test's @tags), output, output_format and extra_data; at the top,
score, output, visibility, execution_time, extra_data, which holds the
total's maximum (the specification has no top-level max_score), and the
leaderboard where a ranking case earned an entry. It is written
atomically, and a run that could not grade still writes one with no points.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .cases import TIMING
from .outcome import GRADER_FAILED
from .runner import CaseResult, GradeRun
from .submission import FileEntry, printable


def results_json(run: GradeRun, account: tuple[FileEntry, ...] = ()) -> dict:
    """`account`: the submission's files and what was done with each, shown in `output` and kept in `extra_data.files`."""
    tests = [
        {
            "name": f"[{r.case.component}] {r.case.name}",
            "number": r.case.number,
            "score": r.score,
            "max_score": r.max_score,
            "status": "passed" if (r.passed and r.fraction == 1) or not r.counted else "failed",  # nothing at stake: not a failure
            "visibility": r.case.visibility,
            "tags": [r.case.component, *(["timing"] if r.case.check in TIMING else []), *r.case.tags],
            "output": feedback(r),
            "output_format": "text",
            "extra_data": {"check": r.case.check, "outcome": r.outcome.kind, "seconds": round(r.seconds, 3), **r.extra},
        }
        for r in run.results
    ]
    shown = sum(1 for r in run.results if r.case.visible)
    summary = [line for line in [run.grader_failure_line()] if line]
    summary += [f"Graded {len(tests)} cases ({shown} visible, {len(tests) - shown} hidden or shown later) in {run.seconds:.1f} s."]
    summary += [HIDDEN_OUTPUT] if shown < len(tests) else []
    board = leaderboard(run.results)
    return {
        "score": sum(r.score for r in run.results),
        "output": "\n".join(summary + review_notes(run.results) + account_lines(account)),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "execution_time": round(run.seconds, 3),
        "extra_data": {"max_score": sum(r.max_score for r in run.results), "isolation": run.isolation, "rubric": run.rubric,
                       "files": [asdict(entry) for entry in account], "infra_error": run.grader_failed},
        "tests": tests,
        **({"leaderboard": board} if board else {}),
    }


def leaderboard(results: list[CaseResult]) -> list[dict]:
    """Gradescope's leaderboard entries: each ranking case's value (a timing case's speedup or ratio, a staff test's
    set_leaderboard_value), only where it passed and so did every other case of its component but the timing ones:
    a wrong answer never ranks."""
    correct = {r.case.component for r in results}
    for r in results:
        if r.case.check not in TIMING and r.case.leaderboard is None and not (r.passed and r.fraction == 1):
            correct.discard(r.case.component)
    entries = []
    for r in results:
        board = r.case.leaderboard
        if board and r.passed and r.counted and r.case.component in correct and not r.extra.get("flagged"):
            value = r.extra.get("leaderboard_value") if board.value == "set" else r.extra.get("ratio")
            if board.value == "speedup" and value:
                value = round(1 / value, 4)
            if value is not None:
                entries.append({"name": board.name, "value": value, "order": board.order})
    return entries


HIDDEN_OUTPUT = "What your code prints is shown under each visible case; output of hidden cases is not shown."
PRINTED = "\nYour code printed:"  # where a case's output turns from the grader's message to the student's own text


def feedback(r: CaseResult) -> str:
    """The grader's message on a case, then what the student's code printed during it: each line behind "| ", so
    that nothing printed can pass for a line of the grader's."""
    if not r.printed and not r.printed_more:
        return r.output
    lines = "".join(f"\n| {line}" for line in r.printed.removesuffix("\n").split("\n"))
    more = f"\n... ({r.printed_more} more characters)" if r.printed_more else ""
    return f"{r.output}{PRINTED}{lines}{more}"


def review_notes(results: list[CaseResult]) -> list[str]:
    """One note per component whose files name what it forbids in code no case reached (runner.py flags them)."""
    flagged = {r.case.component: r.extra["review"] for r in results if "review" in r.extra}
    return [f"Note on {component}: {review['file']} (with the files it imports) names what this component forbids, in code that "
            f"no case graded here ran: {'; '.join(review['forbidden_names'])}. That costs no points; it is flagged for course "
            "staff to review." for component, review in flagged.items()]


MAX_IGNORED_LISTED = 50  # a zip of thousands of files would bury the lines that matter; extra_data.files lists them all


def account_lines(account: tuple[FileEntry, ...]) -> list[str]:
    """Every file graded, copied, skipped or misnamed, and the first MAX_IGNORED_LISTED of those ignored."""
    unlisted = set([e for e in account if e.action == "ignored"][MAX_IGNORED_LISTED:])
    listed = [f"  {entry}" for entry in account if entry not in unlisted]
    more = [f"  ... and {sum(e.files for e in unlisted)} more files ignored"] * bool(unlisted)
    return ["Files in the submission:", *listed, *more] if account else []


def failure_json(message: str) -> dict:
    """The results of a run that could not grade: no points, and the reason."""
    return {
        "score": 0.0,
        "output": f"The autograder could not grade this submission: {message}",
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


def write_results(path: Path, results: dict) -> None:
    """Replace whatever is at `path` (where the worker could write, a forgery it left) with `results`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results-")
    with os.fdopen(fd, "w") as f:
        json.dump(results, f, indent=2)
    os.replace(tmp, path)


def print_table(run: GradeRun, console: Console, verbosity: int = 0) -> None:
    """The cases and their messages (-q: totals only; -v: passed cases' messages too), then the totals."""
    if verbosity >= 0:
        _print_cases(run, console, verbosity)
    for component in dict.fromkeys(r.case.component for r in run.results):
        rs = [r for r in run.results if r.case.component == component]
        console.print(f"{component}: {sum(r.score for r in rs):g} / {sum(r.max_score for r in rs):g}", highlight=False)
    for note in review_notes(run.results) + ([HIDDEN_OUTPUT] if any(not r.case.visible for r in run.results) else []):
        console.print(note, markup=False, highlight=False)
    total, most = sum(r.score for r in run.results), sum(r.max_score for r in run.results)
    console.print(f"[bold]Total: {total:g} / {most:g}[/]  ({run.seconds:.1f} s; isolation: {run.isolation_line})", highlight=False)
    if run.grader_failed:
        console.print(f"[bold red]{escape(run.grader_failure_line())}[/]", highlight=False)


def _print_cases(run: GradeRun, console: Console, verbosity: int) -> None:
    table = Table(title="Grading results", show_lines=False)
    for column in ("#", "component", "case", "score", "result"):
        table.add_column(column, justify="right" if column in ("#", "score") else "left")
    for r in run.results:
        mark = ("[magenta]GRADER FAILED[/]" if r.outcome.kind == GRADER_FAILED else "[red]FAIL[/]" if not r.passed
                else "[green]pass[/]" if r.fraction == 1 else "[yellow]part[/]")
        label = escape(r.case.name) + ("" if r.case.visible else f" [dim]({r.case.visibility})[/]")
        table.add_row(r.case.number, r.case.component, label, f"{r.score:.3g}/{r.max_score:g}", mark)
    console.print(table)
    for r in run.results:
        if not r.passed or r.case.check in TIMING or r.printed or r.printed_more or verbosity > 0:  # failures, timing, printing
            console.print(f"[bold]{r.case.number} {escape(f'[{r.case.component}] {r.case.name}')}[/]", highlight=False)
            # soft_wrap: a long line stays one line (the terminal folds it), so every printed line keeps its "| "
            # printable: an exception message is the student's text too, and must not drive the TA's terminal
            console.print(textwrap.indent(printable(feedback(r), keep="\n\t"), "  "), markup=False, highlight=False, soft_wrap=True)
