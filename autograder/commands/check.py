"""`check`: a student's visible cases, on their own machine, as the grader runs them."""
from __future__ import annotations

import contextlib
from pathlib import Path, PurePosixPath

from ..cases import USES
from ..release import BUNDLE_OWN
from ..report import print_table
from ..rubric import Rubric, RubricError, load_rubric
from ..runner import grade, warm_template
from ..sandbox.host import scratch
from ..sandbox.host.template import TemplateGone
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
    components = args.component or None
    # Where the workers import torch, the rubric is read without its staff tests first: enough to start their template,
    # which then imports torch while collecting the staff tests imports it here (a second each, on two cores at once).
    twice = any("torch" in USES.get(cid, ()) for cid in components or USES)  # an unknown one: the rubric says so
    try:
        outline = rubric_of(args, ui, [] if twice else components, calls=False)
        for cid in components or ():
            outline.component(cid)
        with scratch.folder("check") as copies:
            submission = open_submission(Path(args.dir), copies / "submission", accept_misnamed=outline.accept_misnamed,
                                         graded=outline.files)
            isolation, portable = student_isolation(outline.path.parent, outline.solutions_dir, args.require_tier)
            if portable:
                ui.note(portable)
            ui.warn(isolation.tier.warning)
            with isolation, started(outline, components, submission, isolation) as template:
                rubric = load_rubric(outline.path, components, calls=False) if twice else outline
                run = grade(rubric, submission, secret="local", isolation=isolation, component_ids=components, visible_only=True,
                            template=template)
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


@contextlib.contextmanager
def started(rubric: Rubric, components: list[str] | None, submission, isolation):
    """The template that `grade` would start for the visible cases of `components` (default: every one), started and
    importing now (nothing is timed yet), closed after."""
    chosen = [rubric.component(c) for c in components] if components else rubric.components
    template = warm_template([(c, [k for k in c.cases if k.visible]) for c in chosen], submission, isolation.tier)
    try:
        if template:
            with contextlib.suppress(TemplateGone):  # grade starts its workers from nothing then, as without a template
                template.begin()
        yield template
    finally:
        if template:
            template.close()


def visible_cases_line(run) -> str:
    """What a check says last: these were the visible cases only."""
    return (f"These are the {len(run.results)} visible cases. {run.hidden_not_run} more cases run only when your submission is "
            "graded (hidden cases, and in a student bundle the timing cases), so passing here does not mean full marks.")
