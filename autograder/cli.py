"""The command line: `grade`, `grade-all`, `report`, `check`, `release`, `gradescope build` and `verify`.

It parses first and imports the command's module after (autograder/commands/), so that `--version`, `--help` and a
check of a component that needs no torch import nothing they do not use. Exit statuses: terminal.py."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
from pathlib import Path

from rich.console import Console

from . import __version__
from .sandbox.host.tiers import ORDER
from .terminal import SIGNALLED, STOPS, Terminal

# The report flags pairs of files sharing this share of their tokens unless --similarity says otherwise: the number is
# batch/report/similarity.py's DEFAULT_THRESHOLD (tests/test_imports.py holds them equal), written here so that
# the parser, which every command builds, imports no batch.
SIMILARITY_HELP = "(default: 0.8)"


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
    g.set_defaults(command_module="grade")

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
    ga.add_argument("--similarity", type=float, help="the report flags pairs of files sharing at least this share of their tokens "
                    + SIMILARITY_HELP)
    ga.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="local: job processes on this machine (default); ray: a Ray cluster (pip install -e '.[ray]')")
    ga.add_argument("--address", help="ray: the cluster to join, as `ray start --head` printed it (default: start one on this machine)")
    ga.add_argument("--timing-on", choices=("auto", "gpu", "cpu"), default="auto",
                    help="ray: measure timing cases on a GPU, or on a node's CPUs (its `timing` resource); auto: on GPUs when the "
                         "cluster has any (default)")
    ga.add_argument("--schedule-timeout", type=float, default=600.0,
                    help="ray: seconds a submission's part may wait for a grader to start for it (a node with room, and the grader's start "
                         "there) before it is infra_error (default: 600)")
    ga.set_defaults(command_module="grade_all")

    rp = sub.add_parser("report", parents=[common], help="staff: (re)write the class report of a finished grade-all folder, without regrading")
    rp.add_argument("dir", help="the --out folder of grade-all")
    rp.add_argument("--similarity", type=float, help="flag pairs of files sharing at least this share of their tokens " + SIMILARITY_HELP)
    rp.set_defaults(command_module="report")

    c = sub.add_parser("check", parents=[common, cases], help="run the visible cases on your files, exactly as the grader does")
    c.add_argument("component", nargs="*", help="component ids, e.g. ngram or ngram backprop (default: all)")
    c.add_argument("--dir", default=".", help="folder holding your files (default: here)")
    c.add_argument("--require-tier", choices=("portable", *ORDER), default="portable",
                   help="refuse to run below this isolation tier (portable, no sandbox, only where the sandbox cannot run)")
    c.add_argument("--watch", action="store_const", dest="command_module", const="watch",
                   help="keep checking: again on every save of your files, each time in the time of the cases alone (Ctrl-C stops)")
    c.set_defaults(command_module="check")

    r = sub.add_parser("release", parents=[common], help="write the rules into the handouts and solutions, generate starter/ "
                                                         "from solutions/, or with --out the student bundle")
    r.add_argument("--check", action="store_true", help="fail when starter/ or the rules are out of date instead of writing them")
    r.add_argument("--out", help="write the student bundle here: starter files, handouts, notebooks, the visible cases and how to run them")
    r.add_argument("--part", action="append", help="only this part's components (its number, 1, 2..., or its name; repeatable)")
    r.add_argument("--each-part", action="store_true", help="with --out DIR: a release per part (each --part, or every part), "
                                                            "in DIR/part<n>/: its student bundle, bundle/, and its Gradescope autograder.zip")
    r.set_defaults(command_module="release")

    gs = sub.add_parser("gradescope", help="Gradescope's autograder zip")
    gs_sub = gs.add_subparsers(dest="action", required=True)
    b = gs_sub.add_parser("build", parents=[common], help="write the zip (setup.sh, run_autograder, grader, rubric, solutions, a new secret)")
    b.add_argument("--out", help="where to write it (default: autograder.zip; autograder-part1.zip with --part 1)")
    b.add_argument("--part", action="append", help="grade only this part (its number, 1, 2..., or its name; repeatable): "
                                                   "one Gradescope assignment per part")
    b.set_defaults(command_module="gradescope")

    v = sub.add_parser("verify", parents=[common, progress], help="staff: the solutions earn every point, the starter none, and every known mistake is caught")
    v.add_argument("--component", action="append", help="verify only this component (repeatable)")
    v.add_argument("--mistakes", type=Path, help="the catalog of known mistakes (default: mistakes.yaml in the solutions folder)")
    v.add_argument("--quick", action="store_true", help="leave out the training and timing cases where a mistake need not fail them")
    v.set_defaults(command_module="verify")
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
            return importlib.import_module(f"{__package__}.commands.{args.command_module}").run(args, ui)
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
