"""What the student API returns, declared once, and the check of each returned value against it.

Every function, method and attribute of the student API (student-api.md; solutions/ implements it) is declared here by
what it returns, from the call's own arguments where the API says so: the structure (a tensor, a tuple of them, a number,
a list of str, a dict...), each tensor's dtype (the inputs', the model's weights', or a fixed one: a mask is bool) and
its shape in the named sizes of the inputs (lstm_forward: (hs (B, T, H), (h_last (B, H), c_last (B, H)))). A case's
proxy hands every value the student's code returns to a Boundary before any check, staff test or self-comparison sees
it, so a return of another type, dtype or shape fails the case for the student, in the judge's words: what was
expected, what came back, and the likely mistake where the evidence singles it out. Only the student's own inputs and
outputs are described, never an expected value, so the words are the same in a hidden case.

The natural equivalents the API accepts pass: numpy scalars (the wire sends them as Python numbers), 0-d arrays and
tensors for numbers, tuples for lists and lists for tuples, any dict (Counter and defaultdict arrive as dicts). What the
parent cannot know is left unchecked (a size or dtype of an input that stays in the worker, of a model it gave no
weights): the boundary says nothing it cannot back.
"""
from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from .judge import LIKELY, CaseFailed, type_name
from .sandbox.host.proxy import Remote
from .sandbox.worker.wire import Expr, Handle
from .tensors import deferred, is_array, is_tensor

torch = deferred("torch")

INPUTS = "the dtype must follow the inputs"
Axes = tuple[tuple[str, int | None], ...]  # a declared shape: each axis's name as the API writes it, and its size when known


class Malformed(CaseFailed):
    """A return of another type, dtype or shape than the student API declares: the student's failure, said as such."""


@dataclass(frozen=True)
class Dtype:
    """A declared dtype, and the rule that fixes it (said in the feedback)."""

    name: str  # "float64", "bool", "int64"
    rule: str  # "the dtype must follow the inputs"
    source: str = "the inputs'"  # whose dtype a new tensor must take, for a float default left in ("the weights'")


# ---- what came back, in words ------------------------------------------------------------------------------------


def described(value) -> str:
    """A returned value in words: its type, and for arrays and tensors its shape and dtype; never the values, which in
    a hidden case could carry a hidden input (a word of the corpus). An object that stayed in the worker is named as the
    judge names it (judge.type_name)."""
    if isinstance(value, Remote | Handle):
        return type_name(value)
    if is_tensor(value):
        return f"{_a(_dtype(value))} tensor of shape {tuple(value.shape)}"
    if type(value) is np.ndarray:
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, tuple | list):
        kind = type(value).__name__
        kinds = {type(v).__name__ for v in value}
        if not value:
            return f"an empty {kind}"
        if all(is_tensor(v) for v in value) and len({(tuple(v.shape), v.dtype) for v in value}) == 1:
            return f"a {kind} of {len(value)} {_dtype(value[0])} tensor{'s' * (len(value) > 1)} of shape {tuple(value[0].shape)}"
        if len(kinds) == 1 and not (is_array(value[0]) or type(value[0]) is Remote):
            return f"a {kind} of {len(value)} {_plural(kinds.pop()) if len(value) > 1 else kinds.pop()}"
        if len(value) <= 3:
            return f"a {kind} of {len(value)}: " + _and([described(v) for v in value])
        return f"a {kind} of {len(value)} values"
    if isinstance(value, dict):
        return f"a dict of {len(value)} entries"
    return "None" if value is None else _a(type(value).__name__)


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _plural(kind: str) -> str:
    return kind if kind == "str" else kind + "s"


def _dtype(x) -> str:
    return str(x.dtype).removeprefix("torch.")


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _shape_words(axes: Axes) -> str:
    """"(B, T, H) = (3, 15, 5)"; an unknown size stays a name, and leading "..." axes are one "..." among the names."""
    names = [name for i, (name, _) in enumerate(axes) if not (name == "..." and i and axes[i - 1][0] == "...")]
    sizes = [name if size is None else str(size) for name, size in axes]
    names_text, sizes_text = (f"({', '.join(x)}{',' * (len(x) == 1)})" for x in (names, sizes))
    return names_text if names_text == sizes_text else f"{names_text} = {sizes_text}"


# ---- declared values ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One declared value. `name` is the API's name for it ("hs"); `likely(got)` may name the mistake that returns
    `got` instead, from what this call knows (its inputs), and speaks before the general explanations."""

    name: str = ""
    likely: Callable[[object], str | None] | None = field(default=None, compare=False)

    def kind(self) -> str:
        """What is declared, in words, as an "expected ..." says it ("a torch tensor", "a tuple (dx, dW, db)")."""
        raise NotImplementedError

    def plural(self) -> str:
        """What several of these are ("real numbers")."""
        raise NotImplementedError

    def structure(self) -> str:
        """How the API writes this value in a tuple: its name."""
        return self.name

    def fault(self, got) -> str | None:
        """Why `got` is not this value ("hs: expected a torch tensor, got a list of ..."), or None when it is."""
        raise NotImplementedError

    def _said(self, expected: str, got: str, hint: str | None = None) -> str:
        return f"{self.name + ': ' if self.name else ''}expected {expected}, got {got}" + (f". {hint}" if hint else "")

    def _wrong_type(self, got) -> str:
        return self._said(self.kind(), described(got), self.retyped(got))

    def retyped(self, got) -> str | None:
        """What explains `got`, a value of another type than this one: the call's likely mistake, or a general one."""
        return (self.likely(got) if self.likely else None) or self._general(got)

    def _general(self, got) -> str | None:
        return None


