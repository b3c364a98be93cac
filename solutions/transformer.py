"""Component `transformer`: a decoder-only (GPT-style) Transformer language model.

Conventions:
- Batch first: activations are (B, T, d_model), token ids are (B, T) int64.
- Every nn.Linear has bias=False. A Linear's weight (d_out, d_in) maps x to
  x @ weight.T.
- State-dict names are the attribute names given in each class docstring
  (e.g. layers.0.attn.q_proj.weight, layers.1.ffn.w2.weight, ln_final.bias):
  the grader loads its own weights with load_state_dict(strict=True), so
  state_dict() must hold exactly those keys.
- Attention heads: head h owns columns h*dk:(h+1)*dk of the projected
  queries, keys and values (dk = d_model // num_heads); head outputs are
  concatenated in head order before output_proj.
- Causal self-attention: position i attends to positions j <= i only.
- Everything keeps the dtype and device of the parameters and inputs; no
  dropout; autograd computes the gradients.
This file must be self-contained (it may import attention.py, but it is
graded on its own, so copying what you need is safer). Write the attention
and the layer norm yourself.

What you may not use here (written by `autograder release` from grading.yaml):
Forbidden in this component:

- from `torch.nn.functional`: `scaled_dot_product_attention`,
  `multi_head_attention_forward`, `layer_norm`, `rms_norm`, `group_norm`,
  `instance_norm` and `batch_norm`
- from `torch.nn`: `MultiheadAttention`, `Transformer`, `TransformerEncoder`,
  `TransformerDecoder`, `TransformerEncoderLayer`, `TransformerDecoderLayer`,
  `LayerNorm`, `RMSNorm` and `GroupNorm`
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
  `aten::_safe_softmax`, `higher_order::flex_attention`, `aten::layer_norm`,
  `aten::native_layer_norm`, `aten::rms_norm`, `aten::_fused_rms_norm`,
  `aten::group_norm`, `aten::native_group_norm`, `aten::instance_norm`,
  `aten::batch_norm`, `aten::native_batch_norm`,
  `aten::_native_batch_norm_legit`,
  `aten::_native_batch_norm_legit_functional`,
  `aten::_native_batch_norm_legit_no_training`, `aten::_batch_norm_impl_index`,
  `aten::_batch_norm_with_update`, `aten::_batch_norm_with_update_functional`,
  `aten::_batch_norm_no_update`, `aten::cudnn_batch_norm`,
  `aten::miopen_batch_norm`, `quantized::layer_norm`, `quantized::group_norm`
  and `quantized::instance_norm`, however your code reaches them: a torch
  function that runs one, `torch.ops.aten.scaled_dot_product_attention` and the
  like, an operator fetched by its name
  (`"aten::scaled_dot_product_attention"`), TorchScript or `torch.compile`; and
  PyTorch's own Python implementations of them (in `torch._decomp` and
  `torch._refs`)

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
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    """Layer normalisation over the last axis, with a learned scale and shift.

    Parameters: weight (d_model,) initialised to ones, bias (d_model,)
    initialised to zeros. For x (..., d_model), with mean and the BIASED
    variance (divide by d_model, not d_model - 1) taken over the last axis,
        y = (x - mean) / sqrt(var + eps) * weight + bias.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        """Create weight and bias (nn.Parameter) and remember eps."""
        super().__init__()
        # BEGIN SOLUTION
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> (..., d_model), normalised as in the class docstring."""
        # BEGIN SOLUTION
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
        # END SOLUTION


class FeedForward(nn.Module):
    """The position-wise feed-forward network of a Transformer block.

    Attributes: w1 = nn.Linear(d_model, d_ff, bias=False),
    w2 = nn.Linear(d_ff, d_model, bias=False). For x (..., d_model),
        y = w2(gelu(w1(x)))
    with the exact GELU, x * Phi(x) (torch.nn.functional.gelu's default, not
    the tanh approximation).
    """

    def __init__(self, d_model: int, d_ff: int):
        """Create w1 and w2."""
        super().__init__()
        # BEGIN SOLUTION
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (..., d_model) -> (..., d_model)."""
        # BEGIN SOLUTION
        return self.w2(F.gelu(self.w1(x)))  # (..., d_ff) -> (..., d_model)
        # END SOLUTION


