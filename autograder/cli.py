"""The commands: `grade`, `grade-all`, `report`, `check`, `release`, `gradescope build` and `verify`.

Results go to stdout, notes and errors to stderr; exit 2 means the input could not be used, 128 + N that signal N
stopped the command: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import secrets
import signal
import sys
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from . import __version__
from .batch import BatchOptions, ExportError, build_report, entry_line, grade_all
from .batch.cluster import ClusterError
from .batch.jobs import STOPS
from .batch.canvas import CanvasError, read_gradebook
from .batch.plan import PLAN, plan_batch, plan_lines
from .batch.report import DEFAULT_THRESHOLD
from .rubric import Rubric, RubricError, load_rubric
from .release import ReleaseError, stale_rules, write_rules
from .release.bundle import BUNDLE_OWN, BundleError, check_bundle_target, write_bundle
from .release.gradescope import build_zip, zip_name
from .release.starter import StarterError, stale_starter, write_starter
from .report import account_lines, failure_json, print_table, results_json, write_results
from .runner import grade
from .sandbox.host import scratch
from .sandbox.host.tiers import ORDER, TierUnavailable, isolation_for, student_isolation
from .submission import open_submission
from .submission.names import printable
from .submission.reading import SubmissionError
from .verify import MistakesError, load_mistakes, print_report, verify

PROJECT_ROOT = Path(__file__).resolve().parents[1]
USAGE_ERROR = 2
GRADER_FAILED = 3  # the grader failed on some case (its own failure): the results are written, but not final
SIGNALLED = 128  # the shell's status for a command a signal ended: 128 + the signal's number
INTERRUPTED = SIGNALLED + signal.SIGINT  # Ctrl-C: 130


@dataclass(frozen=True)
class Terminal:
    """Results on stdout, diagnostics on stderr; `verbosity` -1 (-q), 0, or 1 (-v)."""

    out: Console
    err: Console
    verbosity: int

    # Notes and errors quote file names and ids from submissions: escape sequences in them are shown, not run.
    def note(self, text: str) -> None:
        if self.verbosity >= 0:
            self.err.print(printable(text, keep="\n"), markup=False, highlight=False)

    def error(self, text: str) -> None:
        self.err.print("[red]error:[/] " + escape(printable(text, keep="\n")), highlight=False)

    def warn(self, text: str | None) -> None:
        """Said even under -q: what weakens the grading (a tier weaker than before)."""
        if text:
            self.err.print("[yellow]warning:[/] " + escape(printable(text, keep="\n")), highlight=False)


def print_account(account, ui: Terminal) -> None:
    """What was found in the submission and what became of each file: part of the results, but not of -q's."""
    if ui.verbosity >= 0:
        for line in account_lines(account):
            ui.out.print(line, markup=False, highlight=False)


def students_own(account, rubric: Rubric, folder: Path) -> tuple:
    """The account of a check, less what a student bundle holds of its own (its grader, handouts, rubric), what
    installing it leaves (*.egg-info/, build/, and the venv's links in .venv/) and the caches and hidden folders tools
    leave (__pycache__/, .pytest_cache/), when the folder checked is the bundle itself."""
    if rubric.expected is None or folder.resolve() != rubric.path.parent:
        return account
    own = {*BUNDLE_OWN, "build", "__pycache__", "__MACOSX", *(PurePosixPath(f).parts[0] for f in rubric.staff_files)}

    def of_the_bundle(entry) -> bool:
        top = PurePosixPath(entry.path).parts[0]
        return top in own or top.endswith(".egg-info") or top.startswith(".")
    return tuple(e for e in account if not of_the_bundle(e))


def rubric_of(args, ui: Terminal) -> Rubric:
    """The rubric is staff input: --config, else the one beside this package (a course's, or a student bundle's);
    never one found in the current folder, which may be a submission's."""
    rubric = load_rubric(Path(args.config) if args.config else PROJECT_ROOT / "grading.yaml")
    ui.note(f"rubric: {rubric.path} (sha256 {rubric.digest[:12]})")
    return rubric


