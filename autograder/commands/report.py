"""`report`: the class report of a finished grade-all folder, written again without regrading."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..batch import ExportError, build_report
from ..batch.report import DEFAULT_THRESHOLD
from ..rubric import RubricError
from ..terminal import USAGE_ERROR, Terminal
from . import rubric_of


def run(args, ui: Terminal) -> int:
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
                     DEFAULT_THRESHOLD if args.similarity is None else args.similarity)
    except (RubricError, ExportError, OSError, ValueError) as exc:
        ui.error(str(exc))
        return USAGE_ERROR
    ui.out.print(f"wrote {out / 'report.html'} and {out / 'report.json'}", highlight=False)
    return 0
