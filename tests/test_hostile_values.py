"""Values correct code returns are accepted as what they stand for; what cannot be accepted is named in words.

The student API lets a function return the documented type or its natural equivalent: numpy scalars and strings
(np.str_ from rng.choice over words, np.int64 from argsort, np.float32 from a float32 sum), 0-d arrays and tensors
for numbers, tuples for lists, Counter or defaultdict for dicts. The worker sends numpy scalars as the Python values
they stand for (wire.encode), the judge takes 0-d arrays and tensors where a number is asked (judge.as_number), and
every other object stays in the worker, named by what it is (wire.kept_name) where a message shows it.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SOLUTIONS, grade_folder
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder import judge
from autograder.sandbox.host.proxy import Remote
from autograder.sandbox.worker import wire

# ---- the wire: numpy scalars cross as the Python values they stand for -------------------------------------------


def roundtrip(value):
    blobs: list[bytes] = []
    data = wire.encode(value, blobs)
    r, w = os.pipe()
    os.write(w, wire.pack({"v": data}, blobs))
    os.close(w)
    try:
        header, got = wire.read_frame(r)
    finally:
        os.close(r)
    return wire.decode(header["v"], got)


def scalars(nan: bool):
    """numpy scalars of every kind the API's types stand for, and the plain values beside them (NaN only where it is
    no dict key or set element, which a NaN could never be looked up as)."""
    return st.one_of(
        st.booleans().map(np.bool_),
        *(st.integers(int(np.iinfo(t).min), int(np.iinfo(t).max)).map(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64)),
        *(st.floats(width=w, allow_nan=nan).map(t) for w, t in ((16, np.float16), (32, np.float32), (64, np.float64))),
        st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0")).map(np.str_),
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=nan), st.text(st.characters(exclude_categories=("Cs",))),
    )


HASHABLE = st.recursive(scalars(nan=False), lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=6)
VALUES = st.recursive(
    scalars(nan=True),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(HASHABLE, inner, max_size=4).flatmap(lambda d: st.sampled_from(
            [d, collections.Counter(d), collections.OrderedDict(d), collections.defaultdict(int, d)])),
        st.sets(HASHABLE, max_size=4),
    ),
    max_leaves=12,
)


def plain(value):
    """What the parent must rebuild: numpy scalars as bool, int, float or str, any dict a dict, exact types only."""
    if isinstance(value, np.generic):
        return {"b": bool, "i": int, "u": int, "f": float, "U": str}[value.dtype.kind](value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(plain(v) for v in value)
    return value


def same(a, b) -> bool:
    """Equal with exact types all the way down (NaN equal to NaN, -0.0 apart from 0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) in (dict, set):  # each key the same, of the same type, as the equal key on the other side
        return set(a) == set(b) and all(same(k, next(kb for kb in b if kb == k)) and (type(a) is set or same(a[k], b[k])) for k in a)
    return a == b


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_any_nesting_of_numpy_scalars_crosses_as_plain_values(value):
    got = roundtrip(value)
    assert same(got, plain(value)), (value, got)


@given(st.one_of(st.floats(width=32).map(np.float32), st.floats(width=16).map(np.float16)))
def test_a_low_precision_float_crosses_exactly(x):
    """np.float32 and np.float16 become a Python float of the same value: nothing the judge uses is lost (a case's
    tolerance comes from its expected value, never from the dtype of a returned number)."""
    got = roundtrip(x)
    assert type(got) is float and (got == float(x) or (math.isnan(got) and np.isnan(x)))