@dataclass(frozen=True)
class Tensor(Spec):
    """A torch tensor (`numpy`: a numpy array) of this shape (None: any) and dtype (None: any); `about` says what it holds."""

    axes: Axes | None = None
    dtype: Dtype | None = None
    numpy: bool = False
    about: str = ""

    def kind(self) -> str:
        return "a numpy array" if self.numpy else "a torch tensor"

    def plural(self) -> str:
        return "numpy arrays" if self.numpy else "torch tensors"

    def fault(self, got) -> str | None:
        if not (type(got) is np.ndarray if self.numpy else is_tensor(got)):
            return self._wrong_type(got)
        if self.axes is not None and not _fits(tuple(got.shape), self.axes):
            return self._said(f"shape {_shape_words(self.axes)}" + (f", {self.about}" if self.about else ""), str(tuple(got.shape)),
                              (self.likely(got) if self.likely else None) or _reshaped(self.name, tuple(got.shape), self.axes))
        if self.dtype and _dtype(got) != self.dtype.name:
            return self._said(f"dtype {self.dtype.name} ({self.dtype.rule})", _dtype(got),
                              (self.likely(got) if self.likely else None) or _default_dtype(self, _dtype(got)))
        return None

    def _general(self, got) -> str | None:
        """What explains a value of another type: this tensor with something else, the steps not yet stacked, a
        number taken out of a scalar, a numpy array for a tensor, a Python list for an array."""
        if isinstance(got, tuple | list) and got and self.fault(got[0]) is None:
            return f"Return only {self.name}: the first of these is it, and the rest is not part of the API"
        if self.axes and isinstance(got, tuple | list) and got and all(type(g) is type(got[0]) for g in got):
            stacked = [axis for axis, (_, size) in enumerate(self.axes) if size in (None, len(got))
                       and all(hasattr(g, "shape") and _fits(tuple(g.shape), self.axes[:axis] + self.axes[axis + 1:]) for g in got)]
            if len(stacked) == 1:  # the steps of one axis, which their sizes tell
                stack = f"np.stack(..., axis={stacked[0]})" if self.numpy else f"torch.stack(..., dim={stacked[0]})"
                return f"Stack them along the axis {self.axes[stacked[0]][0]} of {_shape_words(self.axes)}: {stack}"
        if not self.numpy and self.axes == () and type(got) in (int, float):
            return "Return the tensor itself: .item() and float() give a number that autograd cannot reach the weights through"
        if not self.numpy and type(got) is np.ndarray:
            return "The student API returns torch tensors: compute with torch (torch.from_numpy makes a tensor of an array)"
        if self.numpy and isinstance(got, tuple | list) and self.dtype:
            return f"Build the array: np.array(..., dtype=np.{self.dtype.name})"
        return None


def _fits(shape: tuple, axes: Axes) -> bool:
    return len(shape) == len(axes) and all(size is None or size == got for got, (_, size) in zip(shape, axes))


def _reshaped(name: str, shape: tuple, axes: Axes) -> str | None:
    """The declared axes in another order, or with an extra leading axis of size 1, read from the sizes alone (only
    where they read one way)."""
    sizes = tuple(size for _, size in axes)
    if None in sizes:
        return None
    if shape == (1, *sizes):
        return "It has an extra leading axis of size 1, without which it has the declared shape (.squeeze(0) drops it)"
    readings = {tuple(axes[i][0] for i in order) for order in itertools.permutations(range(len(axes)))
                if tuple(sizes[i] for i in order) == shape}
    if len(readings) != 1:
        return None
    (reading,) = readings
    names = tuple(n for n, _ in axes)
    shown = f"({', '.join(reading)})"
    if len(axes) == 2:
        return f"{LIKELY}{name} is transposed: its axes are {shown}, where the API's are ({', '.join(names)})"
    if names[:2] == ("B", "T") and reading[:2] == ("T", "B") and reading[2:] == names[2:]:
        return (f"{LIKELY}{name} is time-major {shown}, as torch.stack's default dim=0 or a {shown} buffer gives: the batch comes "
                f"first, ({', '.join(names)}), as torch.stack(steps, dim=1) gives")
    return f"Its axes are in the order {shown}; the API's is ({', '.join(names)})"


