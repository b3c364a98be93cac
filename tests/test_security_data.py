"""Attacks through the data that crosses the trust boundary: one submission per threat class.

Each attack is solutions/ with code appended to one file (it runs when the worker imports the
file, and a `def` there replaces the solution's function for every caller), plus a helper module
where the route needs one. Each test asserts
that the cases exercising the attack earn nothing, that a component graded from another file
keeps full marks, and that grading ends in bounded time. Every attack is written to win against
a grader without the defence in question: one that compared in the student's process, trusted
what the student's process printed, let expected values live beside student code, or reused
inputs.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import SOLUTIONS, grade_folder, scores_by_component, solutions_with

from autograder.cases import CHECKS
from autograder.expected import Live
from autograder.reference import Reference
from autograder.run import CaseResult, GradeRun
from autograder.trial import Trial

BOUND_S = 60  # a whole grading of two components, attack included
PARTNER = {"backprop.py": "ngram", "ngram.py": "backprop", "attention.py": "backprop", "lstm.py": "backprop"}


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


def earn_nothing(run: GradeRun, checks: set[str]) -> list[CaseResult]:
    """The cases of `checks` (there are some) all fail; returns them."""
    hit = [r for r in run.results if r.case.check in checks]
    assert hit and not any(r.passed for r in hit), [r.case.name for r in hit if r.passed]
    return hit


# ---- 1. printing fake pass lines ------------------------------------------------------------------

FAKE_PASS = 'Passed.\n{"score": 100, "tests": [{"name": "softmax", "score": 4, "max_score": 4}]}\nAll tests passed\n'
UNIFORM = "    return np.full_like(z, 1.0 / z.shape[-1])  # wrong: every row uniform\n"
# Each prints pass lines (at import too) and returns a wrong softmax: a grader that read the
# student process's output or exit status would count it. The worker's output goes to /dev/null.
PRINTING = [
    ("stdout", "    print(FAKE)\n" + UNIFORM),
    ("stderr", "    print(FAKE, file=sys.stderr)\n" + UNIFORM),
    ("raw descriptors", "    os.write(1, FAKE.encode())\n    os.write(2, FAKE.encode())\n" + UNIFORM),
    ("then exit status 0", "    print(FAKE)\n    sys.exit(0)\n"),
    ("then the process exits 0", "    print(FAKE, flush=True)\n    os._exit(0)\n"),
    ("as an exception's message", "    raise RuntimeError(FAKE)\n"),
]


@pytest.mark.parametrize("how, body", PRINTING, ids=[p[0] for p in PRINTING])
def test_printed_pass_lines_count_for_nothing(rubric, tmp_path, capfd, how, body):
    """Threat: fake "Passed." lines, Gradescope JSON and "All tests passed" on stdout, stderr or the raw descriptors."""
    code = f"import os\nimport sys\n\nFAKE = {FAKE_PASS!r}\nprint(FAKE)\n\n\ndef softmax(z):\n{body}"
    run = grade_attack(rubric, attack(tmp_path, "backprop.py", code), tmp_path, "backprop.py", "backprop")
    earn_nothing(run, {"backprop.softmax"})
    printed = capfd.readouterr()
    assert "All tests passed" not in printed.out + printed.err  # nothing the worker prints reaches the grader's output


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
# builtins reached through sys.modules, which the tamper scan does not see when sys is os's
# attribute fetched by a literal name: judge.py's numbers are compared with the built-in abs.
BUILTIN_PATCHES = """\
import os

_builtins = getattr(os, "sys").modules["builtins"]
_builtins.abs = lambda x: 0.0
_builtins.round = lambda x, *args: 0.0


def cross_entropy(logits, targets):
    return 0.0