def read_secret(path: Path | None, ui: Terminal) -> str:
    """Hidden inputs come from this secret; without one each run draws a fresh one, and says so."""
    if path is not None:
        return path.read_text().strip()
    if os.environ.get("AUTOGRADER_SECRET"):
        return os.environ["AUTOGRADER_SECRET"]
    ui.note("note: no --secret-file and no $AUTOGRADER_SECRET: hidden inputs come from a random secret, so another "
            "run draws other hidden inputs")
    return secrets.token_hex(16)


def cmd_grade(args, ui: Terminal) -> int:
    results = Path(args.results).absolute() if args.results else None
    try:
        rubric = rubric_of(args, ui)
        if results:  # fail closed: until the real results replace it, this says no points
            write_results(results, failure_json("grading did not finish"))
        for cid in args.component or ():
            rubric.component(cid)
        with scratch.folder("grade") as copies:
            submission = open_submission(Path(args.path), copies / "submission", accept_misnamed=rubric.accept_misnamed,
                                         graded=rubric.files)
            secret = read_secret(args.secret_file, ui)
            also_hidden = [*([results] if results else []), *([args.secret_file] if args.secret_file else [])]
            with isolation_for(rubric.path.parent, rubric.solutions_dir, also_hidden, args.require_tier) as isolation:
                ui.warn(isolation.tier.warning)
                ui.note(f"isolation: {isolation.tier.name} ({isolation.tier.guarantees})")
                run = grade(rubric, submission, secret=secret, isolation=isolation, component_ids=args.component,
                            visible_only=args.visible_only)
    except (RubricError, SubmissionError, TierUnavailable, OSError) as exc:
        ui.error(str(exc))
        if results:
            write_results(results, failure_json(str(exc)))
        return USAGE_ERROR
    except KeyboardInterrupt:
        if results:
            write_results(results, failure_json("grading was interrupted"))
        raise
    except BaseException as exc:  # fail closed: no points, and say so
        traceback.print_exc()
        if results:
            write_results(results, failure_json(f"internal error ({type(exc).__name__}); course staff have been told"))
        raise
    print_table(run, ui.out, ui.verbosity)
    print_account(submission.account, ui)
    if results:
        write_results(results, results_json(run, submission.account))
        ui.note(f"results written to {results}")
    return GRADER_FAILED if run.grader_failed else 0


