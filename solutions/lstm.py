"""Component `lstm`: a long short-term memory (LSTM) layer.

Conventions:
- Batch first: a sequence is (B, T, ...), one time step is (B, ...).
- A weight W of shape (d_out, d_in) maps x to x @ W.T (PyTorch's layout).
- The 4H rows of W_ih, W_hh and b hold the four gates in PyTorch's order
  i, f, g, o (input, forget, cell candidate, output), H rows each, so the
  weights of a torch.nn.LSTM layer can be used as they are. The lecture
  writes i, f, o, g: do not follow it here.
- Every function returns tensors of the dtype and device of its inputs
  (float32 and float64, CPU and CUDA) and never modifies its inputs in place.
Write the cell yourself with matmuls, torch.sigmoid and torch.tanh.

What you may not use here (written by `autograder release` from grading.yaml):
Forbidden in this component:

- from `torch.nn`: `RNN`, `RNNCell`, `GRU`, `GRUCell`, `LSTM` and `LSTMCell`
- from `torch.ao.nn.quantizable`: `LSTM` and `LSTMCell`
- from `torch.ao.nn.quantized.dynamic`: `LSTM`
- the operators `aten::rnn_tanh`, `aten::rnn_relu`, `aten::gru`, `aten::lstm`,
  `aten::rnn_tanh_cell`, `aten::rnn_relu_cell`, `aten::gru_cell`,
  `aten::lstm_cell`, `aten::_thnn_fused_lstm_cell`,
  `aten::_thnn_fused_gru_cell`, `aten::_cudnn_rnn`, `aten::miopen_rnn`,
  `aten::mkldnn_rnn_layer`, `aten::_lstm_mps`, `aten::quantized_lstm`,
  `aten::quantized_gru`, `aten::quantized_lstm_cell`,
  `aten::quantized_gru_cell`, `aten::quantized_rnn_tanh_cell`,
  `aten::quantized_rnn_relu_cell`, `quantized::quantized_lstm_cell_dynamic`,
  `quantized::quantized_gru_cell_dynamic`,
  `quantized::quantized_rnn_tanh_cell_dynamic` and
  `quantized::quantized_rnn_relu_cell_dynamic`, however your code reaches them:
  a torch function that runs one, `torch.ops.aten.rnn_tanh` and the like, an
  operator fetched by its name (`"aten::rnn_tanh"`), TorchScript or
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

import torch


def lstm_step(
    x_t: torch.Tensor,
    h_prev: torch.Tensor,
    c_prev: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One time step of an LSTM cell.

    x_t: (B, I) the inputs at this step; h_prev, c_prev: (B, H) the previous
    hidden and cell states; W_ih: (4H, I); W_hh: (4H, H); b: (4H,).
    The pre-activations gates = x_t @ W_ih.T + h_prev @ W_hh.T + b, (B, 4H),
    split into four (B, H) blocks along the last axis, in the order
    i, f, g, o (columns 0:H, H:2H, 2H:3H, 3H:4H). Then
        i, f, o = sigmoid of their blocks,   g = tanh of its block,
        c_t = f * c_prev + i * g,            h_t = o * tanh(c_t).
    Returns (h_t, c_t), both (B, H).
    """
    # BEGIN SOLUTION
    gates = x_t @ W_ih.T + h_prev @ W_hh.T + b  # (B, 4H)
    i, f, g, o = gates.chunk(4, dim=-1)  # 4 x (B, H), PyTorch's order
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c_t = f * c_prev + i * g  # (B, H)
    h_t = o * torch.tanh(c_t)  # (B, H)
    return h_t, c_t
    # END SOLUTION


def lstm_forward(
    x: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b: torch.Tensor,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run the LSTM over a whole sequence: the cell of `lstm_step`, once per time step.

    x: (B, T, I) the inputs, T >= 1; h0, c0: (B, H) the initial hidden and
    cell states; W_ih, W_hh, b as in `lstm_step`.
    Returns (hs, (h_last, c_last)): hs: (B, T, H) with hs[:, t] the hidden
    state after reading x[:, t] (h0 itself is not included); h_last, c_last:
    (B, H) the hidden and cell states after the last step. This is what
    torch.nn.LSTM(batch_first=True) returns, without its leading layer axis.
    Loop over time in Python; gradients must flow back through every step.
    """
    # BEGIN SOLUTION
    # The input term x_t @ W_ih.T + b of lstm_step does not depend on h, so it is
    # computed for every step at once, one matmul before the loop instead of T
    # small ones in it; only h @ W_hh.T has to wait for the previous step.
    x_proj = x @ W_ih.T + b  # (B, T, 4H)
    h, c = h0, c0  # (B, H), (B, H)
    hs = []
    for x_proj_t in x_proj.unbind(1):  # T x (B, 4H)
        gates = x_proj_t + h @ W_hh.T  # (B, 4H), as in lstm_step
        i, f, g, o = gates.chunk(4, dim=-1)  # 4 x (B, H), i, f, g, o as in lstm_step
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # (B, H)
        h = torch.sigmoid(o) * torch.tanh(c)  # (B, H)
        hs.append(h)
    return torch.stack(hs, dim=1), (h, c)  # (B, T, H), ((B, H), (B, H))
    # END SOLUTION
