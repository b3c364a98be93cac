"""The runner's lanes: two components graded at once give what one lane gives, in the rubric's order, a component's
shares are reported and judged as one, and a timing case runs alone (Floor)."""
import contextlib
import threading
import time

import pytest
from conftest import SOLUTIONS, grade_folder, solutions_with

from autograder.outcome import GraderFailed, Outcome
from autograder import runner
from autograder.cases import BUILDS_ON, TIMING
from autograder.runner import CaseResult, Floor, GradeRun, _InOrder, _judged, _Plan, _shares, merged
from autograder.sandbox.host.process import BadReply, Deadline, Forbidden, Limits, StudentRaised
from autograder.sandbox.host.proxy import Proxy, Remote, Slot
from autograder.sandbox.worker.wire import Expr
from autograder.sandbox.host.tiers import Tier


class FakeSlot:
    """Stands in for a worker slot: records when it is paused, and counts the pauses it is under."""

    def __init__(self, log: list, name: str):
        self.log, self.name, self.stops = log, name, 0

    @contextlib.contextmanager
    def paused(self):
        self.log.append(f"pause {self.name}")
        self.stops += 1
        yield
        self.stops -= 1
        self.log.append(f"resume {self.name}")


def test_a_components_cases_that_need_imports_of_their_own_or_run_long_are_a_share_apart_each_visible_first(rubric):
    """Each share runs its visible cases before its hidden ones (in the rubric's order within each), so that no hidden
    input can reach what a visible case shows (test_security_data.py grades it with two secrets). ngram's sampling
    cases (thousands of draws) run beside the rest of ngram, on the other lane."""
    def visible_first(cases):
        return [c for c in cases if c.visible] + [c for c in cases if not c.visible]

    transformer = rubric.component("transformer").cases
    rest, training = _shares(transformer)
    assert [c.check for c in training] == ["transformer.training"] * 2
    assert rest == visible_first([c for c in transformer if c.check != "transformer.training"]) != [c for c in transformer if c in rest]
    ngram = rubric.component("ngram").cases
    assert _shares(ngram) == [visible_first([c for c in ngram if c.check != "ngram.sampling"]),
                              visible_first([c for c in ngram if c.check == "ngram.sampling"])]
    assert _shares(rubric.component("rnn").cases) == [visible_first(rubric.component("rnn").cases)]
    assert _shares([]) == [[]]


def test_shares_reach_the_run_together_in_case_order_and_are_judged_as_one(rubric):
    """A forbidden built-in used in one share fails the component's cases in the other too."""
    ngram, transformer = rubric.component("ngram"), rubric.component("transformer")
    rest, training = _shares(transformer.cases)
    plan = _Plan(transformer, [], Tier("same-user"))
    run, reported = GradeRun(), []
    report = _InOrder(run, reported.append, [1, 2], lambda plan, results: _judged(plan, results, None))
    passed = Outcome("passed", "")
    report.add(1, plan, [CaseResult(c, Outcome("forbidden", "Uses torch.nn.LayerNorm")) for c in training])
    assert reported == []  # the transformer waits for its other share, and for ngram before it
    report.add(1, plan, [CaseResult(c, passed) for c in rest])
    assert reported == []
    report.add(0, _Plan(ngram, [], Tier("same-user")), [CaseResult(c, passed) for c in ngram.cases])
    assert [r.case for r in reported] == ngram.cases + transformer.cases
    assert {r.outcome.kind for r in reported[len(ngram.cases):]} == {"forbidden"}
    assert all(r.passed for r in reported[:len(ngram.cases)])


def _judged_run(rubric, results: list[CaseResult], named: list, caveat: str | None) -> GradeRun:
    """What grade() makes of raw results, one share per component, judged as in a run."""
    components = list(dict.fromkeys(r.case.component for r in results))
    run = GradeRun()
    report = _InOrder(run, lambda r: None, [1] * len(components), lambda plan, rs: _judged(plan, rs, caveat))
    for i, cid in enumerate(components):
        report.add(i, _Plan(rubric.component(cid), [], Tier("same-user"), named=named), [r for r in results if r.case.component == cid])
    return run