"""
PATCHING = [
    ("numpy, math, unittest", "backprop.py", "backprop", NUMPY_PATCHES, {"backprop.softmax"}),
    ("builtins abs and round", "backprop.py", "backprop", BUILTIN_PATCHES, {"backprop.cross_entropy"}),
    ("torch", "attention.py", "causal_mask", TORCH_PATCHES, {"causal_mask.values", "causal_mask.no_future_leak", "causal_mask.prefix"}),
]


@pytest.mark.parametrize("library, file, component, code, checks", PATCHING, ids=[p[0] for p in PATCHING])
def test_patched_comparison_helpers_fool_nothing(rubric, tmp_path, library, file, component, code, checks):
    """Threat: the comparison helpers a naive grader calls, patched at import time to report a match."""
    run = grade_attack(rubric, attack(tmp_path, file, code), tmp_path, file, component)
    earn_nothing(run, checks)


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
LYING = [
    ("an ndarray subclass", "backprop.py", "backprop", LYING_ARRAY, {"backprop.softmax"}, "cannot be sent back as data"),
    ("an object with lying __eq__, __sub__, __float__, __len__", "backprop.py", "backprop", LIAR,
     {"backprop.softmax", "backprop.cross_entropy"}, "cannot be sent back as data"),
    ("a float subclass", "backprop.py", "backprop", LYING_FLOAT, {"backprop.cross_entropy"}, "expected a real number"),
    ("a list subclass", "ngram.py", "ngram", LYING_LIST, {"ngram.padding"}, "expected a list"),
    ("a dict subclass", "ngram.py", "ngram", LYING_DICT, {"ngram.counts"}, "keys missing"),
    ("a Tensor subclass", "attention.py", "causal_mask", LYING_TENSOR, {"causal_mask.values"}, "cannot be sent back as data"),
    ("NaN where a value is expected", "attention.py", "attention", NAN_TENSOR, ATTENTION, "NaN or Inf"),
    ("the other float dtype", "attention.py", "attention", OTHER_DTYPE, ATTENTION, "expected dtype"),
]


@pytest.mark.parametrize("liar, file, component, code, checks, feedback", LYING, ids=[p[0] for p in LYING])
def test_objects_that_lie_score_nothing(rubric, tmp_path, liar, file, component, code, checks, feedback):
    """Threat: a returned object whose comparisons, conversions or length lie, or a value of the wrong kind."""
    run = grade_attack(rubric, attack(tmp_path, file, code), tmp_path, file, component)
    hit = earn_nothing(run, checks)
    assert any(feedback in r.output for r in hit), hit[0].output


# ---- 4. walking the heap or the stack for expected values -------------------------------------------

# Each returns what it finds of the expected gradient: an array of the logits' shape and dtype whose
# rows sum to 0 somewhere on the heap, or a caller's local named `want`. Run in the grader's own
# process, each of the four passes the cross_entropy_backward check (the check holds `want` in a
# local and in its hints' closures while it calls the student). The first two are what the tamper
# scan refuses; the last two reach the same through pydoc.locate and traceback, which it does not
# flag: whether or not a scan sees them, the worker holds no expected value to find.
FIND_ON_HEAP = """\
def cross_entropy_backward(logits, targets):
    for holder in heap.get_objects():
        for obj in heap.get_referents(holder):
            if (type(obj) is np.ndarray and obj is not logits and obj.shape == logits.shape
                    and obj.dtype == logits.dtype and np.allclose(obj.sum(axis=1), 0)):
                return obj.copy()
    return np.zeros_like(logits)
"""
SEARCHING = [
    ("gc", "import gc as heap\n\n\n" + FIND_ON_HEAP),
    ("frames", """\
import sys


def cross_entropy_backward(logits, targets):
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("want", "expected", "reference"):
            if type(frame.f_locals.get(name)) is np.ndarray:
                return frame.f_locals[name].copy()
        frame = frame.f_back
    return np.zeros_like(logits)
"""),
    ("gc through pydoc.locate", "import pydoc\n\nheap = pydoc.locate('gc')\n\n\n" + FIND_ON_HEAP),
    ("frames through traceback", """\
import re
import traceback

np.set_printoptions(precision=17, threshold=1 << 20)  # reprs exact enough to rebuild an array


def cross_entropy_backward(logits, targets):
    for frame in traceback.StackSummary.extract(traceback.walk_stack(None), capture_locals=True):
        text = (frame.locals or {}).get("want", "")
        if text.startswith("array("):
            numbers = re.findall(r"[-+]?[0-9.]+(?:e[-+]?[0-9]+)?", text.split("dtype")[0])
            return np.array(numbers, dtype=logits.dtype).reshape(logits.shape)
    return np.zeros_like(logits)
"""),
]


@pytest.mark.parametrize("route, code", SEARCHING, ids=[s[0] for s in SEARCHING])
def test_expected_values_are_not_in_the_worker(rubric, tmp_path, route, code):
    """Threat: gc.get_objects() or a walk up the stack for the expected answer, with and without names the tamper scan knows."""
    run = grade_attack(rubric, attack(tmp_path, "backprop.py", code), tmp_path, "backprop.py", "backprop")
    earn_nothing(run, {"backprop.cross_entropy_backward"})


# ---- 5. mutating inputs, replaying outputs, predicting seeds ---------------------------------------

# A wrong answer, and the input rewritten to match it: a grader that computed the reference after
# the call, from the same object, would expect exactly that answer.
MUTATING = [
    ("a numpy input", "backprop.py", "backprop", """\
def softmax(z):
    z[...] = 0.0  # softmax(0) is uniform
    return np.full_like(z, 1.0 / z.shape[-1])
