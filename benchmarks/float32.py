"""How often the float32 cases fail correct code written in other operation orders.

    .venv/bin/python benchmarks/float32.py                       # 1000 instances of each float32 case
    .venv/bin/python benchmarks/float32.py --instances 50 --folders tests/alternatives/fused_hoisted

Each float32 case of grading.yaml (params dtype float32, and backprop's "float32 in, float32 out") is
graded on `--instances` random instances (copies of the case made hidden, each drawing its own inputs)
for every folder of correct alternative implementations, in the sandbox, as `autograder grade` would.
Prints one row per case and folder with the instances it failed; exit status 1 if any failed.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

from autograder.rubric import Rubric, load_rubric
from autograder.runner import grade
from autograder.sandbox.host.tiers import isolation_for
from autograder.submission import open_submission

ROOT = Path(__file__).resolve().parents[1]
ALTERNATIVES = ROOT / "tests" / "alternatives"


def float32_case(case) -> bool:
    return case.params.get("dtype") == "float32" or case.check == "backprop.dtypes"


def instances(rubric: Rubric, count: int, components: list[str] | None = None) -> Rubric:
    """The float32 cases only, each `count` times as a hidden case of its own name (so its own inputs)."""
    kept = []
    for c in rubric.components:
        cases = [dataclasses.replace(k, name=f"{k.name} #{i}", visibility="hidden")
                 for k in c.cases if float32_case(k) for i in range(count)]
        if cases and (not components or c.id in components):
            kept.append(dataclasses.replace(c, cases=cases))
    return dataclasses.replace(rubric, components=kept)


def failures(rubric: Rubric, folder: Path, secret: str) -> tuple[dict[str, int], dict[str, str], float]:
    """Failed instances per case name, one failure message per case, and the seconds it took."""
    with tempfile.TemporaryDirectory(prefix="autograder-float32-") as scratch, \
            isolation_for(rubric.path.parent, rubric.solutions_dir) as isolation:
        run = grade(rubric, open_submission(folder, Path(scratch) / "submission"), secret=secret, isolation=isolation)
    failed: dict[str, int] = {}
    example: dict[str, str] = {}
    for r in run.results:
        name = f"[{r.case.component}] {r.case.name.rsplit(' #', 1)[0]}"
        failed.setdefault(name, 0)
        if not r.passed:
            failed[name] += 1
            example.setdefault(name, r.output)
    return failed, example, run.seconds


def measure(rubric: Rubric, folders: list[Path], count: int, components: list[str] | None = None, secret: str = "float32"):
    """[(folder name, case, failed, count)] and the failure messages, one per failing case and folder."""
    chosen = instances(rubric, count, components)
    rows, examples = [], []
    for folder in folders:
        failed, example, seconds = failures(chosen, folder, secret)
        print(f"{folder.name}: {sum(failed.values())} failed of {sum(count for _ in failed)} ({seconds:.0f} s)", file=sys.stderr)
        rows += [(folder.name, name, n, count) for name, n in failed.items()]
        examples += [(folder.name, name, text) for name, text in example.items()]
    return rows, examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=1000, help="random instances of each float32 case (default 1000)")
    parser.add_argument("--folders", type=Path, nargs="+", help="submissions to grade (default: every folder of tests/alternatives)")
    parser.add_argument("--components", nargs="+", help="only these components")
    args = parser.parse_args(argv)
    folders = args.folders or sorted(p for p in ALTERNATIVES.iterdir() if p.is_dir())
    started = time.monotonic()
    rows, examples = measure(load_rubric(ROOT / "grading.yaml"), folders, args.instances, args.components)
    for folder, name, failed, count in rows:
        print(f"{folder:24} {failed:5}/{count}  {name}")
    for folder, name, text in examples:
        print(f"\n{folder}: {name}:\n  {text}")
    total = sum(r[2] for r in rows)
    print(f"\n{total} of {sum(r[3] for r in rows)} instances failed ({time.monotonic() - started:.0f} s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
