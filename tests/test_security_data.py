"""Attacks through the data that crosses the trust boundary: one submission per threat class.

Each attack is solutions/ with code appended to one file (it runs when the worker imports the
file, and a `def` there replaces the solution's function for every caller), plus a helper module
where the route needs one. Every attack is written to win against a grader without the defence in
question: one that compared in the student's process, trusted what the student's process printed,
let expected values live beside student code, reused inputs, or had no guard.

Each test asserts which defence stopped the attack, by the words the grader reports for it (`stopped`):
the tamper scan's finding with its line, the guard's record of a forbidden call with its line, the
parent's own comparison, the wire's refusal of what is not plain data. An attack that the static
tamper scan refuses is graded twice: once as submitted, to show the scan names it before any worker
starts (REFUSED), and once with the scans switched off (`scans_off`), to show the runtime defence
behind the scan holds on its own; but for SHADOW, which only the scan stops. Where an attack is graded
with another component, that component keeps full marks, and grading ends in bounded time.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from attacks import tier
from conftest import SOLUTIONS, grade_folder, isolation, scores_by_component, solutions_with

from autograder.cases import CHECKS, TIMING
from autograder.expected import Live
from autograder.forbidden import WHY
from autograder.reference import Reference
from autograder.report import results_json
from autograder.runner import GradeRun, grade
from autograder.sandbox.host.process import Deadline, Limits, start_template
from autograder.sandbox.host.proxy import ForbiddenUsed, Slot
from autograder.submission import open_submission
from autograder.trial import Trial

BOUND_S = 60  # a whole grading of two components, attack included
PARTNER = {"backprop.py": "ngram", "ngram.py": "backprop", "attention.py": "backprop", "lstm.py": "backprop"}

# What the grader says when each defence stops an attack:
GUARD = "Uses what this component forbids: "  # the worker's guard recorded a forbidden call (runner.py)
COMPARED = re.compile(r"differs? from the reference")  # the parent's own comparison, of arrays, entries or numbers
NOT_DATA = "cannot be sent back as data"  # the wire sends only plain data: anything else stays in the worker behind a handle
RAISED = "Your code raised "  # the worker caught what the student's code raised and reported it as a failure
AUDIT = "Refused at run time: the worker's audit hook refused "  # sandbox/worker/audit.py refused what student code did
CRASHED = "Your code crashed the process running it: "  # the worker died; only that case fails
REFUSED_REPLY = "Your code sent back something the grader cannot accept: "  # the parent's checks on a reply's frame


def attack(tmp_path: Path, file: str, code: str, **helpers: str) -> Path:
    """solutions/ with `code` appended to `file`, and `helpers` as extra submission files (name -> source)."""
    tail = (SOLUTIONS / file).read_text()[-60:]
    folder = solutions_with(tmp_path, file, tail, tail + "\n\n" + code)
    for name, source in helpers.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def grade_attack(rubric, folder: Path, tmp_path: Path, file: str, component: str) -> GradeRun:
    """Grade `component` and the partner of `file`; the partner keeps full marks, all within BOUND_S."""
    partner = PARTNER[file]
    started = time.monotonic()
    run = grade_folder(rubric, folder, tmp_path, component_ids=[component, partner])
    assert time.monotonic() - started < BOUND_S
    got, most = scores_by_component(run)[partner]
    assert got == most > 0, [(r.case.name, r.output) for r in run.results if r.case.component == partner and not r.passed]
    return run


@pytest.fixture(scope="module")
def untimed_rubric(rubric):
    """The real rubric without its timing cases: where an attack fails the whole component, they only add time."""
    return dataclasses.replace(rubric, components=[dataclasses.replace(c, cases=[k for k in c.cases if k.check not in TIMING])
                                                   for c in rubric.components])


@pytest.fixture
def scans_off(monkeypatch):
    """The parent's static scans switched off for one test: the attack reaches the worker, so whatever stops it
    there is shown to be a runtime defence alone."""
    monkeypatch.setattr("autograder.runner.scan_submission", lambda *args, **kwargs: [])


def stopped(run: GradeRun, checks: set[str], *because: str | re.Pattern) -> None:
    """Every case of `checks` (each has some) failed, and each case's feedback says every one of `because`: the
    words of the defence that stopped the attack."""
    hit = [r for r in run.results if r.case.check in checks]
    assert {r.case.check for r in hit} == checks, f"no cases of {checks - {r.case.check for r in hit}}"
    wrong = [(r.case.name, r.output) for r in hit if r.passed or not all(_says(r.output, reason) for reason in because)]
    assert not wrong, f"expected every case to fail saying {because}; these did not: {wrong}"


def _says(output: str, reason: str | re.Pattern) -> bool:
    return bool(reason.search(output)) if isinstance(reason, re.Pattern) else reason in output


def checks_of(run: GradeRun, component: str) -> set[str]:
    return {r.case.check for r in run.results if r.case.component == component}


def line_of(folder: Path, file: str, text: str) -> int:
    """The line of `file` in the graded submission that holds `text` (it must hold it once)."""
    lines = [n for n, line in enumerate((folder / file).read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, f"{text!r} must be on exactly one line of {file}: {lines}"
    return lines[0]


# ---- 1. printing fake pass lines ------------------------------------------------------------------

FAKE_PASS = 'Passed.\n{"score": 100, "tests": [{"name": "softmax", "score": 4, "max_score": 4}]}\nAll tests passed\n'
UNIFORM = "    return np.full_like(z, 1.0 / z.shape[-1])  # wrong: every row uniform\n"
# Each prints pass lines (at import too) and returns a wrong softmax: a grader that read the
# student process's output or exit status would count it. The worker's output goes to /dev/null,
# and a case passes only on the parent's own comparison: (how, body, what the grader says instead).
PRINTING = [
    ("stdout", "    print(FAKE)\n" + UNIFORM, COMPARED),
    ("stderr", "    print(FAKE, file=sys.stderr)\n" + UNIFORM, COMPARED),
    ("raw descriptors", "    os.write(1, FAKE.encode())\n    os.write(2, FAKE.encode())\n" + UNIFORM, COMPARED),
    ("then exit status 0", "    print(FAKE)\n    sys.exit(0)\n", RAISED + "SystemExit: 0"),
    ("then the process exits 0", "    print(FAKE, flush=True)\n    os._exit(0)\n", CRASHED + "the worker process exited with status 0"),
    ("as an exception's message", "    raise RuntimeError(FAKE)\n", RAISED + "RuntimeError: Passed."),
]


@pytest.mark.parametrize("how, body, because", PRINTING, ids=[p[0] for p in PRINTING])
@pytest.mark.slow
def test_printed_pass_lines_count_for_nothing(rubric, tmp_path, capfd, how, body, because):
    """Threat: fake "Passed." lines, Gradescope JSON and "All tests passed" on stdout, stderr or the raw descriptors,
    or a clean exit. Defence: the parent's own comparison, or the worker's report that the student's code exited."""
    code = f"import os\nimport sys\n\nFAKE = {FAKE_PASS!r}\nprint(FAKE)\n\n\ndef softmax(z):\n{body}"
    run = grade_attack(rubric, attack(tmp_path, "backprop.py", code), tmp_path, "backprop.py", "backprop")
    stopped(run, {"backprop.softmax"}, because)
    printed = capfd.readouterr()
    assert "All tests passed" not in printed.out + printed.err  # nothing the worker prints reaches the grader's output


