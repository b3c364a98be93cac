"""Running: drive each component's cases through a worker, one case at a time.

Each component gets its own worker, started before its first case so start-up
time is not charged to the case; a case that kills or hangs its worker fails,
and the next case gets a fresh one. Two components are graded at once where two
cores are usable, and a timing case runs alone on the machine. Whatever goes
wrong, every case ends with one Outcome (outcome.py): a case passes only when
its check returned normally.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import unittests
from .cases import APART, BUILDS_ON, CHECKS, IMPORTS, SUBJECTS, TIMING, USES
from .expected import Live, Replay
from .forbidden import forbidden_names, importable, python_files, scan_submission, syntax_error
from .mutants.match import Evidence, Explainer, explainable, left_to_explain
from .outcome import GRADER_FAILED, INTERNAL_ERROR, PASSED, Ended, Outcome
from .reference import Reference
from .returns import Boundary
from .rubric import Case, Component, Rubric
from .sandbox.host import reaper
from .sandbox.host.floor import Floor
from .sandbox.host.process import Deadline, Limits, StudentRaised, forkable, start_template, template_modules
from .sandbox.host.proxy import Proxy, Slot
from .sandbox.host.tape import Tape
from .sandbox.host.template import Template, TemplateGone
from .sandbox.host.tiers import STUDENT_IDS, Isolation, Tier
from .submission import Submission
from .tensors import deferred
from .terminal import printable
from .timing import Speed, Verdict, reference_slot
from .trial import Trial

torch = deferred("torch")


@dataclass(frozen=True)
class CaseResult:
    """A case's report: its outcome, and what it cost."""

    case: Case
    outcome: Outcome
    seconds: float = 0.0
    counted: bool = True  # False: reported only (a timing case without a GPU under `inform` or `skip`)
    printed: str = ""  # what the student's code printed during a visible case (never a hidden one), made safe to show
    printed_more: int = 0  # characters it printed beyond those
    evidence: Evidence | None = field(default=None, compare=False, repr=False)  # for mutants to explain, until judged

    @property
    def passed(self) -> bool:
        return self.outcome.passed

    @property
    def output(self) -> str:
        return self.outcome.message

    @property
    def fraction(self) -> float:
        return self.outcome.fraction

    @property
    def extra(self) -> dict:
        return self.outcome.extra

    @property
    def forbidden(self) -> bool:
        return self.outcome.kind == "forbidden"

    @property
    def max_score(self) -> float:
        return self.case.points if self.counted else 0.0

    @property
    def score(self) -> float:
        return self.max_score * self.fraction if self.passed else 0.0

    def with_outcome(self, **changes) -> CaseResult:
        return replace(self, outcome=replace(self.outcome, **changes))


@dataclass
class GradeRun:
    results: list[CaseResult] = field(default_factory=list)
    hidden_not_run: int = 0
    seconds: float = 0.0
    isolation: dict = field(default_factory=dict)  # the tier and what held, for the terminal and results.json
    rubric: dict = field(default_factory=dict)  # which rubric graded (collect.Rubric.record)
    forbidden: dict[str, str] = field(default_factory=dict)  # component -> its first case that reached a forbidden built-in

    @property
    def grader_failed(self) -> list[str]:
        """The numbers of the cases the grader itself failed on (infra_error): nothing was decided about them."""
        return [r.case.number for r in self.results if r.outcome.kind == GRADER_FAILED]

    def grader_failure_line(self) -> str:
        """What a person reading the results must know first when the grader failed on some cases; "" when it did not."""
        failed = self.grader_failed
        if not failed:
            return ""
        shown = ", ".join(failed[:8]) + (f" and {len(failed) - 8} more" if len(failed) > 8 else "")
        return (f"The grader itself failed on {len(failed)} case{'s' * (len(failed) != 1)} ({shown}): its own failure, not your "
                "code's. Their points were not decided, so this score is not final; course staff must grade the submission again.")

    @property
    def isolation_line(self) -> str:
        held = self.isolation.get("held", {})
        parts = [f"{self.isolation.get('tier', '?')} ({self.isolation.get('guarantees', '')})"]
        if held:
            parts.append("own network namespace" if held.get("network_namespace") else "no network namespace")
            parts.append(f"seccomp {held['seccomp']}")
        return "; ".join(parts + self.isolation.get("notes", []))


