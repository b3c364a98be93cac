"""Component `seq2seq`: an encoder-decoder GRU with dot-product attention.

Conventions:
- Batch first: token ids are (B, S) for sources and (B, T) for targets, int64.
- Token ids PAD = 0, BOS = 1 and EOS = 2 are the same in both vocabularies.
  Sources are right-padded: each row is its tokens (at least one), then PAD.
- State-dict names are the attribute names given in the Seq2Seq docstring
  (src_embed.weight, encoder.weight_ih_l0, decoder.weight_hh, out.bias, ...):
  the grader loads its own weights with load_state_dict(strict=True), so
  state_dict() must hold exactly those keys.
- Everything keeps the dtype and device of the parameters and inputs, and
  never modifies its inputs in place; no dropout; autograd computes the
  gradients.
torch.nn.GRU, torch.nn.GRUCell, nn.Embedding and nn.Linear are allowed (you
wrote the recurrences in earlier assignments); write the attention yourself
with matmuls, masked_fill and torch.softmax. This file must be
self-contained: do not import attention.py.

What you may not use here (written by `autograder release` from grading.yaml):
Forbidden in this component:

- from `torch.nn.functional`: `scaled_dot_product_attention` and
  `multi_head_attention_forward`
- from `torch.nn`: `MultiheadAttention`, `Transformer`, `TransformerEncoder`,
  `TransformerDecoder`, `TransformerEncoderLayer` and `TransformerDecoderLayer`
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

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 1, 2


def attend(s: torch.Tensor, Hs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dot-product attention of one decoder state over the encoder's states.

    s: (B, H) the decoder state (the query); Hs: (B, S, H) the encoder states
    h_1 .. h_S (keys and values both); mask: (B, S) bool, True where the
    source holds a token, False at PAD. Every row keeps at least one position.
    The score of position i is the plain dot product s . h_i (no scaling);
    the weights are the softmax of the scores over the S positions, with a
    masked position's weight exactly 0 (fill its score with -inf before the
    softmax); the context is the weighted sum of the h_i.
    Returns (context, weights): context: (B, H), weights: (B, S), each row of
    weights summing to 1.
    """
    # BEGIN SOLUTION
    scores = (Hs @ s.unsqueeze(-1)).squeeze(-1)  # (B, S, H) @ (B, H, 1) -> (B, S)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, S), exactly 0 where masked
    context = (weights.unsqueeze(1) @ Hs).squeeze(1)  # (B, 1, S) @ (B, S, H) -> (B, H)
    return context, weights
    # END SOLUTION


