"""`autograder grade-all --plan`: the account of a batch before it is graded.

Each submission the export holds is read as a job reads it before grading (open_submission, into a folder removed at
once), and nothing of it runs: whether it is graded already (the journal holds its grading with this rubric, grader and
secret), cannot be graded (and why), or is to grade, from which files, and every problem its files have. The same
account is written to OUT/plan.json.
"""
from __future__ import annotations

import json
import shutil
import zipfile
from collections import Counter
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ..rubric import Rubric
from ..sandbox.host import scratch
from ..submission import open_submission
from ..submission.names import expected_name
from ..submission.reading import SubmissionError, walk
from .gradebook import max_score, write_atomically
from .inputs import Entry, read_batch
from .journal import Journal, batch_secret, component_keys

PLAN = "plan.json"


def plan_batch(rubric: Rubric, source: Path, out: Path, only: tuple[str, ...], secret_file: Path | None,
               parts: tuple[str, ...] = ()) -> dict:
    """The plan of grading `source` into `out` (the submissions `only` names, all without it; the `parts` named, else
    the one every submission holds, else all), written to OUT/plan.json."""
    batch = read_batch(source, out / "unpacked")
    entries = batch.selected(only, source)
    rubric, part_line = graded_part(rubric, entries, parts)
    secret, _ = batch_secret(out, secret_file)  # none yet: nothing was graded, and none is made here
    keys = component_keys(rubric, secret) if secret is not None else None
    journal = Journal(out / "journal.jsonl")
    with scratch.folder("plan") as copies:
        planned = [_planned(rubric, e, copies / "submission", journal, keys) for e in entries]
    counts = Counter(p["status"] for p in planned)
    every = f"graded: every component of {rubric.path.name}, out of {max_score(rubric):g} points"
    plan = {"source": str(source.resolve()), "kind": batch.kind, "found": len(entries), "graded": part_line or every,
            **{status.replace(" ", "_"): counts.get(status, 0) for status in STATUSES},
            "with_problems": sum(bool(p["problems"]) for p in planned), "strays": list(batch.strays), "submissions": planned}
    write_atomically(out / PLAN, json.dumps(plan, indent=2, ensure_ascii=False))
    return plan


STATUSES = ("to grade", "already graded", "not gradable")


def _planned(rubric: Rubric, entry: Entry, workdir: Path, journal: Journal, keys: dict[str, str] | None) -> dict:
    line = {"id": entry.id, "submitters": [p.name for p in entry.submitters], "status": "to grade", "graded_from": {},
            "problems": [], **({"note": entry.note} if entry.note else {})}
    if entry.problem:
        return {**line, "status": "not gradable", "reason": entry.problem}
    try:
        submission = open_submission(entry.path, workdir, accept_misnamed=rubric.accept_misnamed, graded=rubric.files)
    except SubmissionError as exc:
        return {**line, "status": "not gradable", "reason": str(exc)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if keys is not None and not journal.stale(entry.id, entry.digest(), keys):
        line["status"] = "already graded"
    for f in submission.account:
        if f.action == "graded":
            line["graded_from"][_stands_for(f.path)] = f.path
        elif f.action in ("misnamed", "skipped"):
            line["problems"].append(str(f))
    missing = sorted(rubric.files - submission.files - submission.problems.keys())
    line["problems"] += [*submission.problems.values(), *submission.caveats.values()]
    if missing:
        line["problems"].append(f"not in the submission: {', '.join(missing)} ({len(missing)} of the {len(rubric.files)} files graded)")
    return line


def graded_part(rubric: Rubric, entries: list[Entry], parts: tuple[str, ...]) -> tuple[Rubric, str]:
    """The rubric a batch grades by, and the line that says so: the `parts` asked for (--part); else, where every
    submission's files (those named like a component file, as open_submission finds them, in any folder) belong to
    one part, that part; else the whole course ("")."""
    if not parts:
        found = set().union(*(_component_files(e.path) for e in entries if not e.problem))
        held = list(dict.fromkeys(c.part for c in rubric.components if c.file in found))
        if len(held) != 1 or len(rubric.parts) == 1:
            return rubric, ""
        parts, how = (held[0],), f"every submission holds files of {held[0]} only"
    else:
        how = "--part"
    graded = replace(rubric, components=rubric.select(parts))
    names = " and ".join(dict.fromkeys(c.part for c in graded.components))
    return graded, f"graded: {names} ({', '.join(c.file for c in graded.components)}), out of {max_score(graded):g} points ({how})"


def _component_files(path: Path) -> set[str]:
    """The component files a submission holds, by their names alone (a notebook standing for its file)."""
    try:
        if path.is_dir() and not path.is_symlink():
            names = walk(path)
        elif path.suffix.lower() == ".zip":
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        else:
            names = [path.name]
    except (OSError, zipfile.BadZipFile):
        return set()
    return {file for file in map(_stands_for, names) if file}


def _stands_for(path: str) -> str | None:
    """The component file a file of the submission is named as (its notebook standing for it); None for none."""
    named = expected_name(PurePosixPath(path).name)
    return named and named.removesuffix(".ipynb").removesuffix(".py") + ".py"


def plan_lines(plan: dict) -> list[str]:
    """What the terminal shows of a plan: the counts, then each submission that cannot be graded or has a problem."""
    lines = [f"{plan['found']} submissions ({plan['kind']} {plan['source']}): {plan['to_grade']} to grade, "
             f"{plan['already_graded']} already graded, {plan['not_gradable']} not gradable; {plan['with_problems']} with a problem",
             plan["graded"]]
    for p in plan["submissions"]:
        if p["status"] == "not gradable":
            lines.append(f"{p['id']}: not gradable: {p['reason']}")
    for p in plan["submissions"]:
        for problem in p["problems"]:
            lines.append(f"{p['id']}: {problem}")
        if "note" in p:
            lines.append(f"{p['id']}: {p['note']}")
    return lines + [f"part of no submission: {why}" for why in plan["strays"]]