def _default_dtype(spec: Tensor, got: str) -> str | None:
    """Why a result can take another dtype than its inputs': PyTorch's default float32, or NumPy's float64, for what is
    created without a dtype."""
    want = spec.dtype.name
    labels = ", ".join(name for name, _ in spec.axes or ())
    if not spec.numpy and got == "float32" and want == "float64":
        made = f"a torch.zeros({labels}) buffer, or torch.tensor of Python floats" if labels else "torch.tensor of Python floats, say"
        return (f"PyTorch makes float32 unless told otherwise: a tensor made without dtype= ({made}) is float32 whatever the "
                f"inputs; make it with {spec.dtype.source} dtype (dtype=..., or x.new_zeros), or collect the steps in a list and "
                "torch.stack them")
    if spec.numpy and got == "float64" and want == "float32":
        made = f" (np.zeros(({labels}{',' * (len(spec.axes or ()) == 1)})), say)" if labels else ""
        return (f"NumPy makes float64 unless told otherwise: an array made without dtype={made} is float64 whatever the inputs; "
                "np.zeros_like(x), or dtype=x.dtype, keeps the inputs' dtype")
    if want == "bool":
        return "Build the mask from a comparison (it is bool), or pass dtype=torch.bool (or call .bool())"
    return None


@dataclass(frozen=True)
class Number(Spec):
    """A real number: an int or a float (numpy scalars arrive as these), or a 0-d array or tensor of one (judge.as_number)."""

    def kind(self) -> str:
        return "a real number"

    def plural(self) -> str:
        return "real numbers"

    def fault(self, got) -> str | None:
        return None if _real(got) else self._wrong_type(got)

    def _general(self, got) -> str | None:
        one = is_array(got) and got.ndim and np.prod(got.shape) == 1
        return "It holds one element: .item() gives the number" if one else None


def _real(got) -> bool:
    """A real number as judge.as_number takes one: an int or a float, or a 0-d array or tensor of a real."""
    if type(got) is np.ndarray:
        return got.shape == () and got.dtype.kind in "iuf"
    if is_tensor(got):
        return got.dim() == 0 and not got.is_complex() and got.dtype != torch.bool
    return type(got) in (int, float)


@dataclass(frozen=True)
class Int(Spec):
    """A Python int (numpy integers arrive as these), as the API's token and word ids are."""

    def kind(self) -> str:
        return "a Python int"

    def plural(self) -> str:
        return "Python ints"

    def fault(self, got) -> str | None:
        return None if type(got) is int else self._wrong_type(got)

    def _general(self, got) -> str | None:
        return "Use .tolist() or .item() to return Python ints" if is_array(got) else None


@dataclass(frozen=True)
class Text(Spec):
    """A str (numpy strings arrive as these); `plural` names several the way the API does ("words")."""

    noun: str = "str"

    def kind(self) -> str:
        return "a str"

    def plural(self) -> str:
        return self.noun

    def fault(self, got) -> str | None:
        return None if type(got) is str else self._wrong_type(got)


@dataclass(frozen=True)
class Items(Spec):
    """A tuple (or list) of exactly these values, in this order."""

    items: tuple[Spec | None, ...] = ()  # None: anything (ffnn_lm_forward's cache is the student's own)

    def kind(self) -> str:
        return f"a tuple {self.structure()}"

    def plural(self) -> str:
        return f"tuples {self.structure()}"

    def structure(self) -> str:
        return "(" + ", ".join("cache" if item is None else item.structure() for item in self.items) + ")"

    def fault(self, got) -> str | None:
        if isinstance(got, tuple | list) and len(got) == len(self.items):
            return next((said for item, value in zip(self.items, got) if item is not None and (said := item.fault(value))), None)
        return self._wrong_type(got)

    def _general(self, got) -> str | None:
        flat = _leaves(self)
        if (isinstance(got, tuple | list) and len(got) == len(flat) != len(self.items)
                and all(s is None or s.fault(g) is None for s, g in zip(flat, got))):
            return f"The values are right but flat: return them grouped as declared, {self.structure()}"
        first = self.items[0]
        if first is not None and first.fault(got) is None:
            return f"Only {first.name} came back: return {self.structure()}"
        if isinstance(got, dict):
            return f"Return the values in a tuple, in the declared order {self.structure()}"
        return None


def _leaves(spec: Spec | None) -> list[Spec | None]:
    return [leaf for item in spec.items for leaf in _leaves(item)] if isinstance(spec, Items) else [spec]


@dataclass(frozen=True)
class Many(Spec):
    """A list (or tuple; `kind` "set": a set) of values that are each `item`, `length` of them when the API fixes it."""

    item: Spec = field(default_factory=Text)
    length: int | None = None
    container: str = "list"

    def kind(self) -> str:
        return f"a {self.container} of {'' if self.length is None else f'{self.length} '}{self.item.plural()}"

    def plural(self) -> str:
        return f"{self.container}s of {self.item.plural()}"

    def fault(self, got) -> str | None:
        if not isinstance(got, set | frozenset if self.container == "set" else tuple | list):
            return self._wrong_type(got)
        kept = next((v for v in got if isinstance(v, Remote | Handle)), None)
        if kept is not None:  # said as the judge says it (judge.expect_equal)
            return self._said(self.kind(), f"a {type(got).__name__} holding {type_name(kept)}")
        if self.length is not None and len(got) != self.length:
            return self._said(self.kind(), described(got))
        for i, value in enumerate(got):
            if self.item.fault(value):  # said under the item's own name: named only once wrong (thousands are right)
                which = f"an item of {self.name}" if self.container == "set" else f"{self.name}[{i}]"
                return replace(self.item, name=which).fault(value)
        return None

    def _general(self, got) -> str | None:
        return ".tolist() gives a list of Python numbers" if is_array(got) else None


