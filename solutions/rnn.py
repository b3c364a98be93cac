"""Component `rnn`: an Elman recurrent network and a recurrent language model.

Conventions:
- Batch first: a sequence is (B, T, ...), one time step is (B, ...).
- A weight W of shape (d_out, d_in) maps x to x @ W.T (PyTorch's layout).
- Every function returns tensors of the dtype and device of its inputs
  (float32 and float64, CPU and CUDA) and never modifies its inputs in place.
- Autograd is allowed and expected: build the forward pass from tensor
  operations and gradients come for free.
Write the recurrence yourself with matmuls and torch.tanh.

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
import torch.nn as nn
import torch.nn.functional as F


def rnn_step(
    x_t: torch.Tensor,
    h_prev: torch.Tensor,
    W_xh: torch.Tensor,
    W_hh: torch.Tensor,
    b_h: torch.Tensor,
) -> torch.Tensor:
    """One time step of an Elman RNN.

    x_t: (B, I) the inputs at this step; h_prev: (B, H) the previous hidden
    state; W_xh: (H, I); W_hh: (H, H); b_h: (H,).
    Returns the new hidden state h_t: (B, H),
        h_t = tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h).
    """
    # BEGIN SOLUTION
    return torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h)  # (B, H)
    # END SOLUTION


def rnn_forward(
    x: torch.Tensor,
    h0: torch.Tensor,
    W_xh: torch.Tensor,
    W_hh: torch.Tensor,
    b_h: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the Elman RNN over a whole sequence, one `rnn_step` per time step.

    x: (B, T, I) the inputs, T >= 1; h0: (B, H) the initial hidden state;
    W_xh, W_hh, b_h as in `rnn_step`.
    Returns (hs, h_last): hs: (B, T, H) with hs[:, t] the hidden state after
    reading x[:, t] (h0 itself is not included), and h_last: (B, H), the
    hidden state after the last step (equal to hs[:, -1]).
    Loop over time in Python; gradients must flow back through every step.
    """
    # BEGIN SOLUTION
    h = h0  # (B, H)
    hs = []
    for t in range(x.shape[1]):
        h = rnn_step(x[:, t], h, W_xh, W_hh, b_h)  # (B, H)
        hs.append(h)
    return torch.stack(hs, dim=1), h  # (B, T, H), (B, H)
    # END SOLUTION


class RNNLM(nn.Module):
    """A recurrent language model: embedding -> Elman RNN -> output layer.

    With V = vocab_size, E = d_embed, H = d_hidden, the parameters are, by
    exactly these names (the grader loads its own weights with
    load_state_dict(strict=True), so state_dict() must hold these keys only):
        embedding.weight  (V, E)   self.embedding = nn.Embedding(V, E)
        W_xh              (H, E)   nn.Parameter, input-to-hidden
        W_hh              (H, H)   nn.Parameter, hidden-to-hidden
        b_h               (H,)     nn.Parameter, hidden bias
        W_hy              (V, H)   nn.Parameter, hidden-to-output
        b_y               (V,)     nn.Parameter, output bias
    For ids (B, T): each id is embedded (B, T, E), the embeddings run through
    the Elman RNN of `rnn_forward` with W_xh, W_hh, b_h (hidden states
    hs: (B, T, H)), and the output layer maps each hidden state to
    logits = hs @ W_hy.T + b_y: (B, T, V). logits[:, t] scores the token that
    comes after ids[:, t], having read ids[:, :t + 1].
    """

    def __init__(self, vocab_size: int, d_embed: int, d_hidden: int):
        """Create the parameters listed in the class docstring.

        Any sensible random initialisation will do (for instance
        uniform(-1/sqrt(H), 1/sqrt(H)) for the RNN and output weights and
        biases, as PyTorch does); the grader loads its own weights.
        """
        super().__init__()
        # BEGIN SOLUTION
        V, E, H = vocab_size, d_embed, d_hidden
        self.embedding = nn.Embedding(V, E)
        self.W_xh = nn.Parameter(torch.empty(H, E))
        self.W_hh = nn.Parameter(torch.empty(H, H))
        self.b_h = nn.Parameter(torch.empty(H))
        self.W_hy = nn.Parameter(torch.empty(V, H))
        self.b_y = nn.Parameter(torch.empty(V))
        bound = H**-0.5
        for p in (self.W_xh, self.W_hh, self.b_h, self.W_hy, self.b_y):
            nn.init.uniform_(p, -bound, bound)
        # END SOLUTION

    def forward(
        self, ids: torch.Tensor, h0: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits for every position of a batch of token sequences.

        ids: (B, T) int64 token ids in [0, V), T >= 1; h0: (B, H) initial
        hidden state, or None for zeros of the parameters' dtype and device.
        Returns (logits, h_last): logits: (B, T, V), h_last: (B, H), the hidden
        state after the last position (pass it back as h0 to continue the
        sequence).
        """
        # BEGIN SOLUTION
        B, T = ids.shape
        if h0 is None:
            h0 = torch.zeros(B, self.W_hh.shape[0], dtype=self.W_hh.dtype, device=self.W_hh.device)
        x = self.embedding(ids)  # (B, T, E)
        hs, h_last = rnn_forward(x, h0, self.W_xh, self.W_hh, self.b_h)  # (B, T, H), (B, H)
        logits = hs @ self.W_hy.T + self.b_y  # (B, T, V)
        return logits, h_last
        # END SOLUTION


def rnn_lm_loss(model: RNNLM, ids: torch.Tensor) -> torch.Tensor:
    """Teacher-forced language-modelling loss of `model` on `ids`.

    ids: (B, T) int64, T >= 2. Run the model on the whole batch (h0 = None)
    and return the mean cross-entropy, over all B * (T - 1) predictions, of
    the logits at positions 0 .. T-2 against the tokens at positions 1 .. T-1
    (ids[:, 1:]). Returns a scalar tensor that autograd can backpropagate.
    """
    # BEGIN SOLUTION
    logits, _ = model(ids)  # (B, T, V)
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    # END SOLUTION
