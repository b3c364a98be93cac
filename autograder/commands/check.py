"""`check`: a student's visible cases, on their own machine, as the grader runs them."""
from __future__ import annotations

from pathlib import Path, PurePosixPath

from ..release.bundle import BUNDLE_OWN
from ..report import print_table
from ..rubric import Rubric, RubricError
from ..runner import grade
from ..sandbox.host import scratch
from ..sandbox.host.tiers import TierUnavailable, student_isolation
from ..submission import open_submission
from ..submission.reading import SubmissionError
from ..terminal import GRADER_FAILED, USAGE_ERROR, Terminal
from . import rubric_of
from .grade import print_account


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


def run(args, ui: Terminal) -> int:
    try:
        rubric = rubric_of(args, ui, args.component or None)
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
    ui.out.print(visible_cases_line(run), highlight=False)
    if run.grader_failed:
        return GRADER_FAILED
    return 1 if any(r.counted and not r.passed for r in run.results) else 0  # scripts and CI can tell a failed case


def visible_cases_line(run) -> str:
    """What a check says last: these were the visible cases only."""
    return (f"These are the {len(run.results)} visible cases. {run.hidden_not_run} more cases run only when your submission is "
            "graded (hidden cases, and in a student bundle the timing cases), so passing here does not mean full marks.")