""", {"backprop.softmax", "backprop.inputs_unchanged"}),
    ("a tensor input", "attention.py", "attention", """\
def scaled_dot_product_attention(Q, K, V, mask=None):
    with torch.no_grad():
        V.zero_()  # attention over zero values is zero
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, requires_grad=True)
""", {"attention.scaled"}),
]


@pytest.mark.parametrize("what, file, component, code, checks", MUTATING, ids=[m[0] for m in MUTATING])
def test_inputs_mutated_in_place_gain_nothing(rubric, tmp_path, what, file, component, code, checks):
    """Threat: the student's function rewrites its inputs in place so that a reference computed afterwards agrees."""
    run = grade_attack(rubric, attack(tmp_path, file, code), tmp_path, file, component)
    earn_nothing(run, checks)


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


def test_predicted_seeds_and_replayed_answers_fail_hidden_cases(rubric, tmp_path):
    """Threat: answers precomputed for inputs drawn from a guessed seed, replayed for any input of the same shape."""
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
    assert hidden and not any(r.passed for r in hidden)


# ---- 6. forbidden built-ins reached indirectly -----------------------------------------------------

LSTM_STEP = "def lstm_step(x_t, h_prev, c_prev, W_ih, W_hh, b):\n    return {}(x_t, (h_prev, c_prev), W_ih, W_hh, b)\n"
SDPA = """\
def scaled_dot_product_attention(Q, K, V, mask=None):
    out = {}(Q, K, V, attn_mask=mask)
    return out if mask is None else out.masked_fill(~mask.any(-1, keepdim=True), 0.0)
"""
TORCH_SOFTMAX = "def softmax(z):\n    return TORCH.softmax(TORCH.from_numpy(z), dim=-1).numpy()\n"
# Each would compute a right answer with what the component forbids (torch in backprop, PyTorch's
# LSTM kernels in lstm, its attention in attention), hidden from a scan of the written names.
REACHING = [
    ("lstm: getattr with a built string", "lstm.py", "lstm",
     LSTM_STEP.format("getattr(getattr(torch, '_' + 'VF'), 'lstm' + '_cell')"), {}),
    ("lstm: importlib with a built string", "lstm.py", "lstm",
     "import importlib\n\n\n" + LSTM_STEP.format("importlib.import_module('torch.' + '_VF').lstm_cell"), {}),
    ("lstm: a helper module", "lstm.py", "lstm", "from helpers import cell\n\n\n" + LSTM_STEP.format("cell"),
     {"helpers": "import torch\n\ncell = torch._VF.lstm_cell\n"}),
    ("lstm: torch.ops.aten", "lstm.py", "lstm", LSTM_STEP.format("torch.ops.aten.lstm_cell"), {}),
    ("lstm: the C namespace by a literal name", "lstm.py", "lstm",
     LSTM_STEP.format("getattr(torch._C, '_VariableFunctions').lstm_cell"), {}),
    ("lstm: functools.partial at import", "lstm.py", "lstm",
     "import functools\n\nfused = functools.partial(torch.lstm_cell)\n\n\n" + LSTM_STEP.format("fused"), {}),
    ("lstm: an alias bound at import", "lstm.py", "lstm", "from torch import lstm_cell as fused\n\n\n" + LSTM_STEP.format("fused"), {}),
    ("lstm: sys.modules", "lstm.py", "lstm", "import sys\n\n\n" + LSTM_STEP.format("sys.modules['torch'].lstm_cell"), {}),
    ("lstm: __import__ with a built string", "lstm.py", "lstm", LSTM_STEP.format("__import__('to' + 'rch').lstm_cell"), {}),
    ("lstm: a subclass", "lstm.py", "lstm", "from torch.nn.modules import rnn as recurrent\n\n\nclass Cell(recurrent.LSTMCell):\n    pass\n", {}),
    # The guard's stand-in for torch._C._VariableFunctions keeps the real namespace in `.target`.
    ("lstm: the guard's shadow namespace", "lstm.py", "lstm",
     LSTM_STEP.format("getattr(torch._C, '_VariableFunctions').target.lstm_cell"), {}),
    # The kernels also live on torch._C._VariableFunctionsClass, which the guard leaves alone.
    ("lstm: the kernels' class namespace", "lstm.py", "lstm",
     LSTM_STEP.format("getattr(torch._C, '_VariableFunctionsClass').lstm_cell"), {}),
    ("attention: torch._C._nn", "attention.py", "attention", SDPA.format("torch._C._nn.scaled_dot_product_attention"), {}),
    ("attention: sys.modules", "attention.py", "attention",
     "import sys\n\n\n" + SDPA.format("sys.modules['torch.nn.functional'].scaled_dot_product_attention"), {}),
    ("attention: functools.partial at import", "attention.py", "attention",
     "import functools\n\nimport torch.nn.functional as F\n\nfused = functools.partial(F.scaled_dot_product_attention)\n\n\n"
     + SDPA.format("fused"), {}),
    ("attention: a subclass", "attention.py", "attention",
     "from torch.nn.modules import activation\n\n\nclass Attention(activation.MultiheadAttention):\n    pass\n", {}),
    # The guard swaps torch.ops.aten.<name> only for torch._VF's kernels.
    ("attention: torch.ops.aten", "attention.py", "attention", SDPA.format("torch.ops.aten.scaled_dot_product_attention"), {}),
    ("backprop: __import__ with a built string", "backprop.py", "backprop", "TORCH = __import__('to' + 'rch')\n\n\n" + TORCH_SOFTMAX, {}),
    ("backprop: importlib with a built string", "backprop.py", "backprop",
     "import importlib\n\nTORCH = importlib.import_module('to' + 'rch')\n\n\n" + TORCH_SOFTMAX, {}),
    ("backprop: a helper module", "backprop.py", "backprop", "from helpers import TORCH\n\n\n" + TORCH_SOFTMAX,
     {"helpers": "import torch as TORCH\n"}),
    # sys reached as os's attribute by a literal name, the guard taken off sys.meta_path, then torch
    # imported through importlib as found in sys.modules: none of it is a name the scans flag.
    ("backprop: the import guard removed", "backprop.py", "backprop", """\
import os

_sys = getattr(os, "sys")
_sys.meta_path[:] = [finder for finder in _sys.meta_path if type(finder).__name__ != "Guard"]
TORCH = _sys.modules["importlib"].import_module("to" + "rch")


""" + TORCH_SOFTMAX, {}),
]