def grade(
    rubric: Rubric,
    submission: Submission,
    *,
    secret: str,
    isolation: Isolation,
    component_ids: list[str] | None = None,
    case_numbers: set[str] | None = None,
    visible_only: bool = False,
    expected=None,
    on_result: Callable[[CaseResult], None] = lambda r: None,
    lanes: int | None = None,
    machine: Path | None = None,
    reference: Slot | None = None,
    timing: bool | None = None,
    template: Template | None = None,
    explain: bool = True,
) -> GradeRun:
    """Grade `submission` under `isolation` (entered); every student process is dead when this returns.
    Expected values come from the reference modules, or from the rubric's recording in a student bundle
    (`expected`: an expected.Recorder records them while grading the reference).

    Components are graded on `lanes` threads at once (default: one per usable core, at most LANES), each share of
    one in a worker of its own, started before a lane takes it (`_Pipeline`); results still reach `on_result` in the
    rubric's order. A timing case runs alone (`Floor`; `machine`: a lock file other graders on this machine
    share, as a batch's jobs do). `reference`: the reference's worker for timing cases, when the caller keeps one
    across grades (a batch job: timing.renew); else this grade starts its own and stops it.

    `case_numbers`: only these cases of the components (by number), and the cases of the checks they build on (cases.BUILDS_ON),
    so that a failure still names its cause first (_causes_first); a component left with none of them is left out.

    `timing`: None grades every case; True only the timing cases, False all the others, each component that has
    none of them left out (a batch on a cluster grades the two apart, and `merged` joins them).

    `template`: the template to fork the workers from, when the caller keeps one across grades of the course's own
    code (verify's variants of solutions/); else this grade starts one for this submission alone, and closes it.

    `explain`: failed cases no hint named are run again with mutants of the reference, to name the mistake
    (mutants/match.py); verify, which judges whether known mistakes are caught and with which words, leaves it out."""
    started = time.monotonic()
    run = GradeRun(isolation={**isolation.record(), "held": {}}, rubric=rubric.record)
    if expected is None:
        expected = Replay(rubric.expected) if rubric.expected else Live(Reference(rubric.solutions_dir))
    components = [rubric.component(c) for c in component_ids] if component_ids else rubric.components
    todo = [(c, [k for k in c.cases if k.visible or not visible_only]) for c in components]
    run.hidden_not_run = sum(len(c.cases) - len(cases) + c.not_here for c, cases in todo)
    if case_numbers is not None:  # after counting: a visible case left out is not a hidden one
        parts = {p for _, cases in todo for k in cases if k.number in case_numbers for p in BUILDS_ON.get(k.check, ())}
        todo = [(c, kept) for c, cases in todo if (kept := [k for k in cases if k.number in case_numbers or k.check in parts])]
    if timing is not None:
        todo = [(c, part) for c, cases in todo if (part := [k for k in cases if (k.check in TIMING) == timing])]
    timed = [k for _, cases in todo for k in cases if k.check in TIMING]
    own_reference = reference is None
    if own_reference:
        reference = reference_worker(rubric, isolation.tier, timed)
    speed = Speed(rubric.timing, reference, isolation.tier)
    # A lane grades a share of a component at a time, in a worker of its own. The cases that need imports of their own
    # (cases.IMPORTS: training imports torch._dynamo, a second) are a share apart from the rest of their component, so
    # that those heavy cases run on one lane while the rest of the component is graded on the other.
    shares = [(i, part) for i, (_, cases) in enumerate(todo) for part in _shares(cases)]
    floor = Floor(machine)
    explainer = Explainer(expected.reference, secret) if explain and isinstance(expected, Live) else None  # a bundle has no reference
    report = _InOrder(run, on_result, [sum(i == j for j, _ in shares) for i in range(len(todo))],
                      lambda plan, results: _judged(plan, results, submission.caveats.get(plan.component.file), explainer))
    count = max(1, min(lanes or usable_cores(), LANES, len(shares)))
    # Shares set apart (they hold the heaviest cases) first, then the costliest of the others, then the rubric's order
    # (the first parts of a course are the cheapest), so that the lanes end close together.
    # The reference's worker, which every timing case uses, starts in turn just before the second share that times:
    # the first one's timing cases come last in it.
    own = [s for s, (_, part) in enumerate(shares) if part and _apart(part[0]) != _REST]
    rest = [s for s in range(len(shares)) if s not in own]
    costliest = max(rest, key=lambda s: sum(k.timeout for k in shares[s][1]), default=None)
    order = own + [s for s in rest if s == costliest] + [s for s in rest if s != costliest]
    timing = [pos for pos, s in enumerate(order) if any(k.check in TIMING for k in shares[s][1])]
    if timing:
        order.insert(timing[1] if len(timing) > 1 else len(order), None)
    # The submission's workers fork from one template (sandbox/host/template.py) that imports what the cases use
    # (cases.USES: numpy, and torch but for ngram, backprop and word2vec) and what their own requests import
    # (cases.IMPORTS), while the grader plans (`_imported`). It starts on this thread: a parent-death signal follows
    # the thread that started the process, and the lanes' threads end before grading does.
    own_template = template is None
    if own_template:
        template = warm_template(todo, submission, isolation.tier)
    scans = _Scans(submission.dir)
    pipeline = _Pipeline(order, floor, isolation.tier, reference,
                         lambda s, tier: _plan(todo[shares[s][0]][0], shares[s][1], submission, rubric, tier, template, scans))

    def lane() -> None:
        for s, plan in pipeline.shares():
            report.add(shares[s][0], plan,
                       _grade_share(plan, expected, secret, rubric, run.isolation["held"], floor, speed, pipeline.cancelled))

    with _one_thread("torch" in _modules([k for _, cases in todo for k in cases])), ThreadPoolExecutor(max_workers=2 * count + 1, thread_name_prefix="grade") as pool:
        threads = [pool.submit(pipeline.start_next) for _ in range(count)] + [pool.submit(lane) for _ in range(count)]
        threads += [pool.submit(_imported, template, floor)] if template else []
        try:
            for thread in wait(threads, return_when=FIRST_EXCEPTION).done:
                thread.result()  # the first failure, if any, raised here
        except BaseException:  # Ctrl-C, or the grader's own failure: what is running ends now
            pipeline.cancel()
            raise
        finally:
            pool.shutdown(wait=True)
            pipeline.stop()
            if own_reference:
                reference.stop()
            if own_template and template:
                template.close()
    if speed.unseen:  # said once for the run too, where the isolation tier is
        run.isolation["notes"] = [*run.isolation.get("notes", []), speed.unseen]
    run.seconds = time.monotonic() - started
    return run