@pytest.mark.slow
def test_printed_pass_lines_are_shown_as_the_students_and_count_for_nothing(rubric, tmp_path):
    """Threat: now that visible cases show what student code prints, a wrong softmax prints a fake "Passed.", a fake
    grader heading and a terminal escape that erases the line. Defence: the parent's own comparison scores it; the
    printed text comes after the grader's message, under "Your code printed:", each line behind "| ", with control
    characters escaped, and never under a hidden case."""
    fake = "Passed.\nYour code printed:\n\x1b[2K\rTotal: 4 / 4\n"
    code = f"import sys\n\n\ndef softmax(z):\n    print({fake!r})\n    print('Passed.', file=sys.stderr)\n{UNIFORM}"
    run = grade_attack(rubric, attack(tmp_path, "backprop.py", code), tmp_path, "backprop.py", "backprop")
    stopped(run, {"backprop.softmax"}, COMPARED)
    softmax = [r for r in run.results if r.case.check == "backprop.softmax"]
    tests = {t["name"]: t for t in results_json(run)["tests"]}
    for r in softmax:
        test = tests[f"[backprop] {r.case.name}"]
        assert test["score"] == 0 and test["status"] == "failed"
        if not r.case.visible:
            assert r.printed == "" and test["output"] == r.output
            continue
        message, block = test["output"].split("\nYour code printed:\n", 1)
        assert message == r.output and COMPARED.search(message)
        assert block == "| Passed.\n| Your code printed:\n| \\x1b[2K\\rTotal: 4 / 4\n| \n| Passed."
    assert any(not r.case.visible for r in softmax) and any(r.case.visible for r in softmax)


# ---- 2. monkeypatching comparison helpers ---------------------------------------------------------

# Patched at import, with a wrong answer: a grader comparing in the student's process would call
# these (judge.py's own np.abs and np.isnan among them) and see a match.
NUMPY_PATCHES = """\
import math
import unittest

np.allclose = np.array_equal = np.array_equiv = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = np.testing.assert_array_equal = np.testing.assert_array_almost_equal = lambda *args, **kwargs: None
np.abs = np.absolute = lambda x, *args, **kwargs: np.zeros(np.shape(x))
np.isnan = np.isinf = lambda x, *args, **kwargs: np.zeros(np.shape(x), dtype=bool)
math.isclose = lambda *args, **kwargs: True
unittest.TestCase.assertEqual = unittest.TestCase.assertAlmostEqual = lambda *args, **kwargs: None


def softmax(z):
    return np.full_like(z, 1.0 / z.shape[-1])
"""
TORCH_PATCHES = """\
torch.allclose = torch.equal = torch.Tensor.allclose = torch.Tensor.equal = lambda *args, **kwargs: True
torch.isclose = lambda a, b, *args, **kwargs: torch.ones(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.bool)
torch.testing.assert_close = lambda *args, **kwargs: None


def causal_mask(T, device=None):
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)  # wrong: the future only
"""
# judge.py compares numbers with the built-in abs. The builtins are reached through sys.modules, with
# sys fetched as os's attribute by a literal name: the tamper scan refuses that `getattr` (see REFUSED).
BUILTIN_PATCHES = """\
import os

_builtins = getattr(os, "sys").modules["builtins"]
_builtins.abs = lambda x: 0.0
_builtins.round = lambda x, *args: 0.0


def cross_entropy(logits, targets):
    return 0.0
"""
# A visible case shows both numbers, a hidden one only that they differ.
NUMBER_COMPARED = re.compile(r": expected \S+, got 0\.|: the value differs from the reference")
PATCHING = [
    ("numpy, math, unittest", "backprop.py", "backprop", NUMPY_PATCHES, {"backprop.softmax"}, COMPARED),
    ("builtins abs and round", "backprop.py", "backprop", BUILTIN_PATCHES, {"backprop.cross_entropy"}, NUMBER_COMPARED),
    ("torch", "attention.py", "causal_mask", TORCH_PATCHES, {"causal_mask.values", "causal_mask.no_future_leak", "causal_mask.prefix"},
     COMPARED),
]


