"""Reporting: Gradescope's results.json and the terminal table.

results.json holds only the keys of Gradescope's specification: tests[] with
name, number, score, max_score, status, visibility, tags (the component, and
`timing` on timing cases, a staff test's @tags), output, output_format and extra_data; at the top,
score, output, visibility, execution_time, extra_data, which holds the
total's maximum (the specification has no top-level max_score), and the
leaderboard where a ranking case earned an entry. It is written
atomically, and a run that could not grade still writes one with no points.

The top-level output is what Gradescope shows first, and a student reads it in a
minute: the score per component, the failed cases with one line of
cause each (those that other failed cases build on first), the passed cases
folded into one line per component (summary_lines). Each case's whole message is
in its own test; a batch's feedback file shows the same summary, then those
messages in the same order (batch/gradebook.feedback_md).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .cases import SUBJECTS, TIMING
from .forbidden import MENTION
from .judge import LIKELY
from .outcome import GRADER_FAILED
from .runner import CaseResult, GradeRun
from .submission import FileEntry
from .terminal import printable


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
    summary = [line for line in [run.grader_failure_line()] if line] + summary_lines(tests)
    summary += ["", f"Graded {len(tests)} cases ({shown} visible, {len(tests) - shown} hidden or shown later) in {run.seconds:.1f} s."]
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


def merged_results(old: dict, new: dict, kept: set[str], order: list[str], boards: dict[str, str]) -> dict:
    """results.json of a regrade of some components: `new`'s tests, and `old`'s of the components in `kept` (nothing
    that decides them changed), in the rubric's `order` of components; the summary, the score and the leaderboard of
    them all (`boards`: a leaderboard column's component), and the files as `new` found them."""
    tests = sorted([t for t in old["tests"] if t["tags"][0] in kept] + new["tests"],
                   key=lambda t: order.index(t["tags"][0]) if t["tags"][0] in order else len(order))
    shown = sum(t["visibility"] == "visible" for t in tests)
    flagged = {t["tags"][0]: t["extra_data"]["review"] for t in tests if "review" in t.get("extra_data", {})}
    summary = summary_lines(tests) + ["", f"Graded {len(tests)} cases ({shown} visible, {len(tests) - shown} hidden or shown "
                                          f"later); those of {', '.join(sorted(kept))} are kept from the grading before, as "
                                          "nothing that decides them changed since."]
    files = tuple(FileEntry(**f) for f in new["extra_data"]["files"])
    board = [b for b in old.get("leaderboard", []) if boards.get(b["name"]) in kept] + new.get("leaderboard", [])
    return {**new, "score": sum(t["score"] for t in tests), "tests": tests,
            "output": "\n".join(summary + ([HIDDEN_OUTPUT] if shown < len(tests) else []) + flagged_notes(flagged) + account_lines(files)),
            "extra_data": {**new["extra_data"], "max_score": sum(t["max_score"] for t in tests), "kept": sorted(kept)},
            **({"leaderboard": board} if board else {})}


def leaderboard(results: list[CaseResult]) -> list[dict]:
    """Gradescope's leaderboard entries: each ranking case's value (a timing case's speedup or ratio, a staff test's
    set_leaderboard_value), only where it passed and so did every other case of its component but the timing ones:
    a wrong answer never ranks."""
    correct = {r.case.component for r in results}
    for r in results:
        if r.case.check not in TIMING and r.case.leaderboard is None and not (r.passed and r.fraction == 1):
            correct.discard(r.case.component)
    entries = []
    for r in sorted(results, key=lambda r: r.case.leaderboard.place if r.case.leaderboard else 0):  # the board's order
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
    """The grader's message on a case, after the points it earned where that was part of them, then what the
    student's code printed during it: each line behind "| ", so that nothing printed can pass for a line of the
    grader's."""
    message = f"{credit(r.score, r.max_score)}: {r.output}" if r.passed and r.fraction < 1 and r.max_score else r.output
    if not r.printed and not r.printed_more:
        return message
    lines = "".join(f"\n| {line}" for line in r.printed.removesuffix("\n").split("\n"))
    more = f"\n... ({r.printed_more} more characters)" if r.printed_more else ""
    return f"{message}{PRINTED}{lines}{more}"


def credit(score: float, most: float) -> str:
    """Part of a case's points, in words: "1.5 of 2 points" (a check's message then says what earned them)."""
    return f"{score:g} of {most:g} point{'s' * (most != 1)}"


CAUSE_CHARS = 200  # a summary line says this much of a case's message; the whole message is under the case


def summary_lines(tests: list[dict]) -> list[str]:
    """What a student reads first, from results.json's tests: the score per component; the failed cases (a part of
    the points is a failure too), each with one line of its message, those that later failed cases build on first;
    the passed ones, one line per component."""
    components = list(dict.fromkeys(t["tags"][0] for t in tests))
    lines = ["Score by component:"]
    for component in components:
        mine = [t for t in tests if t["tags"][0] == component]
        lines.append(f"  {component}: {sum(t['score'] for t in mine):g} / {sum(t['max_score'] for t in mine):g}")
    failed = failures_first(tests)
    by_number = {t["number"]: t for t in failed}
    used_by = Counter(n for t in failed for n in _uses(t))
    causes = {t["number"]: cause(t, by_number) for t in failed}
    if failed:
        lines += ["", f"{len(failed)} case{'s' * (len(failed) != 1)} failed" + ("; those that later cases build on come first:" if used_by else ":")]
        alone = used_by.keys()  # a case that others use is said on its own line
        lines += [_failure_line(group, causes[group[0]["number"]], used_by[group[0]["number"]])
                  for group in neighbours(failed, lambda t: t["number"] if t["number"] in alone else causes[t["number"]])]
    else:
        lines += ["", "No case failed."]
    lines.append("")
    for component in components:
        passed = [t for t in tests if t["tags"][0] == component and t["status"] == "passed"]
        skipped = sum(t["extra_data"]["outcome"] == "skipped" for t in passed)
        ran = len(passed) - skipped
        said = [f"{ran} case{'s' * (ran != 1)} passed"] * bool(ran) + [f"{skipped} skipped"] * bool(skipped)
        lines += [f"{component}: {', '.join(said)}"] * bool(said)
    return lines


def failures_first(tests: list[dict]) -> list[dict]:
    """The failed cases: first those that later failed cases build on, then the others, each in the rubric's order."""
    failed = [t for t in tests if t["status"] == "failed"]
    used = {n for t in failed for n in _uses(t)}
    return sorted(failed, key=lambda t: t["number"] not in used)


def _uses(test: dict) -> list[str]:
    """The numbers of the failed cases whose parts `test` builds on (runner._causes_first)."""
    return test.get("extra_data", {}).get("uses_failed", [])


def cause(test: dict, failed: dict[str, dict]) -> str:
    """One line of why `test` failed: the failing parts it builds on, else its message's first line, cut short but for
    the likely mistake it names."""
    if _uses(test):
        parts = " and ".join(f"your {SUBJECTS[failed[n]['extra_data']['check']]}, which fails case {n}" for n in _uses(test))
        return f"it uses {parts}: fix that first."
    what, _, likely = test["output"].split("\n", 1)[0].partition(f" {LIKELY}")
    likely = f" {LIKELY}{likely}" if likely else ""  # what the student must read: kept whole, the rest cut to fit
    room = max(CAUSE_CHARS - len(likely), CAUSE_CHARS // 2)
    return (what if len(what) <= room else what[:room].rsplit(" ", 1)[0] + " ...") + likely


def neighbours(failed: list[dict], key) -> list[list[dict]]:
    """`failed` in runs of neighbours of one component whose `key` is the same (one cause, one message): every case of
    a file not submitted, the cases that use one failing part."""
    groups: list[list[dict]] = []
    for t in failed:
        if groups and groups[-1][-1]["tags"][0] == t["tags"][0] and key(groups[-1][-1]) == key(t):
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def numbered(group: list[dict]) -> str:
    """The cases of a group: "7.4 [transformer] FeedForward" alone; "3.1, 3.2 and 3.3 [rnn]"; "3.1 to 3.15 (15 cases) [rnn]"."""
    first, numbers = group[0], [t["number"] for t in group]
    if len(group) == 1:
        return f"{first['number']} {first['name']}"
    said = f"{', '.join(numbers[:-1])} and {numbers[-1]}" if len(group) <= 3 else f"{numbers[0]} to {numbers[-1]} ({len(group)} cases)"
    return f"{said} [{first['tags'][0]}]"


def _failure_line(group: list[dict], cause: str, used_by: int) -> str:
    """A summary line: the cases and their cause; first, for a case that others use, how many."""
    if used_by:
        return (f"  Fix this first: {numbered(group)}, as {used_by} later failed case{'s' * (used_by != 1)} "
                f"use{'s' * (used_by == 1)} your {SUBJECTS[group[0]['extra_data']['check']]}. {cause}")
    return f"  {numbered(group)}: {cause}"


def review_notes(results: list[CaseResult]) -> list[str]:
    return flagged_notes({r.case.component: r.extra["review"] for r in results if "review" in r.extra})


def flagged_notes(flagged: dict[str, dict]) -> list[str]:
    """One note per component whose files name what it forbids, where no case reached a call of it (runner.py flags
    them: component -> its review). A call or an import found there is in code no case ran (the guard fails whatever
    runs); a mention (an isinstance check, an import of the name) may have run, calling nothing, and is said to be one."""
    notes = []
    for component, review in flagged.items():
        named = review["forbidden_names"]
        mentioned = sum(f": {MENTION} " in f for f in named)
        how = ("names what this component forbids, in code that no case graded here ran" if not mentioned
               else "mentions what this component forbids without calling it" if mentioned == len(named)
               else "names what this component forbids, and no case graded here called it")
        notes.append(f"Note on {component}: {review['file']} (with the files it imports) {how}: {'; '.join(named)}. That costs no "
                     "points; it is flagged for course staff to review.")
    return notes


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