@dataclass(frozen=True)
class Dict(Spec):
    """A dict whose keys are each `key` and values each `value`."""

    key: Spec = field(default_factory=Text)
    value: Spec = field(default_factory=Number)
    named: bool = False  # its keys are names the API fixes (a gradient's parameter), said in the feedback

    def kind(self) -> str:
        return f"a dict from {self.key.plural()} to {self.value.plural()}"

    def plural(self) -> str:
        return f"dicts from {self.key.plural()} to {self.value.plural()}"

    def fault(self, got) -> str | None:
        if not isinstance(got, dict):
            return self._wrong_type(got)
        for k, v in got.items():
            said = replace(self.key, name=f"a key of {self.name}").fault(k)
            named = f"{self.name}[{k!r}]" if self.named and type(k) is str else f"a value of {self.name}"
            said = said or replace(self.value, name=named).fault(v)
            if said:
                return said
        return None


@dataclass(frozen=True)
class Kept(Spec):
    """An object that stays in the worker: what a constructor returns."""

    cls: str = ""

    def kind(self) -> str:
        return f"a {self.cls} object"

    def plural(self) -> str:
        return f"{self.cls} objects"

    def fault(self, got) -> str | None:
        return None if isinstance(got, Remote) else self._wrong_type(got)


# ---- the declarations --------------------------------------------------------------------------------------------


@dataclass
class Made:
    """An object of the student's that this case constructed: its class, its constructor's arguments by name, and the
    dtype of the weights the grader gave it (None until it gave any)."""

    cls: str
    args: dict
    dtype: str | None = None


FUNCTIONS: dict[tuple[str, str], Callable[..., Spec]] = {}  # (module, function) -> its declaration
METHODS: dict[tuple[str, str], Callable[..., Spec]] = {}  # (class, method) -> its declaration, which takes the Made first
ATTRIBUTES: dict[tuple[str, str], Spec] = {}  # (class, attribute) -> what it holds
CLASSES: dict[tuple[str, str], inspect.Signature] = {}  # (module, class) -> its constructor's parameters


def function(module: str):
    def register(declaration):
        FUNCTIONS[module, declaration.__name__] = declaration
        return declaration
    return register


def method(cls: str, name: str = "forward"):
    def register(declaration):
        METHODS[cls, name] = declaration
        return declaration
    return register


def constructor(module: str):
    def register(declaration):
        CLASSES[module, declaration.__name__] = inspect.signature(declaration)
        return declaration
    return register


def size(x, axis: int) -> int | None:
    """A size of an input the parent knows (a tensor or array it sent), None for one in the worker or None itself."""
    return int(x.shape[axis]) if is_array(x) and -x.ndim <= axis < x.ndim else None


def follows(*inputs, model: Made | None = None) -> Dtype | None:
    """The dtype of the floating inputs (and of the weights the grader gave the model) when they agree and are all
    known; None when one stays in the worker or they differ: then nothing is said of the dtype."""
    found = set()
    for x in inputs:
        if is_array(x):
            if x.dtype.kind == "f" if type(x) is np.ndarray else x.is_floating_point():
                found.add(_dtype(x))
        elif not (x is None or type(x) in (bool, int, float)):
            return None
    if model is not None and model.dtype is not None:
        rule = f"the dtype must follow the model's weights, which the grader gave in {model.dtype}"
        return Dtype(model.dtype, rule, "the weights'") if found <= {model.dtype} else None
    return Dtype(found.pop(), INPUTS) if len(found) == 1 else None


def tensor(name: str, *axes: tuple[str, int | None], dtype: Dtype | None = None, **more) -> Tensor:
    return Tensor(name, axes=axes, dtype=dtype, **more)


def array(name: str, *axes: tuple[str, int | None], dtype: Dtype | None = None, **more) -> Tensor:
    return Tensor(name, axes=axes, dtype=dtype, numpy=True, **more)


def _model(x) -> Made | None:
    return x if isinstance(x, Made) else None


# ngram.py ------------------------------------------------------------------------------------------------------------


WORD = Text(noun="words")


@function("ngram")
def pad_sentence(tokens, n):
    return Many("the padded sentence", item=WORD)


@function("ngram")
def count_ngrams(sentences, n):
    return Dict("the counts", key=Many("an n-gram", item=WORD, length=n if type(n) is int else None, container="tuple"), value=Number())


@constructor("ngram")
def NGramLM(n, k=0.0):  # noqa: N802  (named as the API's class)
    pass


ATTRIBUTES["NGramLM", "vocab"] = Many("the vocabulary", item=WORD, container="set")


@method("NGramLM", "prob")
def _prob(lm, word, context):
    return Number("the probability")


@method("NGramLM", "next_token_distribution")
def _distribution(lm, context):
    return Dict("the distribution", key=WORD, value=Number())


@method("NGramLM", "sentence_logprob")
def _sentence_logprob(lm, tokens):
    factors = len(tokens) + 1 if isinstance(tokens, list | tuple) else None

    def likely(got) -> str | None:
        if isinstance(got, list | tuple) and len(got) == factors and all(Number().fault(g) is None for g in got):
            return f"These are the log-probabilities of its {factors} factors, the words and EOS: sentence_logprob is their sum"
        return None

    return Number("the log-probability", likely=likely)