@contextlib.contextmanager
def _one_thread(torch_used: bool):
    """The reference's computations in this process on one thread: they are small, and the cores are the lanes'.
    Only where the cases use torch: the others never import it."""
    if not torch_used:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class _Pipeline:
    """Shares of components in grading order, each handed to the next free lane with its worker already started.
    One starter per lane plans the next share and starts its worker under a student uid nobody else holds:
    tiers.STUDENT_IDS uids, one per lane's share and one per started worker waiting for a lane, each given back
    once its share is graded and what it left running is killed by uid. So a sweep never kills another share's
    worker, and a lane rarely waits for a start."""

    POLL = 0.05  # seconds between looks at `cancelled` while waiting

    def __init__(self, order: list[int | None], floor: Floor, tier: Tier, reference: Slot, make_plan: Callable[[int, Tier], _Plan]):
        """`order`: share indices, and None where the reference's worker is to start."""
        self.order, self.floor, self.tier, self.reference, self.make_plan = list(order), floor, tier, reference, make_plan
        self.waiting = sum(i is not None for i in order)  # shares not yet handed to a lane
        self.uids: queue.Queue[int] = queue.Queue()
        for uid in range(STUDENT_IDS):
            self.uids.put(uid)
        self.ready: queue.Queue[tuple[int, int, _Plan]] = queue.Queue(maxsize=1)
        self.plans: list[_Plan] = []
        self.lock = threading.Lock()
        self.cancelled = threading.Event()

    def start_next(self) -> None:
        """A starter: until every share is planned, plan the next one, start its worker, hand it over."""
        while (uid := self._get(self.uids)) is not None:
            with self.lock:
                if not self.order:
                    self.uids.put(uid)
                    return
                i = self.order.pop(0)
            if i is None:
                self.uids.put(uid)
                with self.floor.shared():
                    _start_quietly(self.reference)
                continue
            with self.floor.shared():
                plan = self.make_plan(i, self.tier.with_id(uid))
            with self.lock:
                self.plans.append(plan)
            self.floor.register(plan.slot)
            if plan.slot:
                with self.floor.shared(plan.slot):  # its worker runs while it starts, whoever waits
                    _start_quietly(plan.slot)
            while not self.cancelled.is_set():
                with contextlib.suppress(queue.Full):
                    self.ready.put((i, uid, plan), timeout=self.POLL)
                    break
            if plan.slot and plan.slot.imports:  # the reference's side of the same checks runs in this process
                with self.floor.shared():
                    for module in plan.slot.imports:
                        importlib.import_module(module)

    def shares(self):
        """A lane: (index, plan) of each share it is to grade, the uid given back after each."""
        while not self.cancelled.is_set():
            with self.lock:
                if not self.waiting:
                    return
            try:
                i, uid, plan = self.ready.get(timeout=self.POLL)
            except queue.Empty:
                continue
            with self.lock:
                self.waiting -= 1
            try:
                yield i, plan
            finally:
                self.uids.put(uid)

    def _get(self, source: queue.Queue):
        while not self.cancelled.is_set():
            with contextlib.suppress(queue.Empty):
                return source.get(timeout=self.POLL)
        return None

    def cancel(self) -> None:
        """Stop handing out work, and kill every worker, so that each pending request ends at once."""
        self.cancelled.set()
        with self.lock:
            for plan in self.plans:
                if plan.slot:
                    plan.slot.interrupt()

    def stop(self) -> None:
        for plan in self.plans:
            if plan.slot:
                plan.slot.stop()
        for uid in range(STUDENT_IDS) if self.tier.walled else ():
            reaper.sweep(self.tier.with_id(uid).student_id)


