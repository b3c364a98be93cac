# Starter code generated from the reference solution by `autograder release`.
# Replace each `raise NotImplementedError` with your implementation.
"""Component `backprop`: a feed-forward neural LM with every gradient by hand.

NumPy only: every gradient is yours to derive.
Conventions:
- Batch first. A weight W of shape (d_out, d_in) maps x to x @ W.T (PyTorch's layout).
- Every function returns arrays of the dtype of its float inputs (float32 in,
  float32 out; float64 in, float64 out) and never modifies its inputs in place.

What you may not use here (written by `autograder release` from grading.yaml):
Forbidden in this component:

- importing `torch`, `jax`, `tensorflow` or `autograd`, or a module inside one
  of them

A forbidden call that your code makes while it is graded fails every case of
the component, with the call and its line in the feedback, however your code
reaches it: by an alias, through another module that holds it, with `getattr`,
or by creating or subclassing a forbidden class. So does any of your code that
runs a forbidden operator, whatever route reaches it, and importing a forbidden
module. A forbidden name in code that never runs (a call in a branch the cases
never take, an import in a function nothing calls) costs nothing: the grader
reports it, with its line, and flags it for course staff to review.

Your files, and every file of yours they import, may not use the interpreter's
back doors, which no solution needs. The grader reads your files before running
any of them and refuses a file that uses one, even in code that would never
run: every case of the component fails, and the feedback names the line. An
attribute counts in any form: `x.name`, `getattr(x, 'name')`, `from x import
name`, a `case C(name=...)` pattern. Refused:

- these names, as a module (imported in any form, also inside a dotted name) or
  as an attribute (`np.ctypeslib`): `as_strided`, `bdb`, `builtins`,
  `cloudpickle`, `codeop`, `copyreg`, `ctypes`, `ctypeslib`, `dill`, `gc`,
  `importlib`, `inspect`, `marshal`, `mock`, `pdb`, `pickle`, `pkgutil`,
  `pydoc` and `runpy`
- importing `audit`, `autograder`, `cProfile`, `code`, `doctest`,
  `forbidden_ops`, `guard`, `profile`, `rlcompleter`, `seccomp`, `shelve`,
  `site`, `timeit`, `trace`, `walls`, `wire`, `worker` or `zipimport`, or any
  module whose name starts with `_` (`_ctypes`, `__main__`; `from __future__`
  is fine)
- the built-ins `__import__`, `breakpoint`, `compile`, `eval`, `exec`,
  `globals`, `locals` and `vars`, and `__builtins__`, wherever they are named,
  called or not
- `getattr`, `setattr`, `delattr`, `hasattr`, `attrgetter` and `methodcaller`,
  except in a call whose attribute name is a string literal naming nothing
  listed here (`getattr(self, 'weight', None)` is fine; `g = getattr` and a
  computed name are not)
- the frame and traceback attributes `ag_frame`, `cr_frame`, `f_back`,
  `f_builtins`, `f_code`, `f_globals`, `f_locals`, `gi_frame`, `tb_frame`,
  `tb_next`, `walk_stack` and `walk_tb`
- the attributes `ForwardRef`, `_current_frames`, `_getframe`, `addaudithook`,
  `currentframe`, `dictConfig`, `fileConfig`, `get_field`, `get_type_hints`,
  `meta_path`, `path_hooks`, `path_importer_cache`, `resolve_name`,
  `setprofile` and `settrace`, on any object: they import, read or run what a
  string names, or reach the import machinery and the frames
- on `sys`: `modules` and `monitoring`, and every name that starts with `_`
  (`sys._getframe`); and `sys` itself, under any name (`os.sys`,
  `threading._sys`), other than through one of its attributes
  (`sys.float_info.epsilon` is fine, `s = sys` is not)
- dunder attributes (`__name__`-style) other than `__call__`, `__class__`,
  `__doc__`, `__getitem__`, `__init__`, `__len__`, `__module__`, `__name__`,
  `__qualname__`, `__repr__`, `__str__` and `__version__`
- any of these reached while your code runs, however it gets there (a string
  run as code, a pickle loaded, a file written while grading, a file of yours
  that a library imports by name): the grader refuses it where it runs, and the
  case fails even if your code catches the error; every file of yours is read,
  and one it refuses cannot be imported
- a file of yours named like a module of Python's standard library or an
  installed package (`secrets.py`, `numpy.py`): `import` finds that module
  first, so the file is left out (name your helper files otherwise)
- starting another program (`subprocess`, `os.system`, `os.exec...`): a fresh
  interpreter would run code the grader never read; forking a copy of your own
  process is fine
"""

