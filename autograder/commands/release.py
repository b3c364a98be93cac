"""`release`: the rules written into the handouts and solutions, starter/ generated, or a student bundle per part."""
from __future__ import annotations

from pathlib import Path

from ..release import ReleaseError, stale_rules, write_rules
from ..release.bundle import BundleError, check_bundle_target, write_bundle
from ..release.gradescope import build_zip
from ..release.starter import StarterError, stale_starter, write_starter
from ..rubric import Rubric, RubricError
from ..submission.reading import SubmissionError
from ..terminal import USAGE_ERROR, Terminal
from . import rubric_of


def run(args, ui: Terminal) -> int:
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