LANES = 2  # components graded at once at most (tiers.STUDENT_IDS holds two uids per lane)


def usable_cores() -> int:
    """The cores this process may run on: its affinity where the OS has one (Linux), else all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class _InOrder:
    """Each component's results reach the run and `on_result` in the rubric's order, whichever lane ends first: once
    all its shares are graded (`shares[i]` of component i), in the order of its cases, judged as one (`judge`)."""

    def __init__(self, run: GradeRun, on_result: Callable[[CaseResult], None], shares: list[int],
                 judge: Callable[[_Plan, list[CaseResult]], list[CaseResult]]):
        self.run, self.on_result, self.shares, self.judge = run, on_result, shares, judge
        self.graded: dict[int, list[CaseResult]] = {}
        self.ended: dict[int, list[CaseResult]] = {}
        self.next = 0
        self.lock = threading.Lock()

    def add(self, index: int, plan: _Plan, results: list[CaseResult]) -> None:
        with self.lock:
            self.graded.setdefault(index, []).extend(results)
            self.shares[index] -= 1
            if not self.shares[index]:
                position = {case.number: k for k, case in enumerate(plan.component.cases)}
                ordered = sorted(self.graded.pop(index), key=lambda r: position[r.case.number])
                used = next((r for r in ordered if r.forbidden), None)
                if used:  # what `merged` needs to judge this component across runs as _judged does within one
                    self.run.forbidden[plan.component.id] = used.case.number
                self.ended[index] = self.judge(plan, ordered)
            while self.next in self.ended:
                for result in self.ended.pop(self.next):
                    self.run.results.append(result)
                    self.on_result(result)
                self.next += 1


@dataclass(frozen=True)
class _Plan:
    """A component to grade: its cases, and either the worker slot to grade them in or why none is needed."""

    component: Component
    cases: list[Case]
    tier: Tier
    slot: Slot | None = None
    early: Outcome | None = None  # every case's outcome, when nothing of the student's can run
    named: list = field(default_factory=list)  # forbidden names in the component's files, run or not


class _Scans:
    """What scan_submission found in each file of a submission (with what it imports), each scanned once per grade:
    every component's plan scans every file, and the lanes plan at once."""

    def __init__(self, folder: Path):
        self.folder, self.found, self.lock = folder, {}, threading.Lock()

    def __call__(self, file: str) -> list[str]:
        with self.lock:
            if file not in self.found:
                self.found[file] = scan_submission(self.folder, file)
            return self.found[file]