@pytest.mark.parametrize("library, file, component, code, checks, because", PATCHING, ids=[p[0] for p in PATCHING])
@pytest.mark.slow
def test_patched_comparison_helpers_fool_nothing(rubric, tmp_path, scans_off, library, file, component, code, checks, because):
    """Threat: the comparison helpers a naive grader calls, patched at import time to report a match.
    Defence: the parent compares, with its own modules. The static scans are off, so the patches all run."""
    run = grade_attack(rubric, attack(tmp_path, file, code), tmp_path, file, component)
    stopped(run, checks, because)


# ---- 3. returning objects that lie ----------------------------------------------------------------

# Each returns an object that a grader comparing it in the student's process (`got == want`,
# np.allclose, abs(got - want) < tol, len(got) == len(want)) would take for the right answer.
LYING_ARRAY = """\
class LyingArray(np.ndarray):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __array_function__(self, func, types, args, kwargs):
        return True  # np.allclose, np.array_equal, np.testing.assert_allclose...

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return np.zeros(self.shape)  # got - want


def softmax(z):
    return np.zeros_like(z).view(LyingArray)
"""
LIAR = """\
class Liar:
    \"\"\"Equal to anything, at no distance from anything, of any length.\"\"\"

    def __init__(self, like=None):
        self.shape, self.dtype = getattr(like, "shape", ()), getattr(like, "dtype", float)

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __sub__(self, other):
        return 0.0

    def __rsub__(self, other):
        return 0.0

    def __abs__(self):
        return 0.0

    def __lt__(self, other):
        return True

    def __le__(self, other):
        return True

    def __float__(self):
        return 0.0

    def __len__(self):
        return len(self.shape) and self.shape[0]

    def __array__(self, dtype=None, copy=None):
        return np.zeros(self.shape)


def softmax(z):
    return Liar(z)


def cross_entropy(logits, targets):
    return Liar()
"""
LYING_FLOAT = """\
class LyingFloat(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __sub__(self, other):
        return 0.0

    def __rsub__(self, other):
        return 0.0


def cross_entropy(logits, targets):
    return LyingFloat(0.0)
"""
LYING_LIST = """\
class LyingList(list):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __len__(self):
        return 4


def pad_sentence(tokens, n):
    return LyingList()
"""
LYING_DICT = """\
class LyingDict(dict):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __len__(self):
        return 1000

    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return 1


def count_ngrams(sentences, n):
    return LyingDict()
"""
LYING_TENSOR = """\
class LyingTensor(torch.Tensor):
    def __eq__(self, other):
        return torch.ones(torch.broadcast_shapes(self.shape, other.shape), dtype=torch.bool)

    def __ne__(self, other):
        return torch.zeros(torch.broadcast_shapes(self.shape, other.shape), dtype=torch.bool)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose, torch.Tensor.equal, torch.Tensor.allclose):
            return True
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def causal_mask(T, device=None):
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1).as_subclass(LyingTensor)  # wrong: the future only
"""
# NaN: every comparison with NaN is False, so `(abs(got - want) > tol).any()` finds no error.
NAN_TENSOR = """\
def scaled_dot_product_attention(Q, K, V, mask=None):
    return (Q @ K.transpose(-2, -1)) @ V * float("nan")
"""
# The right values in the other float dtype: within tolerance for a grader that ignores dtypes.
OTHER_DTYPE = """\
_right = scaled_dot_product_attention


def scaled_dot_product_attention(Q, K, V, mask=None):
    return _right(Q, K, V, mask).to(torch.float32 if Q.dtype == torch.float64 else torch.float64)
"""
ATTENTION = {"attention.scaled", "attention.self_attention", "attention.cross_attention"}
# (liar, file, component, code, checks, what the grader says). A subclass of a plain type stays in the worker:
# the parent gets a handle, never the object. A dict subclass is rebuilt from its items as a plain dict.
LYING = [
    ("an ndarray subclass", "backprop.py", "backprop", LYING_ARRAY, {"backprop.softmax"}, f"expected a numpy array, got an object that {NOT_DATA}"),
    ("an object with lying __eq__, __sub__, __float__, __len__", "backprop.py", "backprop", LIAR,
     {"backprop.softmax", "backprop.cross_entropy"}, NOT_DATA),
    ("a float subclass", "backprop.py", "backprop", LYING_FLOAT, {"backprop.cross_entropy"},
     f"expected a real number, got an object that {NOT_DATA}"),
    ("a list subclass", "ngram.py", "ngram", LYING_LIST, {"ngram.padding"}, "expected a list of words, got an object that cannot be sent back as data: a LyingList (a subclass of list)"),
    ("a dict subclass", "ngram.py", "ngram", LYING_DICT, {"ngram.counts"}, "keys missing"),
    ("a Tensor subclass", "attention.py", "causal_mask", LYING_TENSOR, {"causal_mask.values"},
     f"expected a torch tensor, got an object that {NOT_DATA}"),
    ("NaN where a value is expected", "attention.py", "attention", NAN_TENSOR, ATTENTION, "entries are NaN or Inf where the reference has"),
    ("the other float dtype", "attention.py", "attention", OTHER_DTYPE, {"attention.scaled"}, "expected dtype float"),
]