@pytest.mark.parametrize("forbidden_at", [(), ("timing",), ("correctness",), ("correctness", "timing")])
def test_parts_graded_apart_merge_into_what_grading_them_together_gives(rubric, forbidden_at):
    """A batch on a cluster grades a submission's timing cases apart from the others (batch/cluster.py): a forbidden
    built-in reached in either part fails the whole component, the first use in case order standing for all, with the
    caveat, and the review note only where nothing forbidden ran."""
    attention, ngram = rubric.component("attention"), rubric.component("ngram")
    speed = [k for k in attention.cases if k.check in TIMING]
    uses = {"correctness": attention.cases[1], "timing": speed[1]}  # neither the first case of its part
    raw = []
    for case in ngram.cases + attention.cases:
        part = "timing" if case.check in TIMING else "correctness"
        if any(case is uses[p] for p in forbidden_at):
            outcome = Outcome("forbidden", f"{case.number} calls scaled_dot_product_attention", extra={"at": case.number})
        elif case.number in (ngram.cases[2].number, attention.cases[0].number):
            outcome = Outcome("wrong", f"{case.number} is off", extra={"at": case.number})
        else:
            outcome = Outcome("passed", "", 0.5 if part == "timing" else 1.0, {"at": case.number})
        raw.append(CaseResult(case, outcome, seconds=1.0, printed=f"printed in {case.number}"))
    named, caveat = ["F.scaled_dot_product_attention (line 3)"], "Your notebook was not graded."
    whole = _judged_run(rubric, raw, named, caveat)
    parts = [_judged_run(rubric, [r for r in raw if (r.case.check in TIMING) == timing], named, caveat) for timing in (False, True)]
    parts[0].seconds, parts[1].seconds = 3.0, 4.0
    together = merged(rubric, parts)
    assert together.results == whole.results
    assert together.forbidden == whole.forbidden and together.seconds == 7.0
    kinds = {r.outcome.kind for r in together.results if r.case.component == "attention"}
    assert kinds == ({"forbidden"} if forbidden_at else {"passed", "wrong"})


def test_no_check_builds_on_a_timing_check_nor_a_timing_check_on_another():
    """What lets merged() join parts graded apart without judging causes across them (runner._causes_first)."""
    assert not any(check in TIMING or set(causes) & TIMING for check, causes in BUILDS_ON.items())


def test_a_timing_case_waits_for_the_other_lane_then_runs_alone_with_its_workers_stopped():
    floor, log = Floor(), []
    own, other = FakeSlot(log, "own"), FakeSlot(log, "other")
    floor.register(own)
    floor.register(other)
    sharing, release = threading.Event(), threading.Event()

    def correctness_case():
        with floor.shared():
            log.append("case starts")
            sharing.set()
            release.wait(5)
            log.append("case ends")

    def timing_case():
        with floor.alone(own):
            log.append("timing")

    def case_asked_for_meanwhile():
        with floor.shared():
            log.append("later case")

    first = threading.Thread(target=correctness_case)
    first.start()
    sharing.wait(5)
    timing = threading.Thread(target=timing_case)
    timing.start()
    _until(lambda: floor._waiting == 1)  # the timing case waits for the case under way
    later = threading.Thread(target=case_asked_for_meanwhile)
    later.start()
    time.sleep(0.1)
    assert log == ["case starts"]  # neither the timing case nor a case asked for after it has started
    release.set()
    for t in (first, timing, later):
        t.join(5)
    assert log == ["case starts", "case ends", "pause other", "timing", "resume other", "later case"]


def _until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


@pytest.mark.slow
def test_two_lanes_give_what_one_lane_gives_in_the_rubrics_order(quick_rubric, tmp_path):
    # A wrong softmax fails backprop cases; ngram and rnn pass: the lanes must not mix components' results.
    folder = solutions_with(tmp_path, "backprop.py", "z.max(axis=-1, keepdims=True)", "z.max()")
    components = ["ngram", "backprop", "rnn"]
    reported = []
    two = grade_folder(quick_rubric, folder, tmp_path / "two", component_ids=components, lanes=2, on_result=reported.append)
    one = grade_folder(quick_rubric, folder, tmp_path / "one", component_ids=components, lanes=1)
    assert [r.case.number for r in two.results] == [r.case.number for r in one.results]
    assert [r.case for r in reported] == [r.case for r in two.results]
    assert [(r.passed, r.score) for r in two.results] == [(r.passed, r.score) for r in one.results]
    assert any(not r.passed for r in two.results if r.case.component == "backprop")
    assert all(r.passed for r in two.results if r.case.component != "backprop")


@pytest.mark.slow
def test_map_calls_once_per_argument_list_in_one_request():
    slot = Slot(SOLUTIONS, Forbidden(), Limits(), Tier("same-user"))
    try:
        proxy = slot.proxy(Deadline.after(60))
        assert proxy.map(proxy.builtins.round, [([2.567, 2], {}), ([2.567], {"ndigits": 1})]) == [2.57, 2.6]
        with pytest.raises(StudentRaised, match="math domain error"):
            proxy.map(proxy.math.sqrt, [([4.0], {}), ([-1.0], {})])
        draws = proxy.map(proxy.random.random, [([], {})] * 500)  # one call object, sent once with its count
        assert len(draws) == len(set(draws)) == 500
    finally:
        slot.stop()


