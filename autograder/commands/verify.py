"""`verify`: the solutions earn every point, the starter none, and every known mistake is caught."""
from __future__ import annotations

from ..rubric import RubricError
from ..sandbox.host.tiers import TierUnavailable
from ..submission.reading import SubmissionError
from ..terminal import USAGE_ERROR, Terminal
from ..verify import MistakesError, load_mistakes, print_report, verify
from . import rubric_of


def run(args, ui: Terminal) -> int:
    try:
        rubric = rubric_of(args, ui)
        report = verify(rubric, load_mistakes(rubric, args.mistakes), args.component, args.quick, progress=ui.note)
    except (RubricError, MistakesError, SubmissionError, TierUnavailable, OSError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    print_report(report, ui.out)
    return 0 if report.passed else 1
