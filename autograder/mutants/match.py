"""Matching: a failed case explained by the mutant of the reference whose answers are the student's.

A case's exchanges with the student's worker are kept (sandbox/host/tape.py). When it fails with a wrong answer that
no hint or diagnostic named, its check runs again in this process on those same exchanges, with a mutant of the
component's solution file in the reference's place: the comparisons then ask whether the student's answers are that
mutant's, within the case's own tolerance. Only mutants of the lines the case's check runs on the reference are
tried. A mutant that matches must pass every case of the component the student passed, and is preferred by how many
of the cases the student failed it also matches; the best is named, two or three that tie are named as "one of", more
say nothing: a wrong cause named is worse than none.
"""
from __future__ import annotations

import functools
import sys
import traceback
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cases import CHECKS, TIMING
from ..diagnose import LIKELY
from ..expected import REFERENCE, Live
from ..outcome import Ended
from ..sandbox.host.process import Deadline
from ..sandbox.host.proxy import Proxy
from ..sandbox.host.tape import Exhausted, Replayed, Tape
from ..trial import Trial
from . import EVIDENCE
from .edits import Mutant, generate

LONGEST = 10.0  # seconds: the longest time limit of a case that mutants are run on
NAMED_AT_MOST = 3  # mutants that tie and are still named together ("one of"); more is no evidence of any one


@dataclass(frozen=True)
class Evidence:
    """What a case of the student's left to be explained: its exchanges with the worker, and the comparisons it passed."""

    entries: list
    judged: int


def explainable(case) -> bool:
    """A check of the course's (not a staff test, not a timing) that can run again on its exchanges, and is quick: a
    case given more than LONGEST seconds (training, thousands of draws) would cost that much per mutant."""
    return not case.unittest and case.check not in TIMING and case.timeout <= LONGEST


def left_to_explain(tape: Tape, trial: Trial, outcome) -> Evidence | None:
    """What a case of an explainable check leaves: its exchanges, when it passed or failed at one of its comparisons
    (a sample's test, or the check's own t.fail, says nothing a mutant's answers could match)."""
    failed_comparing = outcome.kind == "wrong" and trial.compared > trial.judged
    return Evidence(tape.entries, trial.judged) if outcome.passed or failed_comparing else None


@functools.lru_cache(maxsize=16)
def mutants_of(path: Path, source: str) -> tuple[Mutant, ...]:
    return tuple(generate(path.name, source))


@functools.lru_cache(maxsize=4096)
def _module(path: Path, source: str, mutant: Mutant) -> types.ModuleType:
    """The mutant as a module of the reference's name, never registered in sys.modules (the reference stays there)."""
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(mutant.source(source), f"<mutant of {path.name}: {mutant.sentence}>", "exec"), module.__dict__)
    return module


class Mutated:
    """The reference with one module replaced by a mutant of it: what `t.expect` lambdas receive as `ref`."""

    def __init__(self, reference, name: str, module: types.ModuleType):
        self._reference, self._name, self._module = reference, name, module

    def __getattr__(self, name: str):
        return self._module if name == self._name else getattr(self._reference, name)


class _Unhinted(Live):
    """The reference (or a mutant) for a check run again: only whether its comparisons pass counts, so no hint is
    computed for one that fails."""

    def hints(self, rng, hints):
        return None


class Explainer:
    """Explains the failed cases of one grade, a component at a time."""

    def __init__(self, reference, secret: str):
        self.reference, self.secret = reference, secret

    def explain(self, component, results: list) -> list:
        """`results` with what mutants name added to the failed cases' messages; unchanged if the explaining fails (the
        grader's own bug, printed for whoever runs it): the grades stand without it."""
        try:
            return self._explained(component, results)
        except Exception:
            traceback.print_exc()
            return results

    def file(self, component) -> SolutionFile | None:
        """The component's solution file, its mutants run against this grade's cases; None where there is none."""
        path = self.reference.solutions_dir / component.file
        return SolutionFile(self, path) if path.is_file() else None

    def _explained(self, component, results: list) -> list:
        file = self.file(component)
        if file is None:
            return results
        with_evidence = [r for r in results if r.evidence is not None]
        failed = [r for r in results if r.outcome.kind == "wrong" and r.evidence is not None and LIKELY not in r.output]
        search, said = _Search(), {}  # case (by id) -> its words
        # What a student sees never depends on the secret: the visible cases are explained first, by the visible cases
        # alone; then the hidden ones, by them all, trying first what the visible ones named.
        # One reference computation at a time (expected.REFERENCE), and what a mutant warns of is no one's business.
        with REFERENCE, warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for r in sorted(failed, key=lambda r: not r.case.visible):
                others = [o for o in with_evidence if o is not r and (o.case.visible or not r.case.visible)]
                said[id(r)] = search.words(file, r, others)
        return [r.with_outcome(message=f"{r.output}{said[id(r)]}") if said.get(id(r)) else r for r in results]

    def replay(self, result, reference) -> bool | None:
        """The result's check run again on its exchanges with `reference`: True, it agrees with the student's answers;
        False, it fails at the comparison the student failed or before it; None, the check went elsewhere (another
        request, an error of the grader's)."""
        case, evidence = result.case, result.evidence
        trial = Trial(case, Proxy(Replayed(evidence.entries), Deadline.after(60)), _Unhinted(reference), self.secret)
        try:
            CHECKS[case.check](trial, **case.params)
        except Exhausted:
            return not result.passed and trial.judged > evidence.judged
        except Ended:
            return False if trial.judged <= evidence.judged else None
        except Exception:  # the mutant raised, or the check went where the recording does not reach
            return None
        return True if result.passed else trial.judged > evidence.judged