@pytest.mark.slow
def test_a_grade_scans_each_file_once_whatever_its_shares(quick_rubric, tmp_path, monkeypatch):
    """Every component's plan reads the scan of every file (a helper it may import), and ngram's two shares are
    planned at once: each file is scanned once all the same, and ngram's shares still both run."""
    scanned = []
    scan = runner.scan_submission
    monkeypatch.setattr(runner, "scan_submission", lambda folder, file: scanned.append(file) or scan(folder, file))
    run = grade_folder(quick_rubric, SOLUTIONS, tmp_path, component_ids=["ngram", "backprop"], visible_only=True)
    assert sorted(scanned) == sorted(set(scanned)) and {"ngram.py", "backprop.py"} <= set(scanned)
    assert all(r.passed for r in run.results) and "ngram.sampling" in {r.case.check for r in run.results}


class ShortReplies:
    """A worker that answers every request with two values, however many calls it was sent."""

    staff = False

    def exchange(self, header, blobs, deadline):
        return {"value": [1, 2], "violations": []}, []

    def stop(self):
        self.stopped = True


def test_a_map_answered_with_too_few_results_is_a_bad_reply_blamed_on_whose_worker_sent_it():
    worker = ShortReplies()
    proxy = Proxy(worker, Deadline.after(60))
    with pytest.raises(BadReply, match="3 results expected"):
        proxy.map(Remote(proxy, Expr("ngram", ("f",))), [([1], {})] * 3)
    assert worker.stopped
    worker.staff = True  # the reference's worker: the grader's failure, not the student's
    with pytest.raises(GraderFailed, match="3 results expected"):
        proxy.map(Remote(proxy, Expr("ngram", ("f",))), [([1], {})] * 3)


def test_graders_sharing_a_machine_lock_wait_for_each_others_timing_cases(tmp_path):
    # Two Floors on one lock file stand for two job processes of a batch: flock(2) locks belong to open files.
    lock, log = tmp_path / "timing.lock", []
    first, second = Floor(lock), Floor(lock)
    idle = FakeSlot(log, "idle worker of the first grader")
    first.register(idle)
    timing_started, release = threading.Event(), threading.Event()

    def timing_case():
        with second.alone(FakeSlot(log, "timed")):
            log.append("timing")
            timing_started.set()
            release.wait(5)
            log.append("timing ends")

    def correctness_case():
        with first.shared():
            log.append("case of the first grader")

    timing = threading.Thread(target=timing_case)
    timing.start()
    timing_started.wait(5)
    case = threading.Thread(target=correctness_case)
    case.start()
    _until(lambda: "pause idle worker of the first grader" in log)  # held back, it stops its idle workers
    assert "case of the first grader" not in log
    release.set()
    for t in (timing, case):
        t.join(5)
    assert log == ["timing", "pause idle worker of the first grader", "timing ends",
                   "resume idle worker of the first grader", "case of the first grader"]


def test_a_case_never_holds_the_machine_with_its_worker_stopped(tmp_path):
    """Two lanes of one grader and another grader's timing cases, over and over: a lane held back at the turnstile
    stops its grader's idle workers, and the other lane, let through while it still waits, must resume its own
    before its case runs, or the case would hold the room, stopped, while the timing case waits for the room."""
    lock, stopped_inside, log = tmp_path / "timing.lock", [], []
    grader, timer = Floor(lock), Floor(lock)
    slots = [FakeSlot(log, "lane 1"), FakeSlot(log, "lane 2")]
    for slot in slots:
        grader.register(slot)
    done = threading.Event()

    def lane(slot: FakeSlot) -> None:
        for _ in range(300):
            with grader.shared(slot):
                if slot.stops:
                    stopped_inside.append(slot)
                time.sleep(0.0005)

    def timing() -> None:
        while not done.is_set():
            with timer.alone(FakeSlot(log, "timed")):
                time.sleep(0.0005)

    lanes = [threading.Thread(target=lane, args=(slot,)) for slot in slots]
    timer_thread = threading.Thread(target=timing)
    for t in (*lanes, timer_thread):
        t.start()
    for t in lanes:
        t.join(60)
    done.set()
    timer_thread.join(5)
    assert not stopped_inside, f"{len(stopped_inside)} cases ran with their worker stopped"
    assert all(slot.stops == 0 for slot in slots)  # every pause ended