def _plan(component: Component, cases: list[Case], submission: Submission, rubric: Rubric, tier: Tier,
          template: Template | None, scans: _Scans) -> _Plan:
    if component.file not in submission.files:
        message = submission.problems.get(component.file, f"Not submitted: {component.file} was not found in the submission.")
        return _Plan(component, cases, tier, early=Outcome("not_submitted", message))
    tampering = scans(component.file)
    if tampering:
        message = f"{component.file} (with the files it imports) was refused before any of it ran: " + "; ".join(tampering) + "."
        return _Plan(component, cases, tier, early=Outcome("refused", message))
    broken = syntax_error(submission.dir / component.file)
    if broken:
        return _Plan(component, cases, tier, early=StudentRaised("SyntaxError", str(broken), []).outcome())
    named = forbidden_names(submission.dir, component.file, component.forbidden)
    # Every file of the submission is scanned; the worker can import only those that passed (with what they import).
    passed = [f for f in python_files(submission.dir) if f == component.file or not scans(f)]
    slot = Slot(importable(submission.dir, passed), component.forbidden, _limits(cases, rubric), tier,
                _modules(cases), template)
    return _Plan(component, cases, tier, slot, named=named)


def reference_worker(rubric: Rubric, tier: Tier, timed: list[Case] | None = None) -> Slot:
    """The reference's worker for these timing cases (default: every timing case of the rubric), not yet started."""
    if timed is None:
        timed = [k for c in rubric.components for k in c.cases if k.check in TIMING]
    return reference_slot(rubric.solutions_dir, tier, _limits(timed, rubric))


def _limits(cases: list[Case], rubric: Rubric) -> Limits:
    """A worker's limits for these cases: their time limits and a minute in CPU seconds, the rubric's memory."""
    return Limits(cpu_seconds=int(sum(c.timeout for c in cases)) + 60, memory_bytes=rubric.memory_mb << 20)


def kept_template(rubric: Rubric, tier: Tier) -> Template | None:
    """A template for every case of `rubric`, for a caller to keep across grades of the course's own code (`grade`'s
    `template`); None where workers are not forked (no walls) or it cannot start."""
    return _template(tier, template_modules(_modules([k for c in rubric.components for k in c.cases]))) if tier.walled else None


def warm_template(todo: list[tuple[Component, list[Case]]], submission: Submission, tier: Tier) -> Template | None:
    """The template for grading these cases of each component of `submission` (started: it imports while the grader
    plans), for `grade` or a caller that keeps it across grades of one student's files (check --watch); None where
    no worker forks from it: no walls, or every component forbids what it would import."""
    modules = template_modules(_modules([k for _, cases in todo for k in cases]))
    forks = tier.walled and any(c.file in submission.files and forkable(c.forbidden.modules, modules) for c, cases in todo if cases)
    return _template(tier, modules) if forks else None