@method("NGramLM", "perplexity")
def _perplexity(lm, sentences):
    return Number("the perplexity")


@method("NGramLM", "sample")
def _sample(lm, rng, max_len=50):
    return Many("the sentence", item=WORD)


# backprop.py -----------------------------------------------------------------------------------------------------------


@function("backprop")
def softmax(z):
    return Tensor("the probabilities", axes=_like(z), dtype=follows(z), numpy=True, about="the shape of z")


@function("backprop")
def cross_entropy(logits, targets):
    return Number("the loss")


@function("backprop")
def cross_entropy_backward(logits, targets):
    return array("dlogits", ("N", size(logits, 0)), ("V", size(logits, 1)), dtype=follows(logits))


@function("backprop")
def linear_forward(x, W, b):
    return array("the output", ("N", size(x, 0)), ("H", size(W, 0)), dtype=follows(x, W, b))


KEPT_BATCH = f"{LIKELY}db keeps a batch axis of size 1 (keepdims=True, or ones((1, N)) @ dout): b has shape (H,), and so has db"


@function("backprop")
def linear_backward(dout, x, W):
    N, D, H, dtype = size(x, 0), size(x, 1), size(W, 0), follows(dout, x, W)
    summed = lambda got: KEPT_BATCH if type(got) is np.ndarray and got.shape == (1, H) else None  # noqa: E731  (db sums over N)
    return Items(items=(array("dx", ("N", N), ("D", D), dtype=dtype), array("dW", ("H", H), ("D", D), dtype=dtype),
                        array("db", ("H", H), dtype=dtype, likely=summed)))


@function("backprop")
def tanh_backward(dout, out):
    return Tensor("the gradient", axes=_like(dout), dtype=follows(dout, out), numpy=True, about="the shape of dout")


def _like(x) -> Axes | None:
    """The shape of an input, each size its own name."""
    return tuple((str(d), d) for d in x.shape) if type(x) is np.ndarray else None


def _params(params) -> tuple:
    return tuple(params.get(k) for k in ("E", "W", "b", "U", "c")) if isinstance(params, dict) else (params,)


@function("backprop")
def ffnn_lm_forward(contexts, params):
    E = params.get("E") if isinstance(params, dict) else None
    return Items(items=(array("logits", ("N", size(contexts, 0)), ("V", size(E, 0)), dtype=follows(*_params(params))), None))


@function("backprop")
def ffnn_lm_backward(dlogits, cache):
    return Dict("grads", key=Text(), value=Tensor(dtype=follows(dlogits), numpy=True), named=True)


@function("backprop")
def ffnn_lm_loss_and_grads(contexts, targets, params):
    grads = Dict("grads", key=Text(), value=Tensor(dtype=follows(*_params(params)), numpy=True), named=True)
    return Items(items=(Number("loss"), grads))


# rnn.py -----------------------------------------------------------------------------------------------------------------

COLUMNS = ("h_t has shape (H, B): the lecture's column vectors (W_xh @ x_t.T); here rows are examples, x_t @ W_xh.T")


@function("rnn")
def rnn_step(x_t, h_prev, W_xh, W_hh, b_h):
    B, H = size(x_t, 0), size(h_prev, 1)
    return tensor("h_t", ("B", B), ("H", H), dtype=follows(x_t, h_prev, W_xh, W_hh, b_h),
                  likely=lambda got: f"{LIKELY}{COLUMNS}" if B != H and tuple(got.shape) == (H, B) else None)


@function("rnn")
def rnn_forward(x, h0, W_xh, W_hh, b_h):
    B, T, H, dtype = size(x, 0), size(x, 1), size(h0, 1), follows(x, h0, W_xh, W_hh, b_h)
    return Items(items=(tensor("hs", ("B", B), ("T", T), ("H", H), dtype=dtype), tensor("h_last", ("B", B), ("H", H), dtype=dtype)))


@constructor("rnn")
def RNNLM(vocab_size, d_embed, d_hidden):  # noqa: N802
    pass


@method("RNNLM")
def _rnn_lm(model, ids, h0=None):
    B, T, dtype = size(ids, 0), size(ids, 1), follows(h0, model=model)
    V, H = model.args.get("vocab_size"), model.args.get("d_hidden")
    return Items(items=(tensor("logits", ("B", B), ("T", T), ("V", V), dtype=dtype), tensor("h_last", ("B", B), ("H", H), dtype=dtype)))


@function("rnn")
def rnn_lm_loss(model, ids):
    return tensor("the loss", dtype=follows(model=_model(model)))


# lstm.py ---------------------------------------------------------------------------------------------------------------


@function("lstm")
def lstm_step(x_t, h_prev, c_prev, W_ih, W_hh, b):
    B, H, dtype = size(x_t, 0), size(h_prev, 1), follows(x_t, h_prev, c_prev, W_ih, W_hh, b)
    return Items(items=(tensor("h_t", ("B", B), ("H", H), dtype=dtype), tensor("c_t", ("B", B), ("H", H), dtype=dtype)))


