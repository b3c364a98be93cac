"""`grade`: one submission, every case (or some components'), into the table and Gradescope's results.json."""
from __future__ import annotations

import traceback
from pathlib import Path

from ..report import account_lines, failure_json, print_table, results_json, write_results
from ..rubric import RubricError
from ..runner import grade
from ..sandbox.host import scratch
from ..sandbox.host.tiers import TierUnavailable, isolation_for
from ..submission import open_submission
from ..submission.reading import SubmissionError
from ..terminal import GRADER_FAILED, USAGE_ERROR, Terminal
from . import read_secret, rubric_of


def print_account(account, ui: Terminal) -> None:
    """What was found in the submission and what became of each file: part of the results, but not of -q's."""
    if ui.verbosity >= 0:
        for line in account_lines(account):
            ui.out.print(line, markup=False, highlight=False)


def run(args, ui: Terminal) -> int:
    results = Path(args.results).absolute() if args.results else None
    try:
        rubric = rubric_of(args, ui, args.component)
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