def _template(tier: Tier, modules: tuple[str, ...]) -> Template | None:
    """The submission's template, or None when its process cannot be started: workers then start from nothing, and
    one that cannot start either is the grader's failure of the case that needed it (process.WorkerWontStart)."""
    try:
        return start_template(tier, modules)
    except OSError:
        return None


def _imported(template: Template, floor: Floor) -> None:
    """The template's imports, a start like any worker's: never while a timing case runs, in a batch any job's."""
    with floor.shared(), contextlib.suppress(TemplateGone):
        template.ready()


def _start_quietly(slot: Slot) -> None:
    """Start a worker ahead of its cases; one that fails to start is started again by its first case, which says why."""
    with contextlib.suppress(Ended):
        slot.start()


def _shares(cases: list[Case]) -> list[list[Case]]:
    """A component's cases in groups, each graded in a worker of its own: the cases that need imports of their own
    (cases.IMPORTS) by those imports, the cases of checks that run long (cases.APART) together, and the first group
    the rest, so that a lane grades the long cases while the other grades the rest of the component. A component
    without cases is one empty share. Within a share the visible cases run first, so that nothing a student's module
    keeps from a hidden case's inputs can show in what a visible case shows (the results still come in the rubric's
    order: _InOrder)."""
    groups: dict[tuple, list[Case]] = {_REST: []}
    for case in sorted(cases, key=lambda case: not case.visible):
        groups.setdefault(_apart(case), []).append(case)
    return [part for key, part in groups.items() if part or key == _REST]


_REST = ((), False)  # the key of a component's first share: no imports of its own, nothing long


def _apart(case: Case) -> tuple[tuple[str, ...], bool]:
    """What sets a case's share apart from its component's first: its own imports, and whether it runs long."""
    return IMPORTS.get(case.check, ()), case.check in APART


def _imports(cases: list[Case]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for c in cases for m in IMPORTS.get(c.check, ())))


def _modules(cases: list[Case]) -> tuple[str, ...]:
    """What the workers of these cases import before student code: the libraries the cases use, and their own imports."""
    return tuple(dict.fromkeys(m for c in cases for m in USES[c.component])) + _imports(cases)


def _grade_share(plan: _Plan, expected, secret: str, rubric: Rubric, held: dict, floor: Floor, speed: Speed,
                 cancelled: threading.Event) -> list[CaseResult]:
    if plan.early:
        return [CaseResult(case, plan.early) for case in plan.cases]
    results, hung = [], _Hung()
    try:
        for case in plan.cases:
            if cancelled.is_set():
                break
            if hung.spent():
                results.append(CaseResult(case, hung.outcome()))
                continue
            with floor.alone(plan.slot) if case.check in TIMING else floor.shared(plan.slot):
                results.append(hung.after(run_case(case, plan.slot, expected, secret, speed, rubric.path.parent,
                                                   hung.limit(case.timeout))))
    finally:
        with floor.shared(plan.slot):  # busy: another process's timing case does not pause it while it stops
            plan.slot.stop()
            if plan.tier.walled:  # what the student left running dies before the lane's next share starts
                reaper.sweep(plan.tier.student_id)
    held.update(plan.slot.held)
    return results