@pytest.mark.parametrize("liar, file, component, code, checks, because", LYING, ids=[p[0] for p in LYING])
@pytest.mark.slow
def test_objects_that_lie_score_nothing(rubric, tmp_path, liar, file, component, code, checks, because):
    """Threat: a returned object whose comparisons, conversions or length lie, or a value of the wrong kind.
    Defence: the wire's exact types (sandbox/worker/wire.py), then the parent's own checks of type, dtype and NaN pattern."""
    run = grade_attack(rubric, attack(tmp_path, file, code), tmp_path, file, component)
    stopped(run, checks, because)


# ---- 4. walking the heap or the stack for expected values -------------------------------------------

# Each returns what it finds of the expected gradient of cross_entropy_backward (an array shaped like
# the logits whose rows sum to 0): on the heap, among the locals of the frames up the stack, or among
# their reprs, captured by traceback. Finding none, it says so, naming how much it searched.
IS_ANSWER = """\
def is_answer(obj, logits):
    \"\"\"The gradient of a mean cross-entropy: an array shaped like the logits whose rows sum to 0.\"\"\"
    return (type(obj) is np.ndarray and obj is not logits and obj.shape == logits.shape and obj.dtype == logits.dtype
            and np.allclose(obj.sum(axis=1), 0))


"""
SEARCH_HEAP = IS_ANSWER + """\
def cross_entropy_backward(logits, targets):
    seen = 0
    for holder in heap.get_objects():
        for obj in heap.get_referents(holder):
            seen += 1
            if is_answer(obj, logits):
                return obj.copy()
    raise LookupError(f"no expected gradient among the {seen} objects on the heap")
"""
SEARCHES = {
    "gc": "import gc as heap\n\n\n" + SEARCH_HEAP,
    "gc through pydoc.locate": "import pydoc\n\nheap = pydoc.locate('gc')\n\n\n" + SEARCH_HEAP,
    "frames": "import sys\n\n\n" + IS_ANSWER + """\
def cross_entropy_backward(logits, targets):
    frames, frame = 0, sys._getframe(1)
    while frame is not None:
        frames += 1
        for value in frame.f_locals.values():
            if is_answer(value, logits):
                return value.copy()
        frame = frame.f_back
    raise LookupError(f"no expected gradient among the locals of the {frames} frames up the stack")
""",
    "frames through traceback": """\
import re
import traceback

np.set_printoptions(precision=17, threshold=1 << 20)  # reprs exact enough to rebuild an array


""" + IS_ANSWER + """\
def cross_entropy_backward(logits, targets):
    frames = traceback.StackSummary.extract(traceback.walk_stack(None), capture_locals=True)
    for text in (text for frame in frames for text in (frame.locals or {}).values() if text.startswith("array(")):
        numbers = re.findall(r"[-+]?[0-9.]+(?:e[-+]?[0-9]+)?", text.split("dtype")[0])
        if len(numbers) == logits.size and is_answer(found := np.array(numbers, dtype=logits.dtype).reshape(logits.shape), logits):
            return found
    raise LookupError(f"no expected gradient among the locals of the {len(frames)} frames up the stack")
""",
}


# What each search meets in the worker with the static scans off: the audit hook refuses the heap and the frames to
# student code (sandbox/worker/audit.py); traceback's walk up the stack, which the hook leaves to the library (the scan
# refuses it), runs and finds nothing.
SEARCHED = {
    "gc": AUDIT + "importing gc (backprop.py, line ",
    "gc through pydoc.locate": AUDIT + "importing pydoc (backprop.py, line ",
    "frames": AUDIT + "sys._getframe (backprop.py, line ",
    "frames through traceback": RAISED + "LookupError: no expected gradient among the ",
}


@pytest.mark.parametrize("route", list(SEARCHES))
@pytest.mark.slow
def test_expected_values_are_not_in_the_worker(rubric, tmp_path, scans_off, route):
    """Threat: gc.get_objects() or a walk up the stack for the expected answer. Defences: the worker's audit hook, which
    refuses the heap and the frames to student code, and the trust boundary itself: expected values never enter the
    worker. The static scans are off (they refuse every route here: see REFUSED), so each search that the hook lets
    run (through traceback) runs, and says it found nothing."""
    run = grade_attack(rubric, attack(tmp_path, "backprop.py", SEARCHES[route]), tmp_path, "backprop.py", "backprop")
    stopped(run, {"backprop.cross_entropy_backward"}, SEARCHED[route])


@pytest.mark.parametrize("route", list(SEARCHES))
def test_each_search_finds_expected_values_where_they_are(rubric, route):
    """The control for the test above: in the grader's own process, where the check holds its expected gradient
    while it calls the student, each search finds it and the case passes. Finding nothing in the worker is
    therefore the worker's doing, not the search's."""
    case = next(c for c in rubric.component("backprop").cases if c.check == "backprop.cross_entropy_backward" and c.visible)
    found: dict = {"np": np}
    with np.printoptions():  # the traceback route changes numpy's print options
        exec(SEARCHES[route], found)
        student = SimpleNamespace(backprop=SimpleNamespace(cross_entropy_backward=found["cross_entropy_backward"]))
        CHECKS[case.check](Trial(case, student, Live(Reference(SOLUTIONS)), secret="tests"), **case.params)  # CaseFailed otherwise


# ---- 5. mutating inputs, replaying outputs, predicting seeds ---------------------------------------

# A wrong answer, and the input rewritten to match it: a grader that computed the reference after
# the call, from the same object, would expect exactly that answer. The parent computes from its own
# pristine copy, and compares what it placed in the worker, fetched back, with that copy.
MUTATING = [
    ("a numpy input", "backprop.py", "backprop", """\
def softmax(z):
    z[...] = 0.0  # softmax(0) is uniform
    return np.full_like(z, 1.0 / z.shape[-1])
""", {"backprop.softmax": COMPARED, "backprop.inputs_unchanged": "softmax modified its argument `z` in place"}),
    ("a tensor input", "attention.py", "attention", """\
def scaled_dot_product_attention(Q, K, V, mask=None):
    with torch.no_grad():
        V.zero_()  # attention over zero values is zero
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, requires_grad=True)
""", {"attention.scaled": "the argument V afterwards (inputs must not be modified in place)"}),
]