def cmd_check(args, ui: Terminal) -> int:
    try:
        rubric = rubric_of(args, ui)
        components = args.component or None
        for cid in components or ():
            rubric.component(cid)
        with scratch.folder("check") as copies:
            submission = open_submission(Path(args.dir), copies / "submission", accept_misnamed=rubric.accept_misnamed,
                                         graded=rubric.files)
            isolation, portable = student_isolation(rubric.path.parent, rubric.solutions_dir, args.require_tier)
            if portable:
                ui.note(portable)
            ui.warn(isolation.tier.warning)
            with isolation:
                run = grade(rubric, submission, secret="local", isolation=isolation, component_ids=components, visible_only=True)
    except SubmissionError as exc:  # the folder is the student's own, on their machine: say which one was looked in
        ui.error(f"{exc} (checked the folder {Path(args.dir).resolve()}: run check where your files are, or give --dir)")
        return USAGE_ERROR
    except (RubricError, TierUnavailable, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    print_table(run, ui.out, ui.verbosity)
    print_account(students_own(submission.account, rubric, Path(args.dir)), ui)
    ui.out.print(f"These are the {len(run.results)} visible cases. {run.hidden_not_run} more cases run only when your submission "
                 "is graded (hidden cases, and in a student bundle the timing cases), so passing here does not mean full marks.",
                 highlight=False)
    if run.grader_failed:
        return GRADER_FAILED
    return 1 if any(r.counted and not r.passed for r in run.results) else 0  # scripts and CI can tell a failed case


def cmd_release(args, ui: Terminal) -> int:
    try:
        rubric = rubric_of(args, ui)
        if args.each_part:
            if not args.out:
                raise BundleError("--each-part writes a folder per part; give --out DIR too")
            return release_each_part(rubric, Path(args.out), args.part or [], ui)
        if args.out:
            out = Path(args.out).absolute()
            check_bundle_target(rubric, out, args.part or ())  # before a minute of recording
            ui.note("recording the visible cases on the reference solutions, then replaying them; this takes a minute")
            ui.out.print(bundle_written(write_bundle(rubric, out, args.part or ()), args.out), markup=False, highlight=False)
            return 0
        if args.part:
            raise BundleError("--part selects what goes into a student bundle; give --out DIR too")
        starter_dir = rubric.path.parent / "starter"
        if args.check:
            rules = stale_rules(rubric)
            starter = [f"starter/{name}" for name in stale_starter(rubric.solutions_dir, starter_dir)]
            if rules or starter:
                ui.out.print(f"out of date: {', '.join(rules + starter)} (the rules from grading.yaml and the grader's scans, "
                             "the starter from solutions/); run `autograder release`", highlight=False)
                return 1
            ui.out.print("starter/ is up to date with solutions/, and the rules in the handouts and solutions with grading.yaml")
            return 0
        rules = write_rules(rubric)
        written = write_starter(rubric.solutions_dir, starter_dir)
    except (RubricError, StarterError, ReleaseError, SubmissionError, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    if rules:
        ui.out.print(f"rewrote the rules in {', '.join(rules)}", highlight=False)
    ui.out.print(f"wrote {', '.join(written)} to {starter_dir}", highlight=False)
    return 0


def release_each_part(rubric: Rubric, out: Path, parts: list[str], ui: Terminal) -> int:
    """`release --out DIR --each-part`: for each part (or each of `parts`), its student bundle in DIR/part<n>/bundle/ and
    its Gradescope zip, DIR/part<n>/autograder.zip. A part's folder must be new or empty, as a bundle's must."""
    folders = {n: out / f"part{n}" for n in rubric.part_numbers(rubric.select(parts))}
    for n, folder in folders.items():  # every refusal before minutes of recording
        check_bundle_target(rubric, folder.absolute(), [str(n)])
    how_many = f"{len(folders)} part{'s' * (len(folders) != 1)}"
    ui.note(f"releasing {how_many}: each records its visible cases on the reference solutions, then replays "
            "them; this takes up to a minute per part")
    for n, folder in folders.items():
        components = rubric.select([str(n)])
        made = write_bundle(rubric, folder.absolute() / "bundle", [str(n)])
        names = build_zip(rubric, folder / "autograder.zip", components)
        ui.out.print(f"{folder}: {components[0].part}\n  {bundle_written(made, folder / 'bundle')}\n  "
                     + zip_written(rubric, components, folder / "autograder.zip", names), markup=False, highlight=False)
    ui.out.print(f"released {how_many} to {out}: give each part's bundle/ to its students, and upload its "
                 "autograder.zip as the autograder of its Gradescope assignment", markup=False, highlight=False)
    return 0


def bundle_written(made: dict, out: str | Path) -> str:
    """What `release --out` says of the bundle write_bundle wrote to `out`."""
    return (f"wrote the student bundle for {', '.join(made['components'])} to {out}: {', '.join(made['files'])}, handouts, "
            f"notebooks, and {made['cases']} visible cases ({made['bytes'] >> 10} KiB of recorded expected values, replayed "
            f"against the reference: all pass); {made['not_here']} cases run only when graded")


def zip_written(rubric: Rubric, components: list, out: Path, names: list[str]) -> str:
    """What `gradescope build` says of the zip of `components` build_zip wrote to `out`."""
    cases = [k for c in components for k in c.cases]
    graded = "the whole course" if components == rubric.components else "; ".join(dict.fromkeys(c.part for c in components))
    return (f"wrote {out} ({len(names)} files, {out.stat().st_size / 1e6:.1f} MB): the Gradescope autograder of {graded}, "
            f"{len(cases)} cases worth {sum(k.points for k in cases):g} points, with a new secret; upload it as the assignment's "
            "autograder (hidden inputs are fixed until the next build)")


def cmd_grade_all(args, ui: Terminal) -> int:
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
    options = BatchOptions(args.jobs, args.secret_file, args.require_tier, args.regrade, only, args.budget, args.similarity,
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


def cmd_report(args, ui: Terminal) -> int:
    out = Path(args.dir)
    try:
        if not (out / "grades.csv").is_file() or not (out / "summary.json").is_file():
            raise ExportError(f"{out} is not a finished batch: it holds no grades.csv and summary.json (autograder grade-all --out)")
        summary = json.loads((out / "summary.json").read_text())
        graded_with = summary.get("rubric", {}).get("path")
        if not args.config and graded_with and Path(graded_with).is_file():
            args.config = graded_with  # the rubric that graded the batch, unless another is asked for
        rubric = rubric_of(args, ui)
        graded = summary.get("components")  # a batch of some parts reports on theirs
        build_report(out, dataclasses.replace(rubric, components=[c for c in rubric.components if c.id in graded]) if graded else rubric,
                     args.similarity)
    except (RubricError, ExportError, OSError, ValueError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    ui.out.print(f"wrote {out / 'report.html'} and {out / 'report.json'}", highlight=False)
    return 0


def cmd_gradescope(args, ui: Terminal) -> int:
    try:
        rubric = rubric_of(args, ui)
        components = rubric.select(args.part or ())
        out = Path(args.out or zip_name(rubric, components))
        names = build_zip(rubric, out, components)
    except (RubricError, ReleaseError, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    ui.out.print(zip_written(rubric, components, out, names), markup=False, highlight=False)
    return 0


def cmd_verify(args, ui: Terminal) -> int:
    try:
        rubric = rubric_of(args, ui)
        report = verify(rubric, load_mistakes(rubric, args.mistakes), args.component, args.quick, progress=ui.note)
    except (RubricError, MistakesError, SubmissionError, TierUnavailable, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    print_report(report, ui.out)
    return 0 if report.passed else 1


def common_options(top: bool) -> argparse.ArgumentParser:
    """--config, which every command takes, before or after its name. Below the top, an option left out must not
    overwrite what was given before the command's name: hence SUPPRESS."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=None if top else argparse.SUPPRESS,
                        help="the rubric, grading.yaml (default: the one installed with the grader; never one in the current folder)")
    return common


def verbosity_options(quiet: str, verbose: str | None = None) -> argparse.ArgumentParser:
    """-q and -v, after the name of a command whose output they change, each with what it changes there; a command
    that prints the same either way does not take them (main's verbosity is then 0)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("-q", "--quiet", action="count", default=0, help=quiet)
    if verbose:
        options.add_argument("-v", "--verbose", action="count", default=0, help=verbose)
    return options


def build_parser() -> argparse.ArgumentParser:
    common = common_options(top=False)
    cases = verbosity_options("print totals only, no notes", "print every case's message, passed ones too")
    progress = verbosity_options("print no progress and no notes")
    parser = argparse.ArgumentParser(prog="autograder", description="Grade language-model assignments against hidden references.",
                                     parents=[common_options(top=True)])
    parser.set_defaults(quiet=0, verbose=0)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", parents=[common, cases], help="grade a submission: a folder, a .zip, or a single .py file or .ipynb notebook")
    g.add_argument("path")
    g.add_argument("--results", help="write Gradescope's results.json here")
    g.add_argument("--component", action="append", help="grade only this component (repeatable)")
    g.add_argument("--visible-only", action="store_true", help="run only the visible cases")
    g.add_argument("--secret-file", type=Path, help="file holding the secret that draws hidden inputs (default: $AUTOGRADER_SECRET)")
    g.add_argument("--require-tier", choices=ORDER, default="same-user",
                   help="refuse to grade below this isolation tier (weakest to strongest: %(choices)s)")
    g.set_defaults(func=cmd_grade)

    ga = sub.add_parser("grade-all", parents=[common, progress], help="TAs: grade a class (a Gradescope export, zipped or not, or a folder "
                                                                      "of submissions) in parallel, resumably, into a gradebook")
    ga.add_argument("submissions", help="a Gradescope 'Export Submissions' zip or folder, or a folder whose every entry is a submission")
    ga.add_argument("--out", required=True, help="where grades.csv, results/, feedback/, summary.json and the journal go")
    ga.add_argument("--jobs", type=int, help="submissions graded at once (default: the usable cores; with --backend ray, as many as "
                                              "the cluster holds)")
    ga.add_argument("--secret-file", type=Path, help="the secret that draws hidden inputs (default: $AUTOGRADER_SECRET, else OUT/secret.txt)")
    ga.add_argument("--require-tier", choices=ORDER, default="same-user", help="refuse to grade below this isolation tier")
    ga.add_argument("--plan", action="store_true", help="grade nothing: print how many submissions the export holds, which are to "
                    "grade, which cannot be graded and every problem found, and write what each is graded from to OUT/plan.json")
    ga.add_argument("--part", action="append", help="grade only this part, out of its points (its number, 1, 2..., or its name; "
                    "repeatable); without it, the part every submission holds files of, else the whole course")
    ga.add_argument("--regrade", action="store_true", help="grade every submission again, even those already graded")
    ga.add_argument("--canvas-gradebook", type=Path, metavar="FILE", help="the gradebook Canvas exported for the course (Grades, "
                    "Export): canvas.csv is then written in it, its students matched by SIS User ID, SIS Login ID, then email")
    ga.add_argument("--canvas-assignment", metavar='"NAME (ID)"', help="with --canvas-gradebook: the assignment's column, headed "
                    "as in Canvas's export")
    ga.add_argument("--only", help="grade only these submission ids (comma-separated)")
    ga.add_argument("--budget", type=float, default=600.0, help="seconds one submission may take before it is stopped (default: 600)")
    ga.add_argument("--similarity", type=float, default=DEFAULT_THRESHOLD,
                    help="the report flags pairs of files sharing at least this share of their tokens (default: %(default)s)")
    ga.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="local: job processes on this machine (default); ray: a Ray cluster (pip install -e '.[ray]')")
    ga.add_argument("--address", help="ray: the cluster to join, as `ray start --head` printed it (default: start one on this machine)")
    ga.add_argument("--timing-on", choices=("auto", "gpu", "cpu"), default="auto",
                    help="ray: measure timing cases on a GPU, or on a node's CPUs (its `timing` resource); auto: on GPUs when the "
                         "cluster has any (default)")
    ga.add_argument("--schedule-timeout", type=float, default=600.0,
                    help="ray: seconds a submission's part may wait for a grader to start for it (a node with room, and the grader's start "
                         "there) before it is infra_error (default: 600)")
    ga.set_defaults(func=cmd_grade_all)

    rp = sub.add_parser("report", parents=[common], help="staff: (re)write the class report of a finished grade-all folder, without regrading")
    rp.add_argument("dir", help="the --out folder of grade-all")
    rp.add_argument("--similarity", type=float, default=DEFAULT_THRESHOLD,
                    help="flag pairs of files sharing at least this share of their tokens (default: %(default)s)")
    rp.set_defaults(func=cmd_report)

    c = sub.add_parser("check", parents=[common, cases], help="run the visible cases on your files, exactly as the grader does")
    c.add_argument("component", nargs="*", help="component ids, e.g. ngram or ngram backprop (default: all)")
    c.add_argument("--dir", default=".", help="folder holding your files (default: here)")
    c.add_argument("--require-tier", choices=("portable", *ORDER), default="portable",
                   help="refuse to run below this isolation tier (portable, no sandbox, only where the sandbox cannot run)")
    c.set_defaults(func=cmd_check)

    r = sub.add_parser("release", parents=[common], help="write the rules into the handouts and solutions, generate starter/ "
                                                         "from solutions/, or with --out the student bundle")
    r.add_argument("--check", action="store_true", help="fail when starter/ or the rules are out of date instead of writing them")
    r.add_argument("--out", help="write the student bundle here: starter files, handouts, notebooks, the visible cases and how to run them")
    r.add_argument("--part", action="append", help="only this part's components (its number, 1, 2..., or its name; repeatable)")
    r.add_argument("--each-part", action="store_true", help="with --out DIR: a release per part (each --part, or every part), "
                                                            "in DIR/part<n>/: its student bundle, bundle/, and its Gradescope autograder.zip")
    r.set_defaults(func=cmd_release)

    gs = sub.add_parser("gradescope", help="Gradescope's autograder zip")
    gs_sub = gs.add_subparsers(dest="action", required=True)
    b = gs_sub.add_parser("build", parents=[common], help="write the zip (setup.sh, run_autograder, grader, rubric, solutions, a new secret)")
    b.add_argument("--out", help="where to write it (default: autograder.zip; autograder-part1.zip with --part 1)")
    b.add_argument("--part", action="append", help="grade only this part (its number, 1, 2..., or its name; repeatable): "
                                                   "one Gradescope assignment per part")
    b.set_defaults(func=cmd_gradescope)

    v = sub.add_parser("verify", parents=[common, progress], help="staff: the solutions earn every point, the starter none, and every known mistake is caught")
    v.add_argument("--component", action="append", help="verify only this component (repeatable)")
    v.add_argument("--mistakes", type=Path, help="the catalog of known mistakes (default: mistakes.yaml in the solutions folder)")
    v.add_argument("--quick", action="store_true", help="leave out the training and timing cases where a mistake need not fail them")
    v.set_defaults(func=cmd_verify)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a Windows pipe's code page cannot show every character: show the rest escaped
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")
    ui = Terminal(Console(highlight=False), Console(stderr=True, highlight=False, soft_wrap=True), min(args.verbose, 1) - min(args.quiet, 1))
    stopped_by: list[int] = []
    try:
        with stops_as_interrupts(stopped_by):
            return args.func(args, ui)
    except KeyboardInterrupt:  # every worker is dead by now (run.grade sweeps on the way out, a batch stops its jobs)
        signum = stopped_by[0] if stopped_by else signal.SIGINT
        ui.err.print("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}", highlight=False)
        return SIGNALLED + signum


@contextlib.contextmanager
def stops_as_interrupts(stopped_by: list[int]):
    """While the block runs, SIGTERM and SIGHUP (STOPS) raise KeyboardInterrupt in this, the main thread, so that
    everything that cleans up after Ctrl-C (workers swept, a batch's jobs stopped and its gradebook written) does so
    after these too; the signal is appended to `stopped_by`, since the exception may reach the caller as another
    KeyboardInterrupt (Ray's waits raise their own). Then the handlers before it are back. A signal ignored when the
    command started stays ignored (nohup's SIGHUP), and once one has arrived the next are ignored: a second `kill`,
    or SIGTERM after SIGHUP, must not cut short the writing of what finished."""
    before = {signum: signal.getsignal(signum) for signum in STOPS}
    caught = [signum for signum, handler in before.items() if handler is not signal.SIG_IGN]

    def stop(signum, frame):
        for each in caught:
            signal.signal(each, signal.SIG_IGN)
        stopped_by.append(signum)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    try:
        for signum in caught:
            signal.signal(signum, stop)
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def check_main() -> int:
    """The `check` command that installing a student bundle puts on the PATH: `check ngram --dir notebooks` is
    `autograder check ngram --dir notebooks`."""
    return main(["check", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