class SolutionFile:
    """A component's solution file within one grade: its mutants, and which of them agree with which case."""

    def __init__(self, explainer: Explainer, path: Path):
        self.explainer, self.path, self.source = explainer, path, path.read_text()
        self.mutants = mutants_of(path, self.source)
        self._agrees: dict[tuple[Mutant, int], bool] = {}  # (mutant, id of a case's result): computed once

    def agrees(self, mutant: Mutant, result) -> bool:
        """The mutant gives the student's answers in this case: it passes where the student passed, and where the
        student failed it passes at least the comparison that failed."""
        key = (mutant, id(result))
        if key not in self._agrees:
            mutated = Mutated(self.explainer.reference, self.path.stem, _module(self.path, self.source, mutant))
            self._agrees[key] = self.explainer.replay(result, mutated) is True
        return self._agrees[key]

    def ran(self, result) -> set[tuple[str, int]] | None:
        """The lines of the file the case's check runs, as (function's qualname, line), when run again on the reference
        (None: the run again did not end as the case did, so its exchanges cannot be trusted to replay)."""
        ran: set[tuple[str, int]] = set()
        name = str(self.path)

        def line(frame, event, arg):
            if event == "line":
                ran.add((frame.f_code.co_qualname, frame.f_lineno))
            return line

        def call(frame, event, arg):
            return line if frame.f_code.co_filename == name else None

        previous = sys.gettrace()
        sys.settrace(call)
        try:
            reproduced = self.explainer.replay(result, self.explainer.reference) is result.passed
        finally:
            sys.settrace(previous)
        return ran if reproduced else None


class _Search:
    """What explaining one component's failed cases has found so far: the mutants named (tried first on the next case),
    and whether the search over all of them was made."""

    def __init__(self):
        self.named: list[Mutant] = []
        self.searched = False

    def _matching(self, file: SolutionFile, failed) -> list[Mutant]:
        """A mistake that explained an earlier case and explains this one too is the same mistake: it is tried first.
        The search over every mutant of the lines the case runs is made only when none does, and once per component:
        its first failure no hint named runs the mistaken line if one mistake explains them all, and what a second
        mistake costs is its name, never a wrong one."""
        matching = [m for m in self.named if file.agrees(m, failed)]
        if matching or self.searched:
            return matching
        self.searched = True
        ran = file.ran(failed)
        return [m for m in file.mutants if (m.function, m.line) in ran and file.agrees(m, failed)] if ran else []

    def words(self, file: SolutionFile, failed, others: list) -> str:
        """The words naming the mutant (or the two or three) that give the student's answers in `failed`, or ""."""
        # A mutant that fails a case the student passes is not the student's program there: it breaks what they got
        # right (a decode_step edit standing for a forward that drops the state). Where the student fails, their code
        # may differ in more ways than one, so agreement there only ranks the mutants.
        matching = [m for m in self._matching(file, failed) if all(file.agrees(m, o) for o in others if o.passed)]
        if not matching:
            return ""
        score = {m: sum(file.agrees(m, o) for o in others) for m in matching}
        best = max(score.values())
        self.named += [m for m in matching if score[m] == best and m not in self.named]
        sentences = list(dict.fromkeys(m.sentence for m in matching if score[m] == best))
        if len(sentences) > NAMED_AT_MOST:
            return ""
        also = f" and in {best} of the component's {len(others)} other{' visible' * failed.case.visible} cases" if others else ""
        change = "that one change" if len(sentences) == 1 else "one of these changes"
        said = sentences[0] if len(sentences) == 1 else f"one of: {'; or '.join(sentences)}"
        return f" {LIKELY}{said}. {EVIDENCE} {change} gives your answers here{also}."