from __future__ import annotations

import numpy as np


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax along the last axis.

    z: (..., V) float array. Returns an array of the same shape and dtype whose
    rows (along the last axis) are non-negative and sum to 1. Must stay exact
    and finite for entries as large as |z| ~ 1e4 (no overflow, no NaN).
    """
    raise NotImplementedError("softmax is not implemented yet")


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean negative log-likelihood of the targets under softmax(logits).

    logits: (N, V) float; targets: (N,) int in [0, V).
    Returns (1/N) * sum over n of -log softmax(logits[n])[targets[n]] as a
    Python float. Must stay finite for |logits| ~ 1e4.
    """
    raise NotImplementedError("cross_entropy is not implemented yet")


def cross_entropy_backward(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Gradient of `cross_entropy(logits, targets)` (the mean) w.r.t. logits.

    logits: (N, V) float; targets: (N,) int. Returns dlogits: (N, V), same dtype
    as logits.
    """
    raise NotImplementedError("cross_entropy_backward is not implemented yet")


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Affine layer: x (N, D), W (H, D), b (H,) -> out (N, H) = x @ W.T + b."""
    raise NotImplementedError("linear_forward is not implemented yet")


def linear_backward(
    dout: np.ndarray, x: np.ndarray, W: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward pass of `linear_forward`.

    dout: (N, H) upstream gradient dL/dout; x: (N, D) and W: (H, D) as in the
    forward pass. Returns (dx, dW, db) = (dL/dx, dL/dW, dL/db) with shapes
    (N, D), (H, D), (H,).
    """
    raise NotImplementedError("linear_backward is not implemented yet")


def tanh_backward(dout: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Backward pass of out = tanh(a), given the output (not the input a).

    dout: upstream gradient dL/dout; out: tanh(a); both of the same shape.
    Returns dL/da, same shape.
    """
    raise NotImplementedError("tanh_backward is not implemented yet")


def ffnn_lm_forward(contexts: np.ndarray, params: dict[str, np.ndarray]):
    """Forward pass of the feed-forward LM of Bengio et al. (2003).

    contexts: (N, n-1) int, the ids of the n-1 previous tokens of each example.
    params: E (V, d), W (H, (n-1)*d), b (H,), U (V, H), c (V,).
        e = concat(E[contexts[:, 0]], ..., E[contexts[:, n-2]])   (N, (n-1)*d)
        h = tanh(e @ W.T + b)                                       (N, H)
        logits = h @ U.T + c                                        (N, V)
    Returns (logits, cache). The cache holds whatever `ffnn_lm_backward` needs
    (your choice); it is only ever passed back to your `ffnn_lm_backward`.
    """
    raise NotImplementedError("ffnn_lm_forward is not implemented yet")


def ffnn_lm_backward(dlogits: np.ndarray, cache) -> dict[str, np.ndarray]:
    """Backward pass of `ffnn_lm_forward`.

    dlogits: (N, V) upstream gradient dL/dlogits; cache: as returned by
    `ffnn_lm_forward`. Returns a dict with the same keys, shapes and dtype as
    params (E, W, b, U, c), each the gradient of L w.r.t. that parameter. The
    gradient of E sums the contributions of every occurrence of an id in
    contexts (an id may repeat across rows and across positions).
    """
    raise NotImplementedError("ffnn_lm_backward is not implemented yet")


def ffnn_lm_loss_and_grads(
    contexts: np.ndarray, targets: np.ndarray, params: dict[str, np.ndarray]
) -> tuple[float, dict[str, np.ndarray]]:
    """Mean cross-entropy of the feed-forward LM and its gradients.

    contexts: (N, n-1) int; targets: (N,) int, the id of the token that follows
    each context; params as in `ffnn_lm_forward`. Returns (loss, grads): loss a
    Python float, grads a dict like params holding d loss / d parameter.
    """
    raise NotImplementedError("ffnn_lm_loss_and_grads is not implemented yet")
