"""Oracles and mistakes for component `word2vec`: the skip-gram pairs by brute force, the SGNS loss and its
gradients by torch autograd in float64, and the wrong answers of classic mistakes."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

# ---- right answers ----------------------------------------------------------------------------------


def pairs(sentences: list[list[int]], window: int, *, centre: bool = False, right: int = 0, across: bool = False,
          swapped: bool = False, by_distance: bool = False, same_word: bool = False, wrap: bool = False) -> np.ndarray:
    """Every (centre, context) pair by brute force over all position pairs, with a mistake when asked:
    the centre as its own context, the window's right edge moved by `right`, windows across sentence
    boundaries (the corpus as one sequence), the columns swapped, the contexts ordered by distance
    (i - 1, i + 1, i - 2, i + 2, ...) instead of by position, a context skipped when it is the centre's word
    (same_word: words compared instead of positions), or positions before the start read from the sentence's end
    (wrap: Python's negative indices)."""
    runs = [[w for s in sentences for w in s]] if across else sentences
    out = []
    for s in runs:
        for i in range(len(s)):
            if by_distance:
                js = [j for off in range(1, window + 1) for j in (i - off, i + off) if 0 <= j < len(s)]
            elif wrap:
                js = [j for j in range(i - window, min(len(s), i + window + 1)) if j != i and j >= -len(s)]
            else:
                js = [j for j in range(len(s)) if -window <= j - i <= window + right and (centre or j != i)]
            out += [(s[j], s[i]) if swapped else (s[i], s[j]) for j in js if not (same_word and s[j] == s[i])]
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def scores(W, C, centers, contexts, negatives) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(W, C) as float64 leaves, and the scores of the true contexts (B,) and of the negatives (B, k)."""
    Wt, Ct = torch.tensor(W, dtype=torch.float64, requires_grad=True), torch.tensor(C, dtype=torch.float64, requires_grad=True)
    w = Wt[torch.from_numpy(centers)]
    pos = (Ct[torch.from_numpy(contexts)] * w).sum(-1)
    neg = torch.einsum("bkd,bd->bk", Ct[torch.from_numpy(negatives)], w)
    return Wt, Ct, pos, neg


def sgns(W, C, centers, contexts, negatives, *, neg_sign: float = -1.0, reduce: str = "mean") -> tuple[float, np.ndarray, np.ndarray]:
    """(loss, dW, dC) by autograd: mean over the batch of -logsigmoid(pos) - sum_j logsigmoid(-neg_j). As
    mistakes: the negatives' scores not negated (neg_sign=+1), or the batch summed (reduce="sum")."""
    Wt, Ct, pos, neg = scores(W, C, centers, contexts, negatives)
    per_pair = -F.logsigmoid(pos) - F.logsigmoid(neg_sign * neg).sum(-1)
    loss = per_pair.sum() if reduce == "sum" else per_pair.mean()
    loss.backward()
    return loss.item(), Wt.grad.numpy(), Ct.grad.numpy()


def sgd(W, C, centers, contexts, negatives, lr: float, *, sign: float = 1.0, loss_after: bool = False) -> tuple:
    """(W - lr dW, C - lr dC, loss before the step) from autograd's gradients; as mistakes, a step up the
    gradient (sign=-1), or the loss at the new weights."""
    loss, dW, dC = sgns(W, C, centers, contexts, negatives)
    W_new, C_new = W - sign * lr * dW, C - sign * lr * dC
    return W_new, C_new, sgns(W_new, C_new, centers, contexts, negatives)[0] if loss_after else loss


# ---- wrong answers ----------------------------------------------------------------------------------


def noise(counts: np.ndarray, power: float, *, mistake: str) -> np.ndarray:
    """The noise distribution with a mistake: the power ignored ("raw"), not normalised ("unnormalised"),
    or the power applied after normalising ("after")."""
    c = np.asarray(counts, dtype=np.float64)
    return {"raw": lambda: c / c.sum(), "unnormalised": lambda: c**power, "after": lambda: (c / c.sum()) ** power}[mistake]()


def naive_loss(W, C, centers, contexts, negatives, *, form: str) -> float:
    """The loss with an unstable sigmoid: the true context's term as log(1 / (1 + exp(-pos))) (exp overflows for
    pos << 0), the negatives' as log(1 - sigmoid(neg)) ("one_minus": log 0 once sigmoid rounds to 1) or as
    log(1 / (1 + exp(neg))) ("overflow")."""
    w = W[centers]
    pos, neg = np.sum(C[contexts] * w, axis=1), np.einsum("bkd,bd->bk", C[negatives], w)
    with np.errstate(all="ignore"):
        sigmoid = 1 / (1 + np.exp(-pos)), 1 / (1 + np.exp(-neg))
        log_neg = np.log(1 - sigmoid[1]) if form == "one_minus" else np.log(1 / (1 + np.exp(neg)))
        return float(np.mean(-np.log(sigmoid[0]) - log_neg.sum(axis=1)))


def clamped_loss(W, C, centers, contexts, negatives, *, eps: float) -> float:
    """The loss with each log clamped: log(sigmoid(x) + eps) (or a clip of sigmoid at eps), so that a term never
    exceeds -log(eps) however large the score."""
    w = W[centers]
    pos, neg = np.sum(C[contexts] * w, axis=1), np.einsum("bkd,bd->bk", C[negatives], w)
    sigmoid = lambda x: np.exp(-np.logaddexp(0, -x))  # noqa: E731
    return float(np.mean(-np.log(sigmoid(pos) + eps) - np.log(sigmoid(-neg) + eps).sum(axis=1)))


def mean_over_negatives_loss(W, C, centers, contexts, negatives) -> float:
    """The negatives' term averaged over the k negatives instead of summed."""
    _, _, pos, neg = scores(W, C, centers, contexts, negatives)
    return (-F.logsigmoid(pos) - F.logsigmoid(-neg).mean(-1)).mean().item()


def occurrence_grads(W, C, centers, contexts, negatives) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradient of the mean loss w.r.t. each gathered row: W[centers] (B, d), C[contexts] (B, d) and
    C[negatives] (B, k, d), by autograd: what a scatter adds into dW and dC."""
    w, c_pos, c_neg = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (W[centers], C[contexts], C[negatives]))
    loss = (-F.logsigmoid((c_pos * w).sum(-1)) - F.logsigmoid(-torch.einsum("bkd,bd->bk", c_neg, w)).sum(-1)).mean()
    loss.backward()
    return w.grad.numpy(), c_pos.grad.numpy(), c_neg.grad.numpy()


def scatter_overwriting(W, C, centers, contexts, negatives, *, where: str = "all") -> tuple[np.ndarray, np.ndarray]:
    """dW[centers] += ...; dC[contexts] += ...; dC[negatives] += ...: buffered fancy indexing keeps one
    contribution per repeated id within each statement. `where` names the one statement written that way ("centers",
    "contexts" or "negatives"; np.add.at elsewhere), or "all"."""
    gw, gc_pos, gc_neg = occurrence_grads(W, C, centers, contexts, negatives)
    dW, dC = np.zeros_like(W, dtype=np.float64), np.zeros_like(C, dtype=np.float64)
    for grad, ids, g, name in ((dW, centers, gw, "centers"), (dC, contexts, gc_pos, "contexts"), (dC, negatives, gc_neg, "negatives")):
        if where in ("all", name):
            grad[ids] += g
        else:
            np.add.at(grad, ids, g)
    return dW, dC


def overflowing_sigmoid_grads(W, C, centers, contexts, negatives) -> tuple[np.ndarray, np.ndarray]:
    """The gradients with sigmoid(x) = exp(x) / (1 + exp(x)): inf / inf = nan once exp(x) overflows."""
    w = W[centers]
    B = len(centers)
    pos, neg = np.sum(C[contexts] * w, axis=1), np.einsum("bkd,bd->bk", C[negatives], w)
    with np.errstate(all="ignore"):
        g_pos = (np.exp(pos) / (1 + np.exp(pos)) - 1) / B
        g_neg = np.exp(neg) / (1 + np.exp(neg)) / B
        dW, dC = np.zeros_like(W), np.zeros_like(C)
        np.add.at(dW, centers, g_pos[:, None] * C[contexts] + np.einsum("bk,bkd->bd", g_neg, C[negatives]))
        np.add.at(dC, contexts, g_pos[:, None] * w)
        np.add.at(dC, negatives, g_neg[:, :, None] * w[:, None, :])
    return dW, dC


def cosines(E: np.ndarray, word: int, *, mistake: str) -> np.ndarray:
    """Cosine similarities with a mistake: plain dot products ("dot"), divided by the rows' norms only
    ("rows"), or by the word's norm only ("word")."""
    dots, norms = E @ E[word], np.linalg.norm(E, axis=1)
    return {"dot": dots, "rows": dots / norms, "word": dots / norms[word]}[mistake]


def ranked(sims: np.ndarray, exclude: list[int], topn: int, ascending: bool = False) -> list[int]:
    """The topn ids by `sims`, highest first (lowest with `ascending`), leaving out `exclude`."""
    order = [int(i) for i in np.argsort(sims if ascending else -sims) if int(i) not in exclude]
    return order[:topn]


def neighbours(E: np.ndarray, word: int, topn: int, *, mistake: str) -> list[int]:
    """most_similar with a mistake: the word itself kept ("self"), ranked by dot product ("dot"), the
    least similar first ("ascending"), or the right words closest last ("closest_last": np.argsort(sims)[-topn:])."""
    cos = E @ E[word] / (np.linalg.norm(E, axis=1) * np.linalg.norm(E[word]))
    if mistake == "self":
        return ranked(cos, [], topn)
    if mistake == "dot":
        return ranked(E @ E[word], [word], topn)
    if mistake == "closest_last":
        return ranked(cos, [word], topn)[::-1]
    return ranked(cos, [word], topn, ascending=True)


def analogies(E: np.ndarray, a: int, b: int, c: int, topn: int, *, mistake: str) -> list[int]:
    """analogy with a mistake: a, b and c not excluded ("keep"), ranked by dot product ("dot"), the rows
    normalised before the offset ("unit"), or the offset reversed, E[a] - E[b] + E[c] ("reversed")."""
    unit = E / np.linalg.norm(E, axis=1, keepdims=True)
    q = {"unit": unit[b] - unit[a] + unit[c], "reversed": E[a] - E[b] + E[c]}.get(mistake, E[b] - E[a] + E[c])
    cos = unit @ q / np.linalg.norm(q)
    if mistake == "keep":
        return ranked(cos, [], topn)
    return ranked(E @ q if mistake == "dot" else cos, [a, b, c], topn)