@pytest.mark.parametrize("what, file, component, code, because", MUTATING, ids=[m[0] for m in MUTATING])
@pytest.mark.slow
def test_inputs_mutated_in_place_gain_nothing(rubric, tmp_path, what, file, component, code, because):
    """Threat: the student's function rewrites its inputs in place so that a reference computed afterwards agrees.
    Defence: the parent's pristine copies (the reference is computed from them, the inputs are compared with them)."""
    run = grade_attack(rubric, attack(tmp_path, file, code), tmp_path, file, component)
    for check, reason in because.items():
        stopped(run, {check}, reason)


def predicted_softmax_answers(rubric) -> dict[str, tuple[str, list]]:
    """sha256 of softmax's input -> (dtype, the right answer), for every softmax case with its inputs
    drawn as if it were visible: the guess that hidden inputs come from the public seed."""
    reference, answers = Reference(SOLUTIONS), {}

    def record(z):
        answer = reference.backprop.softmax(z.astype(np.float64)).astype(z.dtype)
        answers[hashlib.sha256(z.tobytes()).hexdigest()] = (str(z.dtype), answer.tolist())
        return answer

    student = SimpleNamespace(backprop=SimpleNamespace(softmax=record))
    for case in rubric.component("backprop").cases:
        if case.check == "backprop.softmax":
            CHECKS[case.check](Trial(dataclasses.replace(case, visibility="visible"), student, Live(reference), secret=""), **case.params)
    return answers


@pytest.mark.slow
def test_predicted_seeds_and_replayed_answers_fail_hidden_cases(rubric, tmp_path):
    """Threat: answers precomputed for inputs drawn from a guessed seed, replayed for any input of the same shape.
    Defence: fresh inputs, drawn for hidden cases from the secret."""
    # Against a grader whose hidden inputs came from a predictable seed, every case would pass; the
    # visible cases do (their inputs are public by design), which shows the prediction works.
    code = f"""\
import hashlib

ANSWERS = {predicted_softmax_answers(rubric)!r}


def softmax(z):
    key = hashlib.sha256(z.tobytes()).hexdigest()
    if key in ANSWERS:
        return np.array(ANSWERS[key][1], dtype=z.dtype)
    for dtype, answer in ANSWERS.values():  # replay an answer of the same shape and dtype
        if dtype == str(z.dtype) and np.shape(answer) == z.shape:
            return np.array(answer, dtype=z.dtype)
    return np.full_like(z, 1.0 / z.shape[-1])
"""
    run = grade_attack(rubric, attack(tmp_path, "backprop.py", code), tmp_path, "backprop.py", "backprop")
    softmax = [r for r in run.results if r.case.check == "backprop.softmax"]
    assert all(r.passed for r in softmax if r.case.visible)
    hidden = [r for r in softmax if not r.case.visible]
    assert hidden and all(not r.passed and COMPARED.search(r.output) for r in hidden), [(r.case.name, r.output) for r in hidden]



@pytest.mark.slow
def test_what_a_visible_case_shows_never_depends_on_the_secret(rubric, tmp_path):
    """Threat: a module global that keeps every input the component was given and shows it in a later visible case,
    printed or in an answer the feedback quotes (on 2885c7d, visible case 1.6 showed hidden case 1.5's sentences).
    Defence: a worker runs its visible cases before any hidden one (runner._shares), so grades with two secrets
    show the same in every visible case."""
    code = """\
import hashlib

SEEN = []
_count_ngrams = count_ngrams


def count_ngrams(sentences, n):
    SEEN.extend(" ".join(tokens) for tokens in sentences)
    print("seen so far:", len(SEEN), "sentences, digest", hashlib.sha256("\\n".join(SEEN).encode()).hexdigest()[:16])
    return _count_ngrams(sentences, n)
"""
    folder = attack(tmp_path, "ngram.py", code)
    ngram = rubric.component("ngram")  # its counting cases, hidden ones among them, and the visible ones around them
    counting = dataclasses.replace(rubric, components=[dataclasses.replace(ngram, cases=[
        k for k in ngram.cases if k.check in ("ngram.padding", "ngram.counts", "ngram.vocab", "ngram.probabilities")])])
    shown = []
    for secret in ("one secret", "another secret"):
        submission = open_submission(folder, tmp_path / secret)
        with isolation(rubric) as entered:
            run = grade(counting, submission, secret=secret, isolation=entered, component_ids=["ngram"])
        shown.append([(r.case.number, r.output, r.printed) for r in run.results if r.case.visible])
        assert any(not r.case.visible for r in run.results) and any("seen so far" in r.printed for r in run.results)
    assert shown[0] == shown[1]

# ---- 6. forbidden built-ins reached indirectly -----------------------------------------------------

