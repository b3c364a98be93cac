"""`autograder grade-all --plan`: the account of a batch before it is graded.

Each submission the export holds is read as a job reads it before grading (open_submission, into a folder removed at
once), and nothing of it runs: whether it is graded already (the journal holds its grading with this rubric, grader and
secret), cannot be graded (and why), or is to grade, from which files, and every problem its files have. The same
account is written to OUT/plan.json.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path, PurePosixPath

from ..rubric import Rubric
from ..submission import SubmissionError, expected_name, open_submission
from .gradebook import write_atomically
from .inputs import Entry, read_batch
from .journal import Journal, batch_secret, grading_key, tree_digest

PLAN = "plan.json"


def plan_batch(rubric: Rubric, source: Path, out: Path, only: tuple[str, ...], secret_file: Path | None) -> dict:
    """The plan of grading `source` into `out` (the submissions `only` names, all without it), written to OUT/plan.json."""
    batch = read_batch(source, out / "unpacked")
    entries = batch.selected(only, source)
    secret, _ = batch_secret(out, secret_file)  # none yet: nothing was graded, and none is made here
    key = grading_key(rubric.digest, tree_digest(rubric.solutions_dir), secret) if secret is not None else None
    journal = Journal(out / "journal.jsonl")
    with tempfile.TemporaryDirectory(prefix="autograder-plan-") as scratch:
        planned = [_planned(rubric, e, Path(scratch) / "submission", journal, key) for e in entries]
    counts = Counter(p["status"] for p in planned)
    plan = {"source": str(source.resolve()), "kind": batch.kind, "found": len(entries),
            **{status.replace(" ", "_"): counts.get(status, 0) for status in STATUSES},
            "with_problems": sum(bool(p["problems"]) for p in planned), "strays": list(batch.strays), "submissions": planned}
    write_atomically(out / PLAN, json.dumps(plan, indent=2, ensure_ascii=False))
    return plan


STATUSES = ("to grade", "already graded", "not gradable")


def _planned(rubric: Rubric, entry: Entry, workdir: Path, journal: Journal, key: str | None) -> dict:
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
    if key is not None and journal.done(entry.id, entry.digest(), key):
        line["status"] = "already graded"
    for f in submission.account:
        if f.action == "graded":
            named = expected_name(PurePosixPath(f.path).name) or f.path
            line["graded_from"][named.removesuffix(".ipynb").removesuffix(".py") + ".py"] = f.path
        elif f.action in ("misnamed", "skipped"):
            line["problems"].append(str(f))
    missing = sorted(rubric.files - submission.files - submission.problems.keys())
    line["problems"] += [*submission.problems.values(), *submission.caveats.values()]
    if missing:
        line["problems"].append(f"not in the submission: {', '.join(missing)} ({len(missing)} of the {len(rubric.files)} files graded)")
    return line


def plan_lines(plan: dict) -> list[str]:
    """What the terminal shows of a plan: the counts, then each submission that cannot be graded or has a problem."""
    lines = [f"{plan['found']} submissions ({plan['kind']} {plan['source']}): {plan['to_grade']} to grade, "
             f"{plan['already_graded']} already graded, {plan['not_gradable']} not gradable; {plan['with_problems']} with a problem"]
    for p in plan["submissions"]:
        if p["status"] == "not gradable":
            lines.append(f"{p['id']}: not gradable: {p['reason']}")
    for p in plan["submissions"]:
        for problem in p["problems"]:
            lines.append(f"{p['id']}: {problem}")
        if "note" in p:
            lines.append(f"{p['id']}: {p['note']}")
    return lines + [f"part of no submission: {why}" for why in plan["strays"]]