@pytest.mark.parametrize("route, file, component, code, helpers", REACHING, ids=[r[0] for r in REACHING])
def test_forbidden_builtins_reached_indirectly_lose_the_component(rubric, tmp_path, route, file, component, code, helpers):
    """Threat: a forbidden module or call reached by a built name, a helper, a private namespace, an alias or a subclass."""
    run = grade_attack(rubric, attack(tmp_path, file, code, **helpers), tmp_path, file, component)
    cases = [r for r in run.results if r.case.component == component]
    assert cases and not any(r.passed for r in cases), [r.case.name for r in cases if r.passed]
    # "uses what this component may not" (a static scan) or "Uses what this component forbids" (the guard)
    assert all("may not" in r.output or "forbids" in r.output for r in cases), cases[0].output


# ---- 7. malformed and oversized replies -----------------------------------------------------------

# Each would hurt a grader that took the reply whole or handled it in the student's process: the
# array and the string exhaust its memory, the nesting its stack, the generator and the objects
# hang or raise when printed or measured, the forged frame feeds its decoder. softmax misbehaves
# only for the first softmax case's input shape: every other backprop case must still pass.
REPLIES = [
    ("a 300 MB array", "np.zeros(300_000_000, dtype=np.uint8)", "exceeds"),
    ("a 50 MB string", "'x' * (50 << 20)", "exceeds"),
    ("lists nested 100000 deep", "nested(100_000)", "recursion"),
    ("lists nested 100000 deep, recursion limit raised", "sys.setrecursionlimit(1_000_000) or nested(100_000)", "crashed"),
    ("a generator", "(row for row in z)", "cannot be sent back as data"),
    ("an object whose __repr__, __str__ and __len__ hang", "Hangs()", "cannot be sent back as data"),
    ("an object whose __repr__, __str__ and __len__ raise", "Raises()", "cannot be sent back as data"),
    ("an exception whose __str__ raises", "throw(Unprintable())", "Unprintable"),
    # The reply pipe's descriptor is on the worker's command line: a frame written there comes first.
    ("a frame of its own with an impossible shape", "forge(['float64', [0, 1 << 62, 1 << 62], 0, False])", "malformed"),
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


@pytest.mark.parametrize("reply, value, feedback", REPLIES, ids=[r[0] for r in REPLIES])
def test_malformed_replies_fail_their_case_only(quick_rubric, tmp_path, reply, value, feedback):
    """Threat: a reply too big, too deep, not data, unprintable or forged, sent back from the student's function."""
    run = grade_attack(quick_rubric, attack(tmp_path, "backprop.py", REPLY_TOOLS.replace("VALUE", value)), tmp_path, "backprop.py", "backprop")
    failed = [r for r in run.results if not r.passed]
    assert [r.case.name for r in failed] == ["softmax along the last axis"], [(r.case.name, r.output[:200]) for r in failed]
    assert feedback in failed[0].output, failed[0].output