class Seq2Seq(nn.Module):
    """An encoder-decoder with attention (Bahdanau et al. 2015, in Luong's dot-product form).

    With E = d_emb and H = d_hidden, the modules, by exactly these names:
        src_embed  nn.Embedding(src_vocab, E)
        encoder    nn.GRU(E, H, batch_first=True)       one layer, one direction
        tgt_embed  nn.Embedding(tgt_vocab, E)
        decoder    nn.GRUCell(E + H, H)                 input: [embedding, context]
        out        nn.Linear(2 * H, tgt_vocab)          input: [state, context]
    The encoder reads the source into states h_1 .. h_S; the decoder starts
    from the encoder's state at the last source token, and at every step its
    previous state s_{t-1} attends over the h_i (`attend`).
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, d_emb: int, d_hidden: int):
        """Create the five modules of the class docstring.

        PyTorch's own initialisation is fine: the grader loads its own weights
        for most cases, and trains your model from them in one.
        """
        super().__init__()
        # BEGIN SOLUTION
        self.src_embed = nn.Embedding(src_vocab, d_emb)
        self.encoder = nn.GRU(d_emb, d_hidden, batch_first=True)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_emb)
        self.decoder = nn.GRUCell(d_emb + d_hidden, d_hidden)
        self.out = nn.Linear(2 * d_hidden, tgt_vocab)
        # END SOLUTION

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Read a batch of right-padded sources.

        src: (B, S) int64. Embed it with src_embed and run the encoder GRU over
        the whole (B, S, E) batch from a zero state.
        Returns (Hs, mask, s0): Hs: (B, S, H) the encoder's output at every
        position (what it holds at PAD positions is never used: those are
        masked); mask: (B, S) bool, src != PAD; s0: (B, H), each example's
        encoder state at its LAST NON-PAD position (not the GRU's final state,
        which has read the PADs as well).
        """
        # BEGIN SOLUTION
        mask = src != PAD  # (B, S)
        Hs, _ = self.encoder(self.src_embed(src))  # (B, S, H); its final state has read the PADs too
        last = mask.sum(dim=1) - 1  # (B,) the last token's position, sources being right-padded
        s0 = Hs[torch.arange(src.shape[0], device=src.device), last]  # (B, H)
        return Hs, mask, s0
        # END SOLUTION

    def decode_step(
        self, y_prev: torch.Tensor, s_prev: torch.Tensor, Hs: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of the decoder.

        y_prev: (B,) int64 the previous target token; s_prev: (B, H) the
        previous decoder state; Hs, mask as `encode` returns them.
            c, weights = attend(s_prev, Hs, mask)          the PREVIOUS state attends
            s = decoder(cat[tgt_embed(y_prev), c], s_prev)  embedding first, then c
            logits = out(cat[s, c])                         new state first, then c
        Returns (logits, s, weights): (B, tgt_vocab), (B, H), (B, S).
        """
        # BEGIN SOLUTION
        c, weights = attend(s_prev, Hs, mask)  # (B, H), (B, S): s_{t-1} scores each h_i
        s = self.decoder(torch.cat([self.tgt_embed(y_prev), c], dim=-1), s_prev)  # (B, H)
        logits = self.out(torch.cat([s, c], dim=-1))  # (B, V)
        return logits, s, weights
        # END SOLUTION

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing: decode the given target tokens, whatever the model would predict.

        src: (B, S); tgt_in: (B, T) int64, the decoder's inputs (BOS first).
        Encode src, then from s0 call decode_step on tgt_in[:, t] for
        t = 0 .. T-1, each step starting from the state the previous one
        returned. logits[:, t] scores the token that follows tgt_in[:, t].
        Returns (logits, weights): (B, T, tgt_vocab) and (B, T, S), step t's
        logits and attention weights at index t.
        """
        # BEGIN SOLUTION
        Hs, mask, s = self.encode(src)  # (B, S, H), (B, S), (B, H)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, s, step_weights = self.decode_step(tgt_in[:, t], s, Hs, mask)  # (B, V), (B, H), (B, S)
            logits.append(step_logits)
            weights.append(step_weights)
        return torch.stack(logits, dim=1), torch.stack(weights, dim=1)  # (B, T, V), (B, T, S)
        # END SOLUTION


def seq2seq_loss(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Teacher-forced cross-entropy of `model` on a batch of pairs.

    src: (B, S); tgt: (B, T + 1) int64, each row BOS, y_1 .. y_n, EOS, then
    PAD. The decoder reads tgt[:, :-1] and its logits at step t are scored
    against tgt[:, t + 1] (so tgt[:, 1:] are the targets). Returns the mean
    cross-entropy over the targets that are not PAD, a scalar tensor that
    autograd can backpropagate.
    """
    # BEGIN SOLUTION
    logits, _ = model(src, tgt[:, :-1])  # (B, T, V): step t reads tgt[:, t]
    targets = tgt[:, 1:]  # (B, T): and predicts tgt[:, t + 1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=PAD)
    # END SOLUTION


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: torch.Tensor, max_len: int) -> list[list[int]]:
    """Translate a batch of sources by always taking the most likely token.

    src: (B, S); max_len >= 1. Encode src; start every example from BOS and
    s0; at each step feed each example its previous token, and take the
    argmax of the logits (ties: the lowest id, as torch.argmax does) as its
    next token. Each example stops at its first EOS, or once it has max_len
    tokens, whichever comes first; the others go on.
    Returns B lists of int token ids, EOS not included (so each has at most
    max_len tokens). No gradients are needed.
    """
    # BEGIN SOLUTION
    Hs, mask, s = model.encode(src)  # (B, S, H), (B, S), (B, H)
    y = torch.full((src.shape[0],), BOS, dtype=torch.long, device=src.device)  # (B,)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (B,)
    out = [[] for _ in range(src.shape[0])]
    for _ in range(max_len):
        logits, s, _ = model.decode_step(y, s, Hs, mask)  # (B, V), (B, H)
        y = logits.argmax(dim=-1)  # (B,)
        done = done | (y == EOS)  # an example stops at its first EOS, which is not kept
        for b in (~done).nonzero().flatten().tolist():
            out[b].append(y[b].item())
        if done.all():
            break
    return out
    # END SOLUTION