@function("lstm")
def lstm_forward(x, h0, c0, W_ih, W_hh, b):
    B, T, H, dtype = size(x, 0), size(x, 1), size(h0, 1), follows(x, h0, c0, W_ih, W_hh, b)
    final = Items(items=(tensor("h_last", ("B", B), ("H", H), dtype=dtype), tensor("c_last", ("B", B), ("H", H), dtype=dtype)))
    return Items(items=(tensor("hs", ("B", B), ("T", T), ("H", H), dtype=dtype), final), likely=lambda got: (
        "Return the final states as a pair of their own, (hs, (h_last, c_last)), as torch.nn.LSTM does"
        if isinstance(got, tuple | list) and len(got) == 3 else None))


# attention.py -----------------------------------------------------------------------------------------------------------


@function("attention")
def dot_product_attention(query, keys, values, mask=None):
    B, S, dtype = size(keys, 0), size(keys, 1), follows(query, keys, values)
    return Items(items=(tensor("context", ("B", B), ("Dv", size(values, 2)), dtype=dtype),
                        tensor("weights", ("B", B), ("S", S), dtype=dtype)))


@function("attention")
def scaled_dot_product_attention(Q, K, V, mask=None):
    lead = None if size(Q, 0) is None else tuple(("...", d) for d in Q.shape[:-2])
    Tq, Tk = size(Q, -2), size(K, -2)
    axes = None if lead is None or size(V, -1) is None else (*lead, ("Tq", Tq), ("dv", size(V, -1)))

    def likely(got) -> str | None:
        weights = (*Q.shape[:-2], Tq, Tk) if axes is not None and Tk is not None else None
        if isinstance(got, tuple | list) and len(got) == 2 and is_tensor(got[1]) and tuple(got[1].shape) == weights:
            return "(output, weights) came back, as tutorials return them: return only the output tensor"
        return None

    return Tensor("the output", axes=axes, dtype=follows(Q, K, V), likely=likely)


def _float_mask(got, T: int | None) -> str | None:
    """A float causal mask of the right shape in words: PyTorch's additive 0/-inf form, or 0/1."""
    if not is_tensor(got) or not got.is_floating_point() or tuple(got.shape) != (T, T):
        return None
    if bool(((got == 0) | (got == float("-inf"))).all()):  # 0 where allowed: causal_mask(1) is [[0.]]
        return (f"{LIKELY}an additive float mask (0 where allowed, -inf elsewhere, as nn.Transformer.generate_square_subsequent_mask "
                "builds it): this course's masks are bool, True on and below the diagonal, and attention fills the False "
                "scores with -inf itself")
    return (f"{LIKELY}a 0/1 float mask: torch.ones(T, T) is float32 unless told otherwise; pass dtype=torch.bool (or call .bool()) "
            "so that masked_fill(~mask, ...) can use it")


@function("attention")
def causal_mask(T, device=None):
    n = T if type(T) is int else None
    return tensor("the mask", ("T", n), ("T", n), dtype=Dtype("bool", "True = may attend"), likely=lambda got: _float_mask(got, n))


@function("attention")
def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads, causal=True):
    return tensor("the output", ("B", size(x, 0)), ("T", size(x, 1)), ("d", size(x, 2)), dtype=follows(x, W_q, W_k, W_v, W_o))


@function("attention")
def multi_head_cross_attention(x, memory, W_q, W_k, W_v, W_o, num_heads, memory_mask=None):
    return tensor("the output", ("B", size(x, 0)), ("Tq", size(x, 1)), ("d", size(x, 2)), dtype=follows(x, memory, W_q, W_k, W_v, W_o))


# transformer.py ----------------------------------------------------------------------------------------------------------


@constructor("transformer")
def LayerNorm(d_model, eps=1e-5):  # noqa: N802
    pass


@constructor("transformer")
def FeedForward(d_model, d_ff):  # noqa: N802
    pass


@constructor("transformer")
def MultiHeadSelfAttention(d_model, num_heads, causal=True):  # noqa: N802
    pass


@constructor("transformer")
def TransformerBlock(d_model, num_heads, d_ff, norm_first=True, causal=True):  # noqa: N802
    pass


@constructor("transformer")
def TransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, norm_first=True):  # noqa: N802
    pass


def _same_shape(module, x):
    return tensor("the output", ("B", size(x, 0)), ("T", size(x, 1)), ("d_model", size(x, 2)), dtype=follows(x, model=module))


METHODS.update({(module, "forward"): _same_shape for module in ("LayerNorm", "FeedForward", "MultiHeadSelfAttention", "TransformerBlock")})


@method("TransformerLM")
def _transformer_lm(model, ids):
    return tensor("the logits", ("B", size(ids, 0)), ("T", size(ids, 1)), ("V", model.args.get("vocab_size")), dtype=follows(model=model))


@function("transformer")
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    T0, N = size(prompt, 0), max_new_tokens if type(max_new_tokens) is int else None
    context = model.args.get("context_length") if isinstance(model, Made) else None

    def likely(got) -> str | None:
        said = {(N,): "returns only the new tokens; return the prompt followed by them",
                (context,): "returns the cropped sequence; crop only what goes into the model",
                (1, None if T0 is None or N is None else T0 + N): "returns a batch of one; return a 1-D tensor"}
        return f"{LIKELY}{said[tuple(got.shape)]}" if is_tensor(got) and tuple(got.shape) in said else None

    return tensor("the tokens", ("T0 + max_new_tokens", None if T0 is None or N is None else T0 + N),
                  dtype=Dtype("int64", "token ids are int64"), likely=likely)


