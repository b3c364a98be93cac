"""`gradescope build`: Gradescope's autograder zip, of the course or of some parts."""
from __future__ import annotations

from pathlib import Path

from ..release import ReleaseError
from ..release.gradescope import build_zip, zip_name
from ..rubric import RubricError
from ..terminal import USAGE_ERROR, Terminal
from . import rubric_of
from .release import zip_written


def run(args, ui: Terminal) -> int:
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