def _judged(plan: _Plan, results: list[CaseResult], caveat: str | None, explainer: Explainer | None = None) -> list[CaseResult]:
    """A component's results, all its shares' together, judged as one: one use of a forbidden built-in fails the whole
    component, also the cases that ran before it and those a restarted worker (which starts with a clean record)
    would otherwise pass. A forbidden name that no case reached costs nothing; course staff review it (report.py
    tells the student). `caveat`: which file was graded, and work of the student's that was not, said under every case. A wrong
    answer no hint named may be named by the mutant of the reference that gives it (`explainer`: mutants/match.py)."""
    used = next((r.outcome for r in results if r.forbidden), None)
    if used:
        results = [replace(r, outcome=replace(used, extra=r.extra)) for r in results]
    elif not plan.early:
        if explainer:
            results = [replace(r, evidence=None) for r in explainer.explain(plan.component, results)]
        review = {"review": {"file": plan.component.file, "forbidden_names": plan.named}} if plan.named else {}
        results = [r.with_outcome(extra={**r.extra, **review}) for r in _causes_first(results)]
    return [r.with_outcome(message=f"{r.output} {caveat}".lstrip()) if caveat else r for r in results]


def merged(rubric: Rubric, runs: list[GradeRun]) -> GradeRun:
    """Runs that each graded a part of one submission's cases (grade's `timing`) as the run grading them all would be:
    results in the rubric's order, and a forbidden built-in reached in one part fails every case of its component in
    the others too, the first use in case order standing for all (_judged). Each part still had its own hung budget
    (_Hung), and no check builds on a timing check (tests/test_runner.py), so no other judgement crosses parts."""
    order = {(k.component, k.number): i for i, k in enumerate(k for c in rubric.components for k in c.cases)}

    def key(r: CaseResult) -> int:
        return order[r.case.component, r.case.number]

    first: dict[str, CaseResult] = {}  # component -> its result that first reached a forbidden built-in
    for run in runs:
        for r in run.results:
            if run.forbidden.get(r.case.component) == r.case.number:
                earlier = first.get(r.case.component)
                first[r.case.component] = r if earlier is None or key(r) < key(earlier) else earlier
    results = []
    for r in sorted((r for run in runs for r in run.results), key=key):
        used = first.get(r.case.component)
        if used:  # as judged in its own part: the first use's outcome (its caveat included), the case's own extra
            # the review note is for code no case reached; the failing parts a case used are not why it failed here
            extra = {k: v for k, v in r.extra.items() if k not in ("review", "uses_failed")}
            r = replace(r, outcome=replace(used.outcome, extra=extra))
        results.append(r)
    held = {k: v for run in runs for k, v in run.isolation.get("held", {}).items()}
    return GradeRun(results=results, hidden_not_run=runs[0].hidden_not_run, seconds=sum(run.seconds for run in runs),
                    isolation={**runs[0].isolation, "held": held}, rubric=runs[0].rubric,
                    forbidden={c: r.case.number for c, r in first.items()})


class _Hung:
    """After a case of a component times out, its later cases share HUNG_BUDGET seconds, then fail at once: code
    that hangs in one function costs a minute or so, not every case's full time limit."""

    def __init__(self):
        self.first: Case | None = None
        self.left = HUNG_BUDGET
        self.cut = False  # the case running now has what is left of the budget, less than its own limit

    def limit(self, timeout: float) -> float:
        self.cut = self.first is not None and self.left < timeout
        return min(timeout, self.left) if self.cut else timeout

    def after(self, result: CaseResult) -> CaseResult:
        if self.first is not None:
            self.left -= result.seconds
            if result.outcome.kind == "timeout" and self.cut:  # its limit, the budget's rest, is a number no one set
                return result.with_outcome(message=f"Timed out: case {self.first.number} of this component timed out before, so "
                                                   f"its later cases share {HUNG_BUDGET:g} s, and they ran out during this one.")
            if result.outcome.kind == "timeout":
                return result.with_outcome(message=f"{result.output} Case {self.first.number} of this component timed out "
                                                   f"before, so its later cases share {HUNG_BUDGET:g} s.")
        elif result.outcome.kind == "timeout":
            self.first = result.case
        return result

    def spent(self) -> bool:
        return self.first is not None and self.left <= 0

    def outcome(self) -> Outcome:
        return Outcome("timeout", f"Not run: case {self.first.number} of this component timed out (an infinite loop, or far "
                                  f"too slow), and the {HUNG_BUDGET:g} s its later cases share are spent.")


