"""Correct alternatives against the grader: every folder of tests/alternatives graded with many secrets.

    .venv/bin/python benchmarks/alternatives.py                     # 20 secrets, every folder and component
    .venv/bin/python benchmarks/alternatives.py --secrets 5 --folders gpt_style --components backprop transformer
    .venv/bin/python benchmarks/alternatives.py --secrets 1 --components lstm --timing

Each grading is `autograder grade`'s, in the sandbox, with the secret "alternatives-<i>": hidden cases draw their
inputs from it (a new instance per secret), visible ones use the public inputs (the same each time). Prints, per
folder and case, how many gradings lost points, with the first message and the secrets that lost them, then a
total. Timing cases are left out unless --timing; with it, their verdicts are printed in a table of their own.
Exit status 1 if any non-timing point was lost (timing verdicts never set it).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from autograder.cases import TIMING
from autograder.rubric import Rubric, load_rubric
from autograder.runner import CaseResult, grade
from autograder.sandbox.host.tiers import isolation_for
from autograder.submission import open_submission

ROOT = Path(__file__).resolve().parents[1]
ALTERNATIVES = ROOT / "tests" / "alternatives"


def chosen(rubric: Rubric, components: list[str] | None, timing: bool) -> Rubric:
    """The rubric narrowed to `components`, without its timing cases unless `timing`."""
    kept = [dataclasses.replace(c, cases=[k for k in c.cases if timing or k.check not in TIMING])
            for c in rubric.components if not components or c.id in components]
    return dataclasses.replace(rubric, components=kept)


def gradings(rubric: Rubric, folder: Path, secrets: list[str]):
    """(secret, results, seconds) for each secret."""
    for secret in secrets:
        with tempfile.TemporaryDirectory(prefix="autograder-alternatives-") as scratch, \
                isolation_for(rubric.path.parent, rubric.solutions_dir) as isolation:
            run = grade(rubric, open_submission(folder, Path(scratch) / "submission"), secret=secret, isolation=isolation)
        yield secret, run.results, run.seconds


def lost(r: CaseResult) -> bool:
    return not r.passed or r.score < r.max_score


def report(results: dict[str, list[tuple[str, CaseResult]]], n: int) -> int:
    """Print the cases that lost points in some grading; return how many case gradings lost points."""
    total = 0
    for number, graded in results.items():
        losing = [(secret, r) for secret, r in graded if lost(r)]
        total += len(losing)
        if losing:
            case = losing[0][1].case
            secrets = ", ".join(secret for secret, _ in losing[:5]) + (", ..." if len(losing) > 5 else "")
            print(f"  {len(losing):>3}/{n}  case {number} {case.name}  (secrets {secrets})")
            print("          " + losing[0][1].output.replace("\n", "\n          "))
    return total


def report_timing(folder: str, results: dict[str, list[tuple[str, CaseResult]]], n: int) -> None:
    for number, graded in results.items():
        case = graded[0][1].case
        earned = sum(r.score for _, r in graded) / n
        print(f"  {folder}  case {number} {case.name}: full points in {sum(not lost(r) for _, r in graded)}/{n}, "
              f"mean {earned:.2f} of {case.points:g} points")
        for message in dict.fromkeys(r.output for _, r in graded):
            print("      " + message.replace("\n", "\n      "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--secrets", type=int, default=20, help="gradings per folder, each with its own secret (default 20)")
    parser.add_argument("--folders", nargs="+", metavar="FOLDER",
                        help="folders of tests/alternatives by name, or paths to other submission folders (default: all)")
    parser.add_argument("--components", nargs="+", metavar="ID", help="component ids to grade (default: all)")
    parser.add_argument("--timing", action="store_true", help="include the timing cases, reported apart")
    args = parser.parse_args(argv)

    full = load_rubric(ROOT / "grading.yaml")
    unknown = sorted(set(args.components or []) - {c.id for c in full.components})
    if unknown:
        parser.error(f"unknown component(s) {', '.join(unknown)}; the rubric has {', '.join(c.id for c in full.components)}")
    rubric = chosen(full, args.components, args.timing)
    folders = [Path(f) if Path(f).is_dir() else ALTERNATIVES / f for f in args.folders] if args.folders else sorted(
        p for p in ALTERNATIVES.iterdir() if p.is_dir() and p.name != "__pycache__")
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        parser.error(f"no such folder: {', '.join(missing)}")
    secrets = [f"alternatives-{i}" for i in range(args.secrets)]

    failed = graded_cases = 0
    timing: dict[str, dict] = {}
    for folder in folders:
        results: dict[str, list] = defaultdict(list)
        timed: dict[str, list] = defaultdict(list)
        seconds = 0.0
        for secret, run_results, took in gradings(rubric, folder, secrets):
            seconds += took
            for r in run_results:
                (timed if r.case.check in TIMING else results)[r.case.number].append((secret, r))
        print(f"{folder.name}: {len(secrets)} gradings of {len(results)} cases and {len(timed)} timing cases in {seconds:.0f} s; "
              "cases that lost points (gradings that lost them / gradings):")
        lost_here = report(results, len(secrets))
        if not lost_here:
            print("  none")
        failed += lost_here
        graded_cases += sum(len(v) for v in results.values())
        timing[folder.name] = timed
    print(f"total: {failed} of {graded_cases} case gradings lost points ({len(folders)} folders x {len(secrets)} secrets)"
          + ("" if args.timing else "; timing cases left out"))
    if args.timing:
        print("timing cases (speed, not correctness; never the exit status):")
        for name, timed in timing.items():
            report_timing(name, timed, len(secrets))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
