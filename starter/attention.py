# Starter code generated from the reference solution by `autograder release`.
# Replace each `raise NotImplementedError` with your implementation.
"""Components `attention` and `causal_mask`: attention, from one query to many heads.

Conventions:
- Batch first: a sequence is (B, T, ...). Leading "..." dimensions are batch
  dimensions of any number (heads are one of them).
- A weight W of shape (d_out, d_in) maps x to x @ W.T (PyTorch's layout).
- Boolean masks: True = this key may be attended to, False = it is ignored
  and its attention weight is exactly 0. Masks broadcast like any tensor.
- A query whose keys are ALL masked attends to nothing: its attention weights
  are all 0 and its output (context) is the zero vector. Never NaN.
- Every function returns tensors of the dtype and device of its inputs
  (float32 and float64, CPU and CUDA) and never modifies its inputs in place.
- No dropout; autograd is allowed and expected.
Write attention yourself with matmuls, masked_fill and torch.softmax.

What you may not use here (written by `autograder release` from grading.yaml):
Forbidden in components `attention` and `causal_mask`:

- from `torch.nn.functional`: `scaled_dot_product_attention` and
  `multi_head_attention_forward`
- from `torch.nn`: `MultiheadAttention`
- from `torch.nn.attention.flex_attention`: `flex_attention`
- from `torch.ao.nn.quantizable`: `MultiheadAttention`
- the operators `aten::scaled_dot_product_attention`,
  `aten::_scaled_dot_product_attention_math`,
  `aten::_scaled_dot_product_attention_math_for_mps`,
  `aten::_scaled_dot_product_flash_attention`,
  `aten::_scaled_dot_product_flash_attention_for_cpu`,
  `aten::_scaled_dot_product_efficient_attention`,
  `aten::_scaled_dot_product_cudnn_attention`,
  `aten::_scaled_dot_product_fused_attention_overrideable`,
  `aten::_flash_attention_forward`, `aten::_efficient_attention_forward`,
  `aten::_cudnn_attention_forward`, `aten::_native_multi_head_attention`,
  `aten::_triton_multi_head_attention`, `aten::_triton_scaled_dot_attention`,
  `aten::_transformer_encoder_layer_fwd`, `aten::_masked_softmax`,
  `aten::_safe_softmax` and `higher_order::flex_attention`, however your code
  reaches them: a torch function that runs one,
  `torch.ops.aten.scaled_dot_product_attention` and the like, an operator
  fetched by its name (`"aten::scaled_dot_product_attention"`), TorchScript or
  `torch.compile`; and PyTorch's own Python implementations of them (in
  `torch._decomp` and `torch._refs`)

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

import math

import torch


def dot_product_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder-decoder (Bahdanau/Luong-style) attention of one query per example.

    query: (B, H) the decoder state; keys: (B, S, H) the encoder states;
    values: (B, S, Dv), often the encoder states again; mask: (B, S) bool or
    None (None = every position may be attended to).
    The score of source position j is the plain dot product
        score_j = query . keys_j          (no scaling),
    positions where mask is False are ignored (weight exactly 0), the weights
    are the softmax of the scores over the S positions, and the context is the
    weighted sum of the values.
    A row whose positions are all masked (padding queries exist in a padded
    batch) gets all weights 0 and a zero context, with no NaN in values or
    gradients. Common masking code gets this wrong: masked_fill with -inf
    then softmax gives NaN (0/0) for such a row, and a large negative
    constant (-1e9) gives uniform weights, the average of the values.
    Returns (context, weights): context: (B, Dv), weights: (B, S), each
    unmasked row of weights summing to 1.
    """
    raise NotImplementedError("dot_product_attention is not implemented yet")


def scaled_dot_product_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Scaled dot-product attention, softmax(Q K^T / sqrt(dk)) V.

    Q: (..., Tq, dk) queries; K: (..., Tk, dk) keys; V: (..., Tk, dv) values,
    with the same leading batch dimensions "..." (any number, possibly none);
    mask: a bool tensor broadcastable to (..., Tq, Tk), or None for no mask.
    mask[..., i, j] True = query i may attend to key j; False = the weight of
    key j for query i is exactly 0 (not merely small). Each query's weights
    over the keys it may attend to sum to 1; a query with no allowed key gets
    all weights 0 and a zero output row (never NaN, in values or gradients).
    Returns the outputs: (..., Tq, dv).
    """
    raise NotImplementedError("scaled_dot_product_attention is not implemented yet")


def causal_mask(T: int, device=None) -> torch.Tensor:
    """The causal (autoregressive) attention mask for a sequence of length T.

    Returns a (T, T) bool tensor on `device` (None = the default device) with
    rows indexing query positions and columns key positions: entry [i, j] is
    True when position i may attend to position j, that is when j <= i
    (on and below the diagonal), and False for every later position.
    """
    raise NotImplementedError("causal_mask is not implemented yet")


def multi_head_self_attention(
    x: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    num_heads: int,
    causal: bool = True,
) -> torch.Tensor:
    """Multi-head self-attention over a batch of sequences.

    x: (B, T, d); W_q, W_k, W_v, W_o: (d, d); num_heads divides d, and each
    head has dk = d // num_heads dimensions.
    Queries, keys and values are Q = x @ W_q.T, K = x @ W_k.T, V = x @ W_v.T,
    each (B, T, d) and split into heads: head h owns columns h*dk:(h+1)*dk
    (reshape to (B, T, num_heads, dk), then make the heads a batch dimension,
    (B, num_heads, T, dk)). Every head runs scaled dot-product attention on
    its own slice; with causal=True position i attends only to positions
    j <= i, with causal=False to every position. The head outputs are
    concatenated in head order back to (B, T, d) and mapped by W_o:
    output = concat @ W_o.T.
    Returns (B, T, d).
    """
    raise NotImplementedError("multi_head_self_attention is not implemented yet")


def multi_head_cross_attention(
    x: torch.Tensor,
    memory: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    num_heads: int,
    memory_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Multi-head cross-attention: queries from x, keys and values from memory.

    x: (B, Tq, d) e.g. decoder states; memory: (B, Tk, d) e.g. encoder
    outputs; W_q, W_k, W_v, W_o: (d, d); num_heads divides d.
    Q = x @ W_q.T, K = memory @ W_k.T, V = memory @ W_v.T, split into heads
    exactly as in `multi_head_self_attention`, concatenated in head order and
    mapped by W_o. No causal mask. memory_mask: (B, Tk) bool or None;
    memory_mask[b, j] False means memory position j of example b (padding,
    say) is ignored by every query of every head of that example.
    Returns (B, Tq, d).
    """
    raise NotImplementedError("multi_head_cross_attention is not implemented yet")
