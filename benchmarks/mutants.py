"""Section 9 of BENCHMARKS.md: what naming mistakes by mutants of the reference costs, and how far it reaches.

- the held-out set (benchmarks/held_out_40.yaml: real mistakes written after the mutants by someone who had read
  neither them nor the hints, graded as written): the first failing visible case's message of each, whether it holds
  one of the entry's cause phrases, and whether a hint or a mutant named it;
- mutants generated per component, and those named anywhere in that grading;
- the cost: full grades of solutions/ (passing) and of solutions/ with one held-out mistake per component (failing),
  with the mutants and, alternating with them, without (runner.grade's `explain`).
"""
from __future__ import annotations

import tempfile
import warnings
from collections import defaultdict
from pathlib import Path
from statistics import median

import numpy as np
import yaml

from autograder import runner
from autograder.judge import LIKELY
from autograder.mutants import EVIDENCE
from autograder.mutants.match import Explainer
from benchmarks.common import ROOT, SOLUTIONS, table

SECTION = "## 9. Mutants of the reference: what they name, and what it costs"
HELD_OUT = ROOT / "benchmarks" / "held_out_40.yaml"


def _variant(scratch: Path, file: str, old: str, new: str) -> Path:
    folder = Path(tempfile.mkdtemp(dir=scratch))
    for path in SOLUTIONS.glob("*.py"):
        text = path.read_text()
        (folder / path.name).write_text(text.replace(old, new) if path.name == file else text)
    return folder


def run(rubric, tier, grade_folder, runs: int, log) -> dict:
    entries = yaml.safe_load(HELD_OUT.read_text())
    figures = {"held_out": [], "grades": defaultdict(list)}
    with tempfile.TemporaryDirectory() as scratch:
        for i, e in enumerate(entries):
            log(f"mutants: held-out mistake {i + 1} of {len(entries)}")
            component = rubric.component(e["component"])
            graded = grade_folder(rubric, _variant(Path(scratch), component.file, e["old"], e["new"]), tier, "held-out",
                                  component_ids=[component.id])
            failed = [r for r in graded.results if not r.passed]
            first = next((r for r in failed if r.case.visible), failed[0] if failed else None)
            message = first.output if first else ""
            likely = message.split(LIKELY, 1)[1] if LIKELY in message else ""
            figures["held_out"].append({"name": e["name"], "component": e["component"], "case": first.case.number if first else "-",
                                        "named": any(c.lower() in message.lower() for c in e["cause"]),
                                        "by": "mutant" if EVIDENCE in likely else "hint" if likely else "-", "said": likely or message})
        failing = {}  # one held-out mistake per component, graded with the rest of solutions/
        for e in entries:
            failing.setdefault(e["component"], e)
        folders = {"passing": SOLUTIONS} | {f"failing: {c}": _variant(Path(scratch), rubric.component(c).file, e["old"], e["new"])
                                              for c, e in failing.items()}
        for i in range(runs):
            for way in ("with mutants", "without"):
                log(f"mutants: full grades {way} ({i + 1} of {runs})")
                for kind, folder in folders.items():
                    graded = grade_folder(rubric, folder, tier, f"mutants-{i}", explain=way == "with mutants")
                    figures["grades"][(kind, way)].append(graded.seconds)
    log("mutants: which differ from the reference on some case (solutions/ graded as the student, each mutant run again "
        "on every case that runs its line)")
    figures["generated"], figures["kept"] = kept(rubric, tier, grade_folder)
    return figures


def kept(rubric, tier, grade_folder) -> tuple[dict, dict]:
    """Per component, the mutants generated, and those kept: that fail some case of the reference graded as the student
    (every case is run again with each mutant whose line the case runs). The others can never name a mistake."""
    graded = {}

    class Keeping(Explainer):
        def explain(self, component, results):
            graded[component.id] = (self, results)
            return results

    saved = runner.Explainer
    runner.Explainer = Keeping
    try:
        grade_folder(rubric, SOLUTIONS, tier, "kept")
    finally:
        runner.Explainer = saved
    generated, different = {}, {}
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # what a mutant warns of is no one's business
        warnings.simplefilter("ignore")
        for cid, (explainer, results) in graded.items():
            generated[cid], different[cid] = _kept(rubric, cid, explainer, results)
    return generated, different


def _kept(rubric, cid: str, explainer, results) -> tuple[int, int]:
    """(mutants generated, mutants that fail some case whose run reaches their line) for component `cid`."""
    file = explainer.file(rubric.component(cid))
    cases = [(r, file.ran(r) or set()) for r in results if r.evidence is not None]
    differs = [m for m in file.mutants if any((m.function, m.line) in ran and not file.agrees(m, r) for r, ran in cases)]
    return len(file.mutants), len(differs)


def section(figures: dict | None, measured: str) -> str:
    if figures is None:
        return f"{SECTION}\n\nNot measured in this run (`benchmarks/run.py --only-mutants` measures it)."
    held = figures["held_out"]
    by_component = defaultdict(lambda: [0, 0, 0])
    for h in held:
        row = by_component[h["component"]]
        row[0] += 1
        row[1] += h["named"]
        row[2] += h["named"] and h["by"] == "mutant"
    matched = defaultdict(set)  # component -> the mutants' sentences that named a held-out mistake
    for h in held:
        if h["by"] == "mutant":
            matched[h["component"]].add(h["said"].split(f". {EVIDENCE}")[0])
    rows = [[c, figures["generated"].get(c, "-"), figures["kept"].get(c, "-"), len(matched[c]), n, named, by_mutant]
            for c, (n, named, by_mutant) in by_component.items()]
    named = sum(h["named"] for h in held)
    messages = [[h["name"], h["component"], h["case"], "yes" if h["named"] else "no", h["by"], " ".join(h["said"].split())[:220].replace("|", "/")]
                for h in held]
    grades = figures["grades"]
    cost = []
    for kind in dict.fromkeys(k for k, _ in grades):
        on, off = median(grades[kind, "with mutants"]), median(grades[kind, "without"])
        cost.append([kind, len(grades[kind, "with mutants"]), f"{off:.1f}", f"{on:.1f}", f"{on / off:.2f}"])
    return "\n\n".join([
        SECTION,
        measured,
        f"The held-out set, {len(held)} mistakes graded as written: {named} ({100 * named / len(held):.0f}%) have a cause "
        "phrase of their entry in the first failing visible case's message. Per component, the mutants generated from "
        "solutions/, those kept (that fail some case of the reference graded as the student: the rest can never name a "
        "mistake), those that named a held-out mistake, and the held-out mistakes named, by a hint or by a mutant:",
        table(["component", "mutants generated", "kept (differ on some case)", "named a held-out mistake", "held-out mistakes",
               "named", "named by a mutant"], rows),
        "What each first failing message said (its likely mistake where it names one; a phrase that is not the entry's may "
        "still be the cause in other words, so each \"no\" is read by a person: the closing note of issue 40 says which):",
        table(["mistake", "component", "case", "cause phrase", "named by", "said"], messages),
        "Full grades (every component; seconds, median) with the mutants and without (runner.grade's `explain`), "
        "alternating: solutions/ as it is, and solutions/ with one held-out mistake of each component:",
        table(["grade", "runs", "without s", "with s", "ratio"], cost),
    ])