# word2vec.py --------------------------------------------------------------------------------------------------------------

INT64 = Dtype("int64", "ids are int64")


@function("word2vec")
def skipgram_pairs(sentences, window):
    def likely(got) -> str | None:
        if isinstance(got, list | tuple) and all(isinstance(p, list | tuple) and len(p) == 2 for p in got):
            return "Return np.array(pairs, dtype=np.int64).reshape(-1, 2): an int64 array, (0, 2) when there is no pair"
        if type(got) is np.ndarray and got.shape == (0,):
            return "With no pair, np.array([]) has shape (0,) (and dtype float64): .reshape(-1, 2) gives (0, 2)"
        return None

    return array("the pairs", ("P", None), ("2", 2), dtype=INT64, likely=likely)


@function("word2vec")
def noise_distribution(counts, power=0.75):
    return array("the distribution", ("V", size(counts, 0)), dtype=Dtype("float64", "probabilities are float64"))


@function("word2vec")
def sample_negatives(noise, shape, rng):
    known = isinstance(shape, tuple | list) and all(type(d) is int for d in shape)
    return Tensor("the draws", axes=tuple((f"shape[{i}]", d) for i, d in enumerate(shape)) if known else None, dtype=INT64, numpy=True)


@function("word2vec")
def sgns_loss(W, C, centers, contexts, negatives):
    return Number("the loss")


@function("word2vec")
def sgns_gradients(W, C, centers, contexts, negatives):
    dtype = follows(W, C)
    return Items(items=(array("dW", ("V", size(W, 0)), ("d", size(W, 1)), dtype=dtype),
                        array("dC", ("V", size(C, 0)), ("d", size(C, 1)), dtype=dtype)))


@function("word2vec")
def sgd_step(W, C, centers, contexts, negatives, lr):
    dtype = follows(W, C)
    return Items(items=(array("W_new", ("V", size(W, 0)), ("d", size(W, 1)), dtype=dtype),
                        array("C_new", ("V", size(C, 0)), ("d", size(C, 1)), dtype=dtype), Number("loss")))


@function("word2vec")
def train(sentences, vocab_size, dim, window, negatives, lr, rng, batch_size=64, max_epochs=50, tol=1e-3):
    f64 = Dtype("float64", "embeddings are float64")
    V, d = (vocab_size, dim) if type(vocab_size) is int and type(dim) is int else (None, None)
    return Items(items=(array("W", ("vocab_size", V), ("dim", d), dtype=f64), array("C", ("vocab_size", V), ("dim", d), dtype=f64),
                        Many("losses", item=Number())))


@function("word2vec")
def cosine_similarities(E, word):
    return array("the similarities", ("V", size(E, 0)), dtype=follows(E))


def _ids(topn) -> Many:
    return Many("the ids", item=Int(), length=topn if type(topn) is int else None)


@function("word2vec")
def most_similar(E, word, topn=5):
    return _ids(topn)


@function("word2vec")
def analogy(E, a, b, c, topn=1):
    return _ids(topn)


# seq2seq.py ---------------------------------------------------------------------------------------------------------------

MASK = Dtype("bool", "the mask is src != PAD, True at the tokens")
TOTAL_LENGTH = (f"{LIKELY}pad_packed_sequence returns only as many positions as the longest source has tokens; pass total_length=S "
                "(src.shape[1]) so that Hs keeps every column")


def _longest(src) -> int | None:
    """The longest source's token count (PAD = 0), where a packed encoder unpacked without total_length stops."""
    return int((src != 0).sum(1).max()) if is_tensor(src) and src.ndim == 2 and src.numel() else None


@function("seq2seq")
def attend(s, Hs, mask):
    B, dtype = size(Hs, 0), follows(s, Hs)
    return Items(items=(tensor("context", ("B", B), ("H", size(Hs, 2)), dtype=dtype),
                        tensor("weights", ("B", B), ("S", size(Hs, 1)), dtype=dtype)))


@constructor("seq2seq")
def Seq2Seq(src_vocab, tgt_vocab, d_emb, d_hidden):  # noqa: N802
    pass


@method("Seq2Seq", "encode")
def _encode(model, src):
    B, S, H, dtype, longest = size(src, 0), size(src, 1), model.args.get("d_hidden"), follows(model=model), _longest(src)
    short = lambda got: TOTAL_LENGTH if longest is not None and longest < S and tuple(got.shape) == (B, longest, H) else None  # noqa: E731
    return Items(items=(tensor("Hs", ("B", B), ("S", S), ("H", H), dtype=dtype, likely=short),
                        tensor("mask", ("B", B), ("S", S), dtype=MASK), tensor("s0", ("B", B), ("H", H), dtype=dtype)))