class MultiHeadSelfAttention(nn.Module):
    """Multi-head (optionally causal) scaled dot-product self-attention.

    Attributes: q_proj, k_proj, v_proj, output_proj, each
    nn.Linear(d_model, d_model, bias=False); num_heads divides d_model and
    dk = d_model // num_heads. For x (B, T, d_model):
    Q = q_proj(x), K = k_proj(x), V = v_proj(x), each split into num_heads
    heads (head h owns columns h*dk:(h+1)*dk) as a batch dimension,
    (B, num_heads, T, dk); each head computes softmax(Q K^T / sqrt(dk)) V,
    where with causal=True the weight of key j for query i is exactly 0 when
    j > i; the head outputs are concatenated in head order to (B, T, d_model)
    and passed through output_proj.
    """

    def __init__(self, d_model: int, num_heads: int, causal: bool = True):
        """Create the four projections and remember num_heads and causal."""
        super().__init__()
        # BEGIN SOLUTION
        assert d_model % num_heads == 0, "num_heads must divide d_model"
        self.num_heads = num_heads
        self.causal = causal
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, d_model) -> (B, T, d_model)."""
        # BEGIN SOLUTION
        B, T, d = x.shape
        h, dk = self.num_heads, d // self.num_heads
        q = self.q_proj(x).view(B, T, h, dk).transpose(1, 2)  # (B, h, T, dk)
        k = self.k_proj(x).view(B, T, h, dk).transpose(1, 2)  # (B, h, T, dk)
        v = self.v_proj(x).view(B, T, h, dk).transpose(1, 2)  # (B, h, T, dk)
        att = q @ k.transpose(-2, -1) / math.sqrt(dk)  # (B, h, T, T)
        if self.causal:
            allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T)
            att = att.masked_fill(~allowed, float("-inf"))  # the diagonal is always allowed
        att = torch.softmax(att, dim=-1)  # (B, h, T, T)
        y = att @ v  # (B, h, T, dk)
        y = y.transpose(1, 2).reshape(B, T, d)  # (B, T, d), heads concatenated in order
        return self.output_proj(y)
        # END SOLUTION


class TransformerBlock(nn.Module):
    """One Transformer block: self-attention and feed-forward, each with a residual.

    Attributes: ln1 = LayerNorm(d_model), attn = MultiHeadSelfAttention(
    d_model, num_heads, causal), ln2 = LayerNorm(d_model),
    ffn = FeedForward(d_model, d_ff). For x (B, T, d_model):
        pre-LN  (norm_first=True):   x = x + attn(ln1(x));   x = x + ffn(ln2(x))
        post-LN (norm_first=False):  x = ln1(x + attn(x));   x = ln2(x + ffn(x))
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        norm_first: bool = True,
        causal: bool = True,
    ):
        """Create ln1, attn, ln2 and ffn and remember norm_first."""
        super().__init__()
        # BEGIN SOLUTION
        self.norm_first = norm_first
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, causal)
        self.ln2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, d_model) -> (B, T, d_model)."""
        # BEGIN SOLUTION
        if self.norm_first:
            x = x + self.attn(self.ln1(x))
            x = x + self.ffn(self.ln2(x))
        else:
            x = self.ln1(x + self.attn(x))
            x = self.ln2(x + self.ffn(x))
        return x
        # END SOLUTION


class TransformerLM(nn.Module):
    """A decoder-only Transformer language model with learned position embeddings.

    Attributes, by exactly these names (V = vocab_size, d = d_model):
        token_embeddings     nn.Embedding(V, d)
        position_embeddings  nn.Embedding(context_length, d)   (learned)
        layers               nn.ModuleList of num_layers TransformerBlock(
                                 d, num_heads, d_ff, norm_first, causal=True)
        ln_final             LayerNorm(d), ONLY when norm_first is True; a
                             post-LN model has no ln_final at all (no
                             attribute, no parameters)
        lm_head              nn.Linear(d, V, bias=False)
    For ids (B, T): x = token_embeddings(ids) + position_embeddings of
    positions 0..T-1; x runs through the blocks in order, then ln_final (pre-LN
    only), then lm_head. logits[:, t] scores the token that follows ids[:, t],
    having seen ids[:, :t + 1] only.
    """

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        d_model: int,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        norm_first: bool = True,
    ):
        """Create the modules listed in the class docstring.

        Any sensible random initialisation will do (for instance normal with
        standard deviation 0.02 for embeddings and linear weights, as GPT-2
        does); the grader loads its own weights, but it also trains your model
        from your initialisation, so it must be trainable.
        """
        super().__init__()
        # BEGIN SOLUTION
        self.context_length = context_length
        self.norm_first = norm_first
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.position_embeddings = nn.Embedding(context_length, d_model)
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, num_heads, d_ff, norm_first, causal=True)
            for _ in range(num_layers)
        )
        if norm_first:
            self.ln_final = LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
        # END SOLUTION

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids: (B, T) int64 token ids in [0, V) -> logits (B, T, V).

        Raises ValueError when T > context_length.
        """
        # BEGIN SOLUTION
        B, T = ids.shape
        if T > self.context_length:
            raise ValueError(f"sequence length {T} exceeds context_length {self.context_length}")
        pos = torch.arange(T, device=ids.device)  # (T,)
        x = self.token_embeddings(ids) + self.position_embeddings(pos)  # (B, T, d)
        for block in self.layers:
            x = block(x)  # (B, T, d)
        if self.norm_first:
            x = self.ln_final(x)
        return self.lm_head(x)  # (B, T, V)
        # END SOLUTION


@torch.no_grad()
def generate(
    model: TransformerLM,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend `prompt` by max_new_tokens tokens, one at a time, with `model`.

    prompt: (T0,) int64, T0 >= 1. Repeat max_new_tokens times: run the model
    on (at most) the last model.context_length tokens of the sequence so far,
    as a batch of one, and take the logits (V,) at the last position; then
        - temperature == 0: the next token is the argmax of the logits (greedy;
          ties go to the lowest id; top_k is irrelevant; torch.multinomial is
          not called);
        - temperature > 0: divide the logits by temperature; if top_k is not
          None, keep only the logits >= the k-th largest logit (so every token
          tied with the k-th is kept; top_k >= V keeps all) and give all others
          probability exactly 0; probs = softmax over the vocabulary, (V,);
          the next token is torch.multinomial(probs, 1, generator=generator).
    Call torch.multinomial exactly once per new token, as
    torch.multinomial(...) (not probs.multinomial): the grader watches those
    calls to read the probabilities you sample from.
    Returns (T0 + max_new_tokens,) int64: the prompt followed by the new tokens.
    No gradients are needed.
    """
    # BEGIN SOLUTION
    ids = prompt  # (T,)
    for _ in range(max_new_tokens):
        logits = model(ids[-model.context_length :].unsqueeze(0))[0, -1]  # (V,)
        if temperature == 0:
            next_id = logits.argmax().view(1)  # (1,)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)  # (V,)
            next_id = torch.multinomial(probs, 1, generator=generator)  # (1,)
        ids = torch.cat([ids, next_id.to(ids.dtype)])  # (T + 1,)
    return ids
    # END SOLUTION