LSTM_STEP = "def lstm_step(x_t, h_prev, c_prev, W_ih, W_hh, b):\n    return {}(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n"
LSTM_CALL = "(x_t, (h_prev, c_prev), W_ih, W_hh, b)"  # the line lstm_step makes its call on
SDPA = """\
def scaled_dot_product_attention(Q, K, V, mask=None):
    out = {}(Q, K, V, attn_mask=mask)
    return out if mask is None else out.masked_fill(~mask.any(-1, keepdim=True), 0.0)
"""
SDPA_CALL = "(Q, K, V, attn_mask=mask)"
TORCH_SOFTMAX = "def softmax(z):\n    return TORCH.softmax(TORCH.from_numpy(z), dim=-1).numpy()\n"
LSTM_CELL = "the operator aten::lstm_cell"
SDPA_FN = "call of torch.nn.functional.scaled_dot_product_attention"
GUARD_OFF = """\
import os

_sys = getattr(os, "sys")
_sys.meta_path[:] = [finder for finder in _sys.meta_path if type(finder).__name__ != "Guard"]
TORCH = _sys.modules["importlib"].import_module("to" + "rch")


""" + TORCH_SOFTMAX
# Each would compute a right answer with what the component forbids (torch in backprop, PyTorch's LSTM
# kernels in lstm, its attention in attention), hidden from a scan of the written names. The guard in
# the worker replaces each forbidden call wherever a loaded module holds it, and records who called a
# stand-in, with the line: (route, file, component, code, helpers, (what the guard records, file, text of the line)).
REACHING = [
    ("lstm: getattr with a built string", "lstm.py", "lstm",
     LSTM_STEP.format("getattr(getattr(torch, '_' + 'VF'), 'lstm' + '_cell')"), {}, (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: importlib with a built string", "lstm.py", "lstm",
     "import importlib\n\n\n" + LSTM_STEP.format("importlib.import_module('torch.' + '_VF').lstm_cell"), {}, (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: a helper module", "lstm.py", "lstm", "from helpers import cell\n\n\n" + LSTM_STEP.format("cell"),
     {"helpers": "import torch\n\ncell = torch._VF.lstm_cell\n"}, (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: torch.ops.aten", "lstm.py", "lstm", LSTM_STEP.format("torch.ops.aten.lstm_cell"), {}, (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: the C namespace by a literal name", "lstm.py", "lstm",
     LSTM_STEP.format("getattr(torch._C, '_VariableFunctions').lstm_cell"), {}, (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: the kernels' class namespace", "lstm.py", "lstm",
     LSTM_STEP.format("getattr(torch._C, '_VariableFunctionsClass').lstm_cell"), {}, (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: functools.partial at import", "lstm.py", "lstm",
     "import functools\n\nfused = functools.partial(torch.lstm_cell)\n\n\n" + LSTM_STEP.format("fused"), {}, (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: an alias bound at import", "lstm.py", "lstm", "from torch import lstm_cell as fused\n\n\n" + LSTM_STEP.format("fused"), {},
     (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: sys.modules", "lstm.py", "lstm", "import sys\n\n\n" + LSTM_STEP.format("sys.modules['torch'].lstm_cell"), {},
     (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: __import__ with a built string", "lstm.py", "lstm", LSTM_STEP.format("__import__('to' + 'rch').lstm_cell"), {},
     (LSTM_CELL, "lstm.py", LSTM_CALL)),
    ("lstm: a subclass", "lstm.py", "lstm", "from torch.nn.modules import rnn as recurrent\n\n\nclass Cell(recurrent.LSTMCell):\n    pass\n", {},
     ("call of torch.nn.LSTMCell", "lstm.py", "class Cell(")),
    ("attention: torch._C._nn", "attention.py", "attention", SDPA.format("torch._C._nn.scaled_dot_product_attention"), {},
     (SDPA_FN, "attention.py", SDPA_CALL)),
    ("attention: sys.modules", "attention.py", "attention",
     "import sys\n\n\n" + SDPA.format("sys.modules['torch.nn.functional'].scaled_dot_product_attention"), {}, (SDPA_FN, "attention.py", SDPA_CALL)),
    ("attention: functools.partial at import", "attention.py", "attention",
     "import functools\n\nimport torch.nn.functional as F\n\nfused = functools.partial(F.scaled_dot_product_attention)\n\n\n"
     + SDPA.format("fused"), {}, (SDPA_FN, "attention.py", SDPA_CALL)),
    ("attention: a subclass", "attention.py", "attention",
     "from torch.nn.modules import activation\n\n\nclass Attention(activation.MultiheadAttention):\n    pass\n", {},
     ("call of torch.nn.MultiheadAttention", "attention.py", "class Attention(")),
    ("attention: torch.ops.aten", "attention.py", "attention", SDPA.format("torch.ops.aten.scaled_dot_product_attention"), {},
     ("the operator aten::scaled_dot_product_attention", "attention.py", SDPA_CALL)),
    ("backprop: __import__ with a built string", "backprop.py", "backprop", "TORCH = __import__('to' + 'rch')\n\n\n" + TORCH_SOFTMAX, {},
     ("import of torch", "backprop.py", "TORCH = __import__(")),
    ("backprop: importlib with a built string", "backprop.py", "backprop",
     "import importlib\n\nTORCH = importlib.import_module('to' + 'rch')\n\n\n" + TORCH_SOFTMAX, {},
     ("import of torch", "backprop.py", "TORCH = importlib.import_module(")),
    ("backprop: a helper module", "backprop.py", "backprop", "from helpers import TORCH\n\n\n" + TORCH_SOFTMAX,
     {"helpers": "import torch as TORCH\n"}, ("import of torch", "helpers.py", "import torch as TORCH")),
    # The guard taken off sys.meta_path, then torch imported: the guard checks after every request that it is still first.
    ("backprop: the import guard removed", "backprop.py", "backprop", GUARD_OFF, {}, ("the grader's import guard was removed", None, None)),
]


# What each attacked component's worker is asked: a function of the file, on inputs of the API's shapes.
CALLED = {"lstm": ("lstm", "lstm_step", lambda: [torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4), torch.randn(16, 3),
                                                 torch.randn(16, 4), torch.randn(16)]),
          "attention": ("attention", "scaled_dot_product_attention", lambda: [torch.randn(2, 4, 3)] * 3),
          "backprop": ("backprop", "softmax", lambda: [np.random.default_rng(0).normal(size=(3, 5))])}


@pytest.fixture(scope="module")
def template():
    started = start_template(tier())
    yield started
    started.close()


@pytest.mark.parametrize("route, file, component, code, helpers, guard", REACHING, ids=[r[0] for r in REACHING])
@pytest.mark.slow
def test_forbidden_builtins_reached_indirectly_are_refused_in_the_worker(rubric, tmp_path, template, route, file, component, code,
                                                                       helpers, guard):
    """Threat: a forbidden module or call reached by a built name, a helper, a private namespace, an alias or a subclass.
    Defence: the guard in the worker, which records the call with its line (and, for a kernel, the dispatcher's
    refusal: tests/test_forbidden_operators.py). The attack is put to its worker directly, as no static scan runs
    there: the guard alone is shown to hold (the tamper scan also refuses some routes: REFUSED). That one use fails
    the whole component and the other components keep their marks: tests/test_forbidden.py grades it."""
    folder = attack(tmp_path, file, code, **helpers)
    slot = Slot(folder, rubric.component(component).forbidden, Limits(), tier(), template=template)
    module, function, inputs = CALLED[component]
    try:
        with pytest.raises(ForbiddenUsed) as refused:
            getattr(getattr(slot.proxy(Deadline.after(60)), module), function)(*inputs())
    finally:
        slot.stop()
    what, where, text = guard
    located = f" ({where}, line {line_of(folder, where, text)})" if where else ""
    assert str(refused.value).split("; ")[0] == f"{what}{located}", refused.value


# ---- 7. refused before any worker starts ------------------------------------------------------------

# Routes into the worker's interpreter (its heap, frames, builtins, import machinery, the guard's own closures)
# that the tamper scan refuses: route -> (text of the line it flags, what it says there). SHADOW reaches PyTorch's
# kernels through the closure of the guard's shadow namespace, past every stand-in: against it the guard is no
# wall, only the tamper scan is.
SEARCHES_FLAGGED = {
    "gc": ("import gc as heap", "import of gc"),
    "gc through pydoc.locate": ("import pydoc", "import of pydoc"),
    "frames": ("sys._getframe(1)", "use of sys._getframe"),
    "frames through traceback": ("traceback.walk_stack(None)", "use of .walk_stack"),
}
REACHING_FLAGGED = {
    "lstm: getattr with a built string": ("getattr(getattr(torch, '_' + 'VF')", "getattr with an attribute name that is not a string literal"),
    "lstm: importlib with a built string": ("import importlib", "import of importlib"),
    "lstm: sys.modules": ("sys.modules['torch']", "use of sys.modules"),
    "lstm: __import__ with a built string": ("__import__('to' + 'rch')", "use of __import__"),
    "attention: sys.modules": ("sys.modules['torch.nn.functional']", "use of sys.modules"),
    "backprop: __import__ with a built string": ("__import__('to' + 'rch')", "use of __import__"),
    "backprop: importlib with a built string": ("import importlib", "import of importlib"),
    "backprop: the import guard removed": ('getattr(os, "sys")', "getattr of 'sys'"),
}
SHADOW = """\
_shadow = torch._C._VariableFunctions
_kernels = next(cell.cell_contents for cell in type(_shadow).__getattr__.__closure__ if hasattr(cell.cell_contents, "lstm_cell"))


""" + LSTM_STEP.format("_kernels.lstm_cell")
REFUSED = [
    *[(f"expected values: {route}", "backprop.py", "backprop", SEARCHES[route], {}, *flagged) for route, flagged in SEARCHES_FLAGGED.items()],
    ("comparisons: builtins abs and round", "backprop.py", "backprop", BUILTIN_PATCHES, {}, 'getattr(os, "sys")', "getattr of 'sys'"),
    *[(f"forbidden built-ins: {route}", file, component, code, helpers, *REACHING_FLAGGED[route])
      for route, file, component, code, helpers, _ in REACHING if route in REACHING_FLAGGED],
    ("forbidden built-ins: lstm: the real kernels behind the guard's shadow namespace", "lstm.py", "lstm", SHADOW, {},
     "type(_shadow).__getattr__.__closure__", "use of .__closure__"),
]


@pytest.mark.parametrize("route, file, component, code, helpers, text, what", REFUSED, ids=[r[0] for r in REFUSED])
@pytest.mark.slow
def test_the_tamper_scan_refuses_reaching_into_the_worker(rubric, tmp_path, route, file, component, code, helpers, text, what):
    """Threat: reaching into the worker's interpreter, where the guard and its record live. Defence: the static tamper
    scan (forbidden.py), which names the line and fails the component before any worker starts."""
    folder = attack(tmp_path, file, code, **helpers)
    run = grade_folder(rubric, folder, tmp_path, component_ids=[component])
    stopped(run, checks_of(run, component), f"line {line_of(folder, file, text)}: {what} ({WHY})")
    assert run.isolation["held"] == {}  # no worker reported its walls: none started


# Routes that no static scan named when they were found, while writing this suite. Each won then: it kept every
# point of its component with what the component forbids, and the guard recorded nothing. The tamper scan now
# refuses each (sys under another name, attributes that read or import what a string names, pkgutil and mock).
SYS_ALIAS = """\
import threading

_sys = threading._sys  # sys under another name (also collections._sys, argparse._sys, tempfile._sys)
_guard = _sys.meta_path.pop(0)
_guard.tampered = lambda: None  # the worker's check that the guard is still first now says all is well
TORCH = _sys.modules["importlib"].import_module("to" + "rch")


""" + TORCH_SOFTMAX
FORMATTER = """\
from string import Formatter

# get_field reads attributes and items along a dotted path given as a string: a getattr of any name
_cells = Formatter().get_field("0._C._VariableFunctions.__class__.__getattr__.__closure__", (torch,), {})[0]
_kernels = next(cell.cell_contents for cell in _cells if hasattr(cell.cell_contents, "lstm_cell"))


""" + LSTM_STEP.format("_kernels.lstm_cell")
PKGUTIL = """\
from unittest import mock

# pkgutil as another module's attribute: resolve_name imports any module, and reads any attribute, named by a string
_inspect = mock.pkgutil.resolve_name("inspect")
_shadow = mock.pkgutil.resolve_name("torch._C:_VariableFunctions")
_kernels = _inspect.getclosurevars(_inspect.getattr_static(type(_shadow), "__getattr__")).nonlocals["current"]


""" + LSTM_STEP.format("_kernels.lstm_cell")
ONCE_MISSED = [
    ("the guard removed through threading._sys", "backprop.py", "backprop", SYS_ALIAS),
    ("PyTorch's LSTM kernel through string.Formatter.get_field", "lstm.py", "lstm", FORMATTER),
    ("PyTorch's LSTM kernel through unittest.mock.pkgutil", "lstm.py", "lstm", PKGUTIL),
]


@pytest.mark.parametrize("route, file, component, code", ONCE_MISSED, ids=[u[0] for u in ONCE_MISSED])
@pytest.mark.slow
def test_the_tamper_scan_refuses_routes_it_once_missed(untimed_rubric, tmp_path, route, file, component, code):
    """Threat: the guard taken off, or a forbidden kernel reached past it, by a route the tamper scan once missed
    (each kept full marks then). Defence: the tamper scan refuses it before any worker starts."""
    run = grade_folder(untimed_rubric, attack(tmp_path, file, code), tmp_path, component_ids=[component], visible_only=True)
    stopped(run, checks_of(run, component), WHY)
    assert run.isolation["held"] == {}


# ---- 8. malformed and oversized replies -----------------------------------------------------------

# Each would hurt a grader that took the reply whole or handled it in the student's process: the
# array and the string exhaust its memory, the nesting its stack, the generator and the objects
# hang or raise when printed or measured, the forged frame feeds its decoder. softmax misbehaves
# only for the first softmax case's input shape: every other backprop case must still pass.
# (reply, value, what the grader says: the defence that held)
REPLIES = [
    ("a 300 MB array", "np.zeros(300_000_000, dtype=np.uint8)", f"{REFUSED_REPLY}the worker sent a malformed reply "
     f"(reply of 300000000 bytes exceeds the {Limits().reply_bytes}-byte limit)"),
    ("a 50 MB string", "'x' * (50 << 20)", REFUSED_REPLY + "the worker sent a malformed reply (reply header of"),
    # the worker's encoder gives up on the nesting: the student's reply never leaves the worker
    ("lists nested 100000 deep", "nested(100_000)", RAISED + "RecursionError"),
    ("lists nested 100000 deep, recursion limit raised", "sys.setrecursionlimit(1_000_000) or nested(100_000)", CRASHED),
    ("a generator", "(row for row in z)", NOT_DATA),
    ("an object whose __repr__, __str__ and __len__ hang", "Hangs()", NOT_DATA),
    ("an object whose __repr__, __str__ and __len__ raise", "Raises()", NOT_DATA),
    ("an exception whose __str__ raises", "throw(Unprintable())", RAISED + "Unprintable: (its message could not be printed)"),
    # The reply pipe's descriptor is on the worker's command line: a frame written there comes first.
    ("a frame of its own with an impossible shape", "forge(['float64', [0, 1 << 62, 1 << 62], 0, False])",
     REFUSED_REPLY + "the worker sent a malformed value"),
]
REPLY_TOOLS = """\
import json
import os
import struct
import sys

_right = softmax


def nested(depth):
    deep = []
    for _ in range(depth):
        deep = [deep]
    return deep


class Hangs:
    def __repr__(self):
        while True:
            pass

    __str__ = __len__ = __repr__


class Raises:
    def __repr__(self):
        raise RuntimeError("no")

    __str__ = __len__ = __repr__


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")


def throw(exc):
    raise exc


def forge(tensor):
    header = json.dumps({"value": {"__tensor__": tensor}, "violations": [], "blobs": [0]}).encode()
    os.write(int(sys.argv[2]), struct.pack("<I", len(header)) + header)
    return _right(np.zeros((5, 7)))


def softmax(z):
    if z.shape != (5, 7):
        return _right(z)
    return VALUE
"""


@pytest.mark.parametrize("reply, value, because", REPLIES, ids=[r[0] for r in REPLIES])
@pytest.mark.slow
def test_malformed_replies_fail_their_case_only(rubric, tmp_path, reply, value, because):
    """Threat: a reply too big, too deep, not data, unprintable or forged, sent back from the student's function.
    Defence: the wire's caps and exact types, the parent's checks on every frame, a worker that dies alone.
    (The real timeouts: with 3-second ones, the partner's sampling cases time out on a loaded machine.)"""
    run = grade_attack(rubric, attack(tmp_path, "backprop.py", REPLY_TOOLS.replace("VALUE", value)), tmp_path, "backprop.py", "backprop")
    failed = [r for r in run.results if not r.passed]
    assert [r.case.name for r in failed] == ["softmax along the last axis"], [(r.case.name, r.output[:200]) for r in failed]
    assert because in failed[0].output, failed[0].output
