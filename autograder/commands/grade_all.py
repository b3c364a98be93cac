"""`grade-all`: a class into a gradebook, resumably; with --plan, the batch's account without grading."""
from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..batch import BatchOptions, ExportError, entry_line, grade_all
from ..batch.canvas import CanvasError, read_gradebook
from ..batch.cluster import ClusterError
from ..batch.plan import PLAN, plan_batch, plan_lines
from ..batch.report import DEFAULT_THRESHOLD
from ..rubric import RubricError
from ..sandbox.host.tiers import TierUnavailable
from ..terminal import USAGE_ERROR, Terminal, printable
from . import rubric_of


def run(args, ui: Terminal) -> int:
    if args.jobs is not None and args.jobs < 1:
        ui.error(f"--jobs {args.jobs}: at least one job is needed")
        return USAGE_ERROR
    if args.address and args.backend != "ray":
        ui.error("--address names a Ray cluster to join: give --backend ray too")
        return USAGE_ERROR
    if (args.canvas_gradebook is None) != (args.canvas_assignment is None):
        ui.error("--canvas-gradebook and --canvas-assignment go together: the gradebook Canvas exported for the course, and "
                 "the heading of the assignment's column in it, \"Name (id)\"")
        return USAGE_ERROR
    try:  # before grading: a gradebook canvas.csv cannot be written in is refused now, not after the batch
        canvas = read_gradebook(args.canvas_gradebook, args.canvas_assignment) if args.canvas_gradebook else None
    except (CanvasError, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    only = tuple(x.strip() for x in (args.only or "").split(",") if x.strip())
    options = BatchOptions(args.jobs, args.secret_file, args.require_tier, args.regrade, only, args.budget,
                           DEFAULT_THRESHOLD if args.similarity is None else args.similarity,
                           args.backend, args.address, args.timing_on, args.schedule_timeout, tuple(args.part or ()),
                           canvas=canvas)
    out = Path(args.out)
    if args.plan:
        return plan_command(args, ui, only, out)
    try:
        rubric = rubric_of(args, ui)
        with batch_progress(ui) as progress:
            rows = grade_all(rubric, Path(args.submissions), out, options, ui.note, progress)
    except (RubricError, ExportError, TierUnavailable, ClusterError, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP: grade_all has written the gradebook of what finished
        if (out / "grades.csv").exists():
            ui.note(f"what finished is in {out / 'grades.csv'}; the same command grades the rest, and "
                    f"`autograder report {out}` writes the report")
        raise
    counts = Counter(row["status"] for row in rows.values())
    ui.out.print(f"{len(rows)} submissions in {out / 'grades.csv'}: "
                 + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())), highlight=False)
    return 0


def plan_command(args, ui: Terminal, only: tuple[str, ...], out: Path) -> int:
    """grade-all --plan: the batch's account, without grading."""
    try:
        plan = plan_batch(rubric_of(args, ui), Path(args.submissions), out, only, args.secret_file, tuple(args.part or ()))
    except (RubricError, ExportError, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    for line in [*plan_lines(plan), f"what each submission will be graded from: {out / PLAN}"]:
        ui.out.print(printable(line, keep="\n"), markup=False, highlight=False, soft_wrap=True)
    return 0


@contextlib.contextmanager
def batch_progress(ui: Terminal):
    """grade_all's `progress(done, total, row)`: on a terminal a bar with failures so far and an ETA, shown from the
    call before grading (row None), each submission's line printed above it as it ends; otherwise one line per
    submission (-q: none)."""
    if ui.verbosity < 0:
        yield lambda done, total, row: None
    elif not ui.err.is_terminal:
        def line(done: int, total: int, row: dict | None) -> None:
            if row is not None:
                ui.note(f"[{done}/{total}] {entry_line(row)}")
        yield line
    else:
        columns = (TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} not ok"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        with Progress(*columns, console=ui.err) as bar:  # no task, nothing shown: the bar appears with its total
            failed = 0

            def advance(done: int, total: int, row: dict | None) -> None:
                nonlocal failed
                if row is None:
                    bar.add_task("grading", total=total, completed=done, failed=0)
                    return
                failed += row["status"] != "ok"
                bar.update(bar.task_ids[0], completed=done, failed=failed)
                bar.console.print(printable(entry_line(row), keep="\n"), markup=False, highlight=False)
            yield advance