@method("Seq2Seq", "decode_step")
def _decode_step(model, y_prev, s_prev, Hs, mask):
    B, dtype = size(s_prev, 0), follows(s_prev, Hs, model=model)
    return Items(items=(tensor("logits", ("B", B), ("V", model.args.get("tgt_vocab")), dtype=dtype),
                        tensor("s", ("B", B), ("H", size(s_prev, 1)), dtype=dtype),
                        tensor("weights", ("B", B), ("S", size(Hs, 1)), dtype=dtype)))


@method("Seq2Seq")
def _seq2seq(model, src, tgt_in):
    B, S, T, dtype, longest = size(src, 0), size(src, 1), size(tgt_in, 1), follows(model=model), _longest(src)
    short = lambda got: TOTAL_LENGTH if longest is not None and longest < S and tuple(got.shape) == (B, T, longest) else None  # noqa: E731
    return Items(items=(tensor("logits", ("B", B), ("T", T), ("V", model.args.get("tgt_vocab")), dtype=dtype),
                        tensor("weights", ("B", B), ("T", T), ("S", S), dtype=dtype, likely=short,
                               about="one distribution over the S source positions (the encoder's states) per target step")))


@function("seq2seq")
def seq2seq_loss(model, src, tgt):
    return tensor("the loss", dtype=follows(model=_model(model)))


@function("seq2seq")
def greedy_decode(model, src, max_len):
    return Many("the tokens", item=Many("an example's tokens", item=Int()), length=size(src, 0))


# ---- the check -------------------------------------------------------------------------------------------------------

WEIGHTS = {"double": "float64", "float": "float32"}  # methods that give a module's weights a dtype


class Boundary:
    """One case's check of what the student's code returns: the case's proxy calls it with each call it made (the
    function's path, the arguments as the parent knows them: a value it placed in the worker is that value) and what
    came back. It also keeps what the case's own requests tell of the objects it constructed (their class, their
    constructor's arguments, the dtype of the weights the grader gave them), which their methods' declarations use."""

    def __init__(self):
        self.made: dict[int, Made] = {}  # handle -> what this case constructed there

    def __call__(self, fn: Expr, args: list | None, kwargs: dict | None, result) -> None:
        """`fn` called with `args` and `kwargs` returned `result`; args None: `fn` is an attribute, fetched."""
        self.each(fn, args, kwargs, [result])

    def each(self, fn: Expr, args: list | None, kwargs: dict | None, results: list) -> None:
        """The same call made once per result (a map of thousands of draws): its declaration is read once."""
        if args is None:
            for result in results:
                self._fetched(fn, result)
            return
        args, kwargs = [self._known(a) for a in args], {k: self._known(v) for k, v in kwargs.items()}
        if isinstance(fn.base, str):
            if len(fn.attrs) != 1:
                return
            key = (fn.base, fn.attrs[0])
            if key in CLASSES:
                for result in results:
                    self._constructed(key, args, kwargs, result)
                return
            declared, name, first = FUNCTIONS.get(key), fn.attrs[0], ()
        else:
            made = self.made.get(fn.base.id) if isinstance(fn.base, Handle) else None
            if made is None or len(fn.attrs) > 1:
                return
            called = fn.attrs[0] if fn.attrs else "forward"
            if called in WEIGHTS or called == "load_state_dict":
                made.dtype = WEIGHTS.get(called) or _state_dtype(args[0] if args else None) or made.dtype
                return
            declared, name, first = METHODS.get((made.cls, called)), f"{made.cls}.{called}", (made,)
        if declared is None:
            return
        try:
            bound = _signature(declared).bind(*first, *args, **kwargs)
        except TypeError:  # a call its declaration does not know (the grader's own, then): nothing to say about it
            return
        spec = declared(*bound.args, **bound.kwargs)
        for result in results:
            if fault := spec.fault(result):
                raise Malformed(f"{name}: {fault}.")

    def _fetched(self, attribute: Expr, result) -> None:
        made = self.made.get(attribute.base.id) if isinstance(attribute.base, Handle) else None
        declared = ATTRIBUTES.get((made.cls, attribute.attrs[0])) if made is not None and len(attribute.attrs) == 1 else None
        fault = declared.fault(result) if declared is not None else None
        if fault:
            raise Malformed(f"{made.cls}.{attribute.attrs[0]}: {fault}.")

    def _known(self, value):
        """A kept object this case constructed, as what is known of it."""
        if isinstance(value, Remote) and isinstance(value._expr.base, Handle) and not value._expr.attrs:
            return self.made.get(value._expr.base.id, value)
        return value

    def _constructed(self, key: tuple[str, str], args: list, kwargs: dict, result) -> None:
        if not isinstance(result, Remote) or not isinstance(result._expr.base, Handle):
            raise Malformed(f"{key[1]}(...): {Kept(cls=key[1]).fault(result)}.")
        try:
            bound = CLASSES[key].bind(*args, **kwargs)
        except TypeError:
            return
        bound.apply_defaults()
        self.made[result._expr.base.id] = Made(key[1], dict(bound.arguments))


_signature = functools.cache(inspect.signature)  # a sampling check validates thousands of calls of one function


def _state_dtype(state) -> str | None:
    """The one floating dtype of a state dict the grader loads, or None."""
    if not isinstance(state, dict):
        return None
    found = {_dtype(v) for v in state.values() if is_tensor(v) and v.is_floating_point()}
    return found.pop() if len(found) == 1 else None