HUNG_BUDGET = 30.0  # seconds: correct code never times out, so only code that hangs or crawls meets it


# What a case built on failing parts may have suffered from them: a wrong answer, or an error, a crash or a hang that
# the parts' own mistake can cause (a padding case lost, then a shape error in training); not a missing body.
CONSEQUENCES = {"wrong": "the difference here", "raised": "this error", "crashed": "this crash", "timeout": "this time-out",
                "bad_reply": "the unusable reply"}


def _causes_first(results: list[CaseResult]) -> list[CaseResult]:
    """A failed case built on parts that fail their own cases (a TransformerBlock on its FeedForward) names those
    first: the difference, or the error, may be theirs alone. Their numbers are kept too (extra `uses_failed`), for
    the summary that lists them first (report.summary_lines)."""
    first_failure = {}
    for r in results:
        if not r.passed:
            first_failure.setdefault(r.case.check, r.case)
    noted = []
    for r in results:
        causes = [first_failure[c] for c in BUILDS_ON.get(r.case.check, ()) if c in first_failure]
        effect = CONSEQUENCES.get(r.outcome.kind)
        note = " ".join(f"This case uses your {SUBJECTS[c.check]}, which fails case {c.number}." for c in causes)
        noted.append(r.with_outcome(message=f"{note} Fix that first: {effect} may come from it alone. {r.output}",
                                    extra={**r.extra, "uses_failed": [c.number for c in causes]})
                     if causes and effect else r)
    return noted


SET_BACK = ("Your code changed global settings, which the grader set back after each call (they neither help nor hurt, "
            "in any case or timing): ")


def run_case(case: Case, student: Slot, expected, secret: str, speed: Speed, root: Path, timeout: float | None = None) -> CaseResult:
    """`root`: the rubric's folder, where a staff test's file is (unittests.py)."""
    started = time.monotonic()
    counted = case.check not in TIMING or speed.graded
    if not counted and speed.policy.without_gpu == "skip":
        unseen = f" {speed.unseen}" if speed.unseen else ""
        return CaseResult(case, Outcome("skipped", f"Skipped: no GPU here, and timing cases are skipped without one.{unseen}",
                                        extra=speed.record()), counted=False)
    outcome = _outcome(student.start)  # under a start-up deadline of its own, not the case's time limit
    tape = Tape(student) if explainable(case) else None  # what a mutant of the reference may explain (mutants/match.py)
    proxy = Proxy(tape or student, Deadline.after(case.timeout if timeout is None else timeout), Boundary())
    trial = Trial(case, proxy, expected, secret, speed)
    if outcome.passed:
        check = functools.partial(unittests.run, root, case) if case.unittest else functools.partial(CHECKS[case.check], **case.params)
        outcome = _outcome(lambda: check(trial))
    if not counted and outcome.passed:
        outcome = replace(outcome, message=outcome.message + " Reported only: without a GPU, timing earns no points here.")
    if proxy.set_back:
        outcome = replace(outcome, message=f"{outcome.message} {SET_BACK}{', '.join(proxy.set_back)}.")
    shown = printable(proxy.printed.text, keep="\n\t") if case.visible else ""  # hidden inputs must not show through prints
    evidence = left_to_explain(tape, trial, outcome) if tape else None
    return CaseResult(case, outcome, time.monotonic() - started, counted, shown, proxy.printed.more if case.visible else 0, evidence)


def _outcome(check: Callable[[], Verdict | Outcome | None]) -> Outcome:
    """Call a check: it returns (a timing verdict, a staff test's passed Outcome, or nothing), an Ended says how it
    ended, and anything else is the grader's own bug, which must not stop the run and must never pass."""
    try:
        verdict = check()
    except Ended as exc:
        return exc.outcome()
    except Exception:
        traceback.print_exc()
        return Outcome(GRADER_FAILED, INTERNAL_ERROR)
    return Outcome("passed", verdict.message, verdict.fraction, verdict.extra) if verdict else PASSED