@pytest.mark.parametrize("value, name", [
    (np.array(["a", "b"], dtype=object), "numpy array of Python objects (dtype object)"),
    (np.array(["cat", "sat"]), "numpy array of strings (dtype <U3)"),
    (np.array(["2024-01-01"], dtype="datetime64[D]"), "numpy array of dates (dtype datetime64[D])"),
    (np.datetime64("2024-01-01"), "numpy datetime64"),
    (np.bytes_(b"cat"), "numpy bytes_"),
    (np.complex128(1j), "numpy complex128"),
    (torch.ones(2, dtype=torch.uint16), "torch tensor of dtype torch.uint16"),
    ({1, 2}.__iter__(), "set_iterator"),
], ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_what_is_not_data_stays_in_the_worker_named(value, name):
    kept = []
    got = wire.encode(value, [], lambda obj: kept.append(obj) or {"__handle__": [1, wire.kept_name(obj)]})
    assert kept == [value] and got == {"__handle__": [1, name]}
    with pytest.raises(wire.WireError, match="cannot send"):
        wire.encode(value, [])  # the parent never sends it


class Sneaky(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class SneakyNp(np.str_):
    pass


def test_a_subclass_of_a_plain_type_stays_in_the_worker_named():
    """A str subclass could compare equal to anything: it never becomes data, and its name says what it subclasses.
    An np.str_ subclass is no numpy scalar either (its class is the student's)."""
    for value, name in ((Sneaky("cat"), "Sneaky (a subclass of str)"), (SneakyNp("cat"), "SneakyNp (a subclass of str_)"),
                        (torch.ones(2).as_subclass(type("Tricky", (torch.Tensor,), {})), "Tricky (a subclass of Tensor)")):
        kept = []
        got = wire.encode([value], [], lambda obj: kept.append(obj) or {"__handle__": [1, wire.kept_name(obj)]})
        assert kept == [value] and got == [{"__handle__": [1, name]}]


def test_a_forged_numpy_scalar_tag_is_refused():
    """numpy scalars never cross as such: a frame that says one is malformed, whatever its dtype."""
    with pytest.raises(wire.WireError, match="unknown tag"):
        wire.decode({"__npscalar__": ["<U3", 0]}, [b"c\0\0\0a\0\0\0t\0\0\0"])


# ---- the judge: numbers stand in for numbers, and what came back is named --------------------------------------


@pytest.mark.parametrize("value", [2, 2.0, np.array(2.0), np.array(2, dtype=np.int32), torch.tensor(2.0), torch.tensor(2.0, dtype=torch.float16),
                                   torch.tensor(2.0, dtype=torch.float64, requires_grad=True), torch.tensor(2)],
                         ids=repr)
def test_a_number_may_come_back_as_a_0d_array_or_tensor(value):
    assert judge.as_number(value, "perplexity") == 2.0


@pytest.mark.parametrize("value, named", [
    (True, "a bool"), (torch.tensor([2.0]), "a torch tensor of shape (1,)"), (np.array([2.0]), "a numpy array of shape (1,)"),
    (torch.tensor(True), "a torch tensor of shape () and dtype torch.bool"), (np.array(1 + 2j), "complex128"), ("2", "a str"),
], ids=repr)
def test_what_is_not_a_number_is_named(value, named):
    with pytest.raises(judge.CaseFailed, match="expected a real number") as failed:
        judge.as_number(value, "perplexity")
    assert named in str(failed.value)


def kept(name: str) -> Remote:
    """What a check holds for an object the worker kept, named as the worker names it."""
    return Remote(None, wire.Expr(wire.Handle(7, name)))


def test_an_object_that_came_back_is_named_with_what_was_expected():
    got = [kept("numpy array of Python objects (dtype object)")]
    with pytest.raises(judge.CaseFailed) as failed:
        judge.expect_equal(got, [["<s>", "cat", "</s>"]], "[pad_sentence(tokens, n=2)]", visible=False)
    message = str(failed.value)
    assert message.startswith("[pad_sentence(tokens, n=2)]: expected a list of lists of str, got a list holding an object that cannot "
                              "be sent back as data: a numpy array of Python objects (dtype object). The grader reads"), message
    with pytest.raises(judge.CaseFailed, match="expected a set of str, got an object that cannot be sent back as data: a Sneaky \\(a subclass of str\\)\\.") as failed:
        judge.expect_equal(kept("Sneaky (a subclass of str)"), {"cat", "</s>"}, "vocab", visible=True)
    assert "could compare equal to anything" in str(failed.value)


# ---- real grading: correct code in another style keeps every point ---------------------------------------------


def edited(source: Path, folder: Path, edits: list[tuple[str, str]]) -> Path:
    """A copy of one solution file in `folder`, each edit applied where its anchor occurs exactly once."""
    text = source.read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"the anchor must occur once in {source.name}: {old!r}"
        text = text.replace(old, new)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / source.name).write_text(text)
    return folder


# ngram.py as a numpy-minded student writes it: words drawn with rng.choice come back as np.str_, the counts are a
# Counter keyed by tuples of np.str_, vocab a set of np.str_, probabilities np.float64 or 0-d arrays, the
# distribution a defaultdict, the perplexity a 0-d tensor, and pad_sentence a tuple.
NGRAM_NUMPY_STYLE = [
    ("from collections import Counter\n", "from collections import Counter, defaultdict\n"),
    ("import numpy as np\n", "import numpy as np\nimport torch\n"),
    ("return [BOS] * (n - 1) + list(tokens) + [EOS]", "return tuple([BOS] * (n - 1) + list(tokens) + [EOS])"),
    ("padded = pad_sentence(tokens, n)\n", "padded = np.array(pad_sentence(tokens, n))\n"),
    ("self.vocab = {w for tokens in sentences for w in tokens} | {EOS}",
     "self.vocab = set(np.unique(np.array([w for tokens in sentences for w in tokens] + [EOS])))"),
    ("return c_hw / c_h if c_h > 0 else 0.0", "return np.float64(c_hw) / c_h if c_h > 0 else np.float64(0.0)"),
    ("return (c_hw + self.k) / (c_h + self.k * len(self.vocab))", "return np.asarray((c_hw + self.k) / (c_h + self.k * len(self.vocab)))"),
    ("return {w: self.prob(w, context) for w in sorted(self.vocab)}", "return defaultdict(float, {w: self.prob(w, context) for w in sorted(self.vocab)})"),
    ("return -math.inf", "return np.float64(-np.inf)"),
    ("return logprob\n", "return np.float64(logprob)\n"),
    ("return math.exp(-logprob / N)", "return torch.exp(torch.tensor(-logprob / N, dtype=torch.float64))"),
    ("w = candidates[rng.choice(len(candidates), p=[dist[c] for c in candidates])]", "w = rng.choice(candidates, p=[dist[c] for c in candidates])"),
]


def only(rubric, cases: dict[str, set[str] | None]):
    """The rubric cut to some components, each to the cases of some checks (None: all of them)."""
    return dataclasses.replace(rubric, components=[
        dataclasses.replace(c, cases=[k for k in c.cases if cases[c.id] is None or k.check in cases[c.id]])
        for c in rubric.components if c.id in cases])


def lost_points(run) -> list[str]:
    return [f"case {r.case.number} {r.case.name}: {r.output}" for r in run.results if not r.passed or r.score < r.max_score]


@pytest.mark.slow
def test_ngram_with_numpy_typed_returns_keeps_every_point(rubric, tmp_path):
    folder = edited(SOLUTIONS / "ngram.py", tmp_path / "numpy-style", NGRAM_NUMPY_STYLE)
    run = grade_folder(only(rubric, {"ngram": None}), folder, tmp_path)
    assert run.results and not lost_points(run), "\n".join(lost_points(run))


@pytest.mark.slow
def test_numpy_components_with_numpy_typed_returns_keep_every_point(rubric, tmp_path):
    """np.float32 for a float32 loss, 0-d arrays and np.float64 for losses, a list where a tuple is documented, a
    tuple of np.int64 where a list of ints is."""
    folder = edited(SOLUTIONS / "backprop.py", tmp_path / "numpy-style", [
        ("return float(np.mean(logsumexp - z[np.arange(N), targets]))", "return np.mean(logsumexp - z[np.arange(N), targets])"),
        ("    return loss, grads\n", "    return [np.asarray(loss), grads]\n"),
    ])
    edited(SOLUTIONS / "word2vec.py", folder, [
        ("return float(np.mean(np.logaddexp(0, -pos) + np.logaddexp(0, neg).sum(axis=1)))",
         "return np.asarray(np.mean(np.logaddexp(0, -pos) + np.logaddexp(0, neg).sum(axis=1)))"),
        ("losses.append(float(np.mean(batch_losses)))", "losses.append(np.mean(batch_losses))"),
        ("    return W, C, losses\n", "    return [W, C, tuple(losses)]\n"),
        ("return [int(i) for i in np.argsort(-sims)[:topn]]\n    # END SOLUTION\n\n\ndef analogy",
         "return tuple(np.argsort(-sims)[:topn])\n    # END SOLUTION\n\n\ndef analogy"),
        ("    return [int(i) for i in np.argsort(-sims)[:topn]]\n    # END SOLUTION\n",
         "    return list(np.argsort(-sims)[:topn])\n    # END SOLUTION\n"),
    ])
    cases = only(rubric, {
        "backprop": {"backprop.cross_entropy", "backprop.loss_and_grads"},
        "word2vec": {"word2vec.sgns_loss", "word2vec.sgd_step", "word2vec.train_start", "word2vec.most_similar", "word2vec.analogy"},
    })
    run = grade_folder(cases, folder, tmp_path)
    assert len(run.results) == sum(len(c.cases) for c in cases.components) > 10
    assert not lost_points(run), "\n".join(lost_points(run))


# ---- real grading: what cannot be accepted scores nothing, named in words ------------------------------------


@pytest.mark.slow
def test_refused_returns_score_nothing_and_say_why(rubric, tmp_path):
    """An object array where a list of words is documented, and a str subclass whose __eq__ says yes to everything:
    both stay in the worker, score nothing, and the feedback names them with what was expected."""
    folder = edited(SOLUTIONS / "ngram.py", tmp_path / "refused", [
        ("BOS = \"<s>\"\n", "class Word(str):\n    def __eq__(self, other):\n        return True\n\n\n"
                           "BOS = \"<s>\"\n"),
        ("return [BOS] * (n - 1) + list(tokens) + [EOS]", "return [Word(w) for w in [BOS] * (n - 1) + list(tokens) + [EOS]]"),
        ("padded = pad_sentence(tokens, n)\n", "padded = [str(w) for w in pad_sentence(tokens, n)]\n"),  # its own counts stay right
        ("padded = pad_sentence(tokens, self.n)\n", "padded = [str(w) for w in pad_sentence(tokens, self.n)]\n"),
        ("        return words\n", "        return np.array(words, dtype=object)\n"),
    ])
    run = grade_folder(only(rubric, {"ngram": {"ngram.padding", "ngram.sampling"}}), folder, tmp_path)
    outputs = {r.case.check: r.output for r in run.results if r.score == 0}
    assert len(outputs) == 2 and all(not r.passed and r.score == 0 for r in run.results), [r.output for r in run.results]
    assert outputs["ngram.padding"].startswith("pad_sentence: the padded sentence: expected a list of words, got a list holding an "
                                               "object that cannot be sent back as data: a Word (a subclass of str)."), outputs
    assert "could compare equal to anything" in outputs["ngram.padding"]
    assert ("expected a list of words, got an object that cannot be sent back as data: a numpy array of Python objects (dtype object)."
            in outputs["ngram.sampling"]), outputs
