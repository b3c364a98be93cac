"""Plausible attention and Transformer bugs lose points where they belong.

attention.py holds two components. A bug in the attention arithmetic costs `attention` only: the
causal_mask cases compare the student's causal self-attention with its own non-causal attention,
so they are blind to scaling. A bug in how a mask is applied, or in how heads are split, really does
let causal self-attention see the future, and `causal_mask` loses its behaviour points as well
(listed as `also`). A bug in causal_mask() costs `causal_mask`, and the speed points of
multi_head_self_attention, whose causal outputs it makes wrong.
"""
import pytest
from conftest import ROOT, assert_caught_in_component_only

SDPA_SCORES = "scores = Q @ K.transpose(-2, -1) / math.sqrt(dk)  # (..., Tq, Tk)"
SDPA_MASK = '        scores = scores.masked_fill(~mask, float("-inf"))\n        scores = scores.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # all-masked rows: no NaN\n    weights = torch.softmax(scores, dim=-1)  # (..., Tq, Tk)'
DOT_SOFTMAX = "weights = torch.softmax(scores, dim=-1)  # (B, S)"
_attention = (ROOT / "solutions" / "attention.py").read_text()
# multi_head_self_attention from the head split to the merge: a student who forgets the transpose forgets it both ways.
HEAD_SPLIT = _attention[_attention.index("    q = (x @ W_q.T).view(B, T,"):_attention.index("y = y.transpose(1, 2).reshape(B, T, d)") + 38]
CAUSAL = "return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)"
LEAKS = frozenset({"causal_mask.no_future_leak", "causal_mask.prefix"})
# multi_head_self_attention's speed case times causal attention: with a wrong mask its outputs are wrong, so no timing points.
MHSA_SPEED = frozenset({"attention.speed"})

# (mistake, component, anchor, replacement, checks that must fail, phrase of the feedback, other checks it genuinely breaks)
MISTAKES = [
    ("missing 1/sqrt(d_k)", "attention", SDPA_SCORES, SDPA_SCORES.replace(" / math.sqrt(dk)", ""),
     {"attention.scaled", "attention.self_attention"}, "the 1/sqrt(dk) scaling is missing", frozenset()),
    ("softmax over the wrong axis (encoder-decoder attention)", "attention", DOT_SOFTMAX, DOT_SOFTMAX.replace("dim=-1", "dim=0"),
     {"attention.dot_product"}, "the softmax runs over the batch axis", frozenset()),
    ("softmax over the query axis", "attention", SDPA_MASK, SDPA_MASK.replace("softmax(scores, dim=-1)", "softmax(scores, dim=-2)"),
     {"attention.scaled"}, "the softmax runs over the query axis", LEAKS),
    ("inverted mask", "attention", SDPA_MASK, SDPA_MASK.replace("masked_fill(~mask, float", "masked_fill(mask, float"),
     {"attention.scaled", "attention.cross_attention"}, "the mask is inverted", LEAKS | {"causal_mask.no_future_leak"}),
    ("heads split without a transpose", "attention", HEAD_SPLIT, HEAD_SPLIT.replace("view(B, T, num_heads, dk).transpose(1, 2)", "view(B, num_heads, T, dk)").replace(
        "y.transpose(1, 2).reshape(B, T, d)", "y.reshape(B, T, d)"),
     {"attention.self_attention"}, "the heads are split without the transpose", LEAKS),
    ("self-attention that mixes no positions", "attention", "y = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T, dk)",
     "y = v  # (B, h, T, dk)", {"causal_mask.no_future_leak"}, "did not move", frozenset({"causal_mask.no_future_leak"})),
    ("triu instead of tril", "causal_mask", CAUSAL, CAUSAL.replace(".tril()", ".triu()"),
     {"causal_mask.values", "causal_mask.no_future_leak"}, "the upper triangle (triu)", MHSA_SPEED),
    ("a causal mask without the diagonal", "causal_mask", CAUSAL, CAUSAL.replace(".tril()", ".tril(-1)"),
     {"causal_mask.values", "causal_mask.prefix"}, "the diagonal is missing", MHSA_SPEED),
    ("unbiased variance in LayerNorm", "transformer", "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
     "var = x.var(dim=-1, keepdim=True)", {"transformer.layer_norm"}, "the unbiased variance", frozenset()),
    ("post-LN when pre-LN was asked", "transformer", "            x = x + self.attn(self.ln1(x))\n            x = x + self.ffn(self.ln2(x))",
     "            x = self.ln1(x + self.attn(x))\n            x = self.ln2(x + self.ffn(x))",
     {"transformer.block", "transformer.lm"}, "post-LN computed although norm_first=True", frozenset()),
    ("no position embeddings", "transformer", "x = self.token_embeddings(ids) + self.position_embeddings(pos)",
     "x = self.token_embeddings(ids)", {"transformer.lm"}, "no position embeddings", frozenset()),
    ("a missing residual around attention", "transformer", "            x = x + self.attn(self.ln1(x))",
     "            x = self.attn(self.ln1(x))", {"transformer.block"}, "the residual around attention is missing", frozenset()),
    ("a causal mask with triu inside the Transformer", "transformer", "allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()",
     "allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).triu()", {"transformer.attention", "transformer.causality"},
     "triu", frozenset()),
    ("temperature ignored", "transformer", "            logits = logits / temperature", "            logits = logits",
     {"transformer.generate_sampling"}, "the temperature is ignored", frozenset()),
]


@pytest.mark.parametrize("mistake, component, old, new, must_fail, feedback, also", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistake_is_caught_where_it_belongs(rubric_without_training, tmp_path, mistake, component, old, new, must_fail, feedback, also):
    assert_caught_in_component_only(rubric_without_training, tmp_path, component, old, new, must_fail, feedback, also)


def test_training_fails_a_model_that_cannot_learn_from_its_input(rubric, tmp_path):
    """Logits that ignore the tokens stay at the unigram loss however long the grader trains."""
    assert_caught_in_component_only(rubric, tmp_path, "transformer", "x = self.token_embeddings(ids) + self.position_embeddings(pos)",
                                    "x = 0 * self.token_embeddings(ids) + self.position_embeddings(pos)",
                                    {"transformer.training", "transformer.lm"}, "training", frozenset())
