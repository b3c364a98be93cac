"""A correct `word2vec` with float64 internals and matrix products: the pairs built by position offsets and reordered
with a stable sort, the noise distribution as exp(power * log counts), negatives by inverse-CDF sampling
(searchsorted on the normalised cumulative sum), log sigmoid as min(x, 0) - log1p(exp(-|x|)), every scatter-add as a
one-hot matrix product (one_hot(ids).T @ rows), cosines of unit-normalised rows, rankings by a stable sort."""
from __future__ import annotations

import numpy as np


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _one_hot(ids: np.ndarray, V: int) -> np.ndarray:
    return (np.asarray(ids).reshape(-1)[:, None] == np.arange(V)[None, :]).astype(np.float64)


def skipgram_pairs(sentences, window):
    rows, keys = [], []
    for s, sentence in enumerate(sentences):
        ids = np.asarray(sentence, dtype=np.int64)
        n = len(ids)
        for offset in [o for o in range(-window, window + 1) if o != 0]:
            i = np.arange(max(0, -offset), min(n, n - offset))
            rows.append(np.stack([ids[i], ids[i + offset]], axis=1))
            keys.append(np.stack([np.full(len(i), s), i, i + offset], axis=1))
    if not rows:
        return np.zeros((0, 2), dtype=np.int64)
    rows, keys = np.concatenate(rows), np.concatenate(keys)
    order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0]))
    return rows[order].astype(np.int64).reshape(-1, 2)


def noise_distribution(counts, power=0.75):
    c = np.asarray(counts, dtype=np.float64)
    with np.errstate(divide="ignore"):
        weights = np.where(c > 0, np.exp(power * np.log(c)), 0.0)
    return weights / weights.sum()


def sample_negatives(noise, shape, rng):
    cdf = np.cumsum(np.asarray(noise, dtype=np.float64))
    return np.searchsorted(cdf / cdf[-1], rng.random(shape), side="right").astype(np.int64)


def _scores(W, C, centers, contexts, negatives):
    w = W[centers]
    return w, (C[contexts] * w).sum(axis=1), np.einsum("bkd,bd->bk", C[negatives], w)


def sgns_loss(W, C, centers, contexts, negatives):
    _, pos, neg = _scores(np.asarray(W, dtype=np.float64), np.asarray(C, dtype=np.float64), centers, contexts, negatives)
    return float(-(_log_sigmoid(pos) + _log_sigmoid(-neg).sum(axis=1)).mean())


def sgns_gradients(W, C, centers, contexts, negatives):
    W, C = np.asarray(W, dtype=np.float64), np.asarray(C, dtype=np.float64)
    V, B, k = len(W), len(centers), negatives.shape[1]
    w, pos, neg = _scores(W, C, centers, contexts, negatives)
    g_pos = -np.exp(_log_sigmoid(-pos)) / B
    g_neg = np.exp(_log_sigmoid(neg)) / B
    dW = _one_hot(centers, V).T @ (g_pos[:, None] * C[contexts] + np.einsum("bk,bkd->bd", g_neg, C[negatives]))
    dC = _one_hot(contexts, V).T @ (g_pos[:, None] * w) + _one_hot(negatives, V).T @ (g_neg[:, :, None] * w[:, None, :]).reshape(B * k, -1)
    return dW, dC


def sgd_step(W, C, centers, contexts, negatives, lr):
    dW, dC = sgns_gradients(W, C, centers, contexts, negatives)
    return W - lr * dW, C - lr * dC, sgns_loss(W, C, centers, contexts, negatives)


def train(sentences, vocab_size, dim, window, negatives, lr, rng, batch_size=64, max_epochs=50, tol=1e-3):
    pairs = skipgram_pairs(sentences, window)
    counts = _one_hot(np.array([w for s in sentences for w in s], dtype=np.int64), vocab_size).sum(axis=0)
    noise = noise_distribution(counts)
    W = (rng.random((vocab_size, dim)) - 0.5) / dim
    C = np.zeros((vocab_size, dim))
    losses = []
    while len(losses) < max_epochs:
        order = rng.permutation(len(pairs))
        batch_losses = []
        for batch in np.array_split(order, np.arange(batch_size, len(order), batch_size)):
            neg = sample_negatives(noise, (len(batch), negatives), rng)
            W, C, loss = sgd_step(W, C, pairs[batch, 0], pairs[batch, 1], neg, lr)
            batch_losses.append(loss)
        losses.append(float(np.mean(batch_losses)))
        if len(losses) > 1 and (losses[-2] - losses[-1]) < tol * losses[-2]:
            break
    return W, C, losses


def _unit(E):
    E = np.asarray(E, dtype=np.float64)
    return E / np.linalg.norm(E, axis=-1, keepdims=True)


def cosine_similarities(E, word):
    return _unit(E) @ _unit(E[word])


def _top(sims, exclude, topn):
    sims = np.array(sims, dtype=np.float64)
    sims[list(exclude)] = -np.inf
    return np.argsort(-sims, kind="stable")[:topn].tolist()


def most_similar(E, word, topn=5):
    return _top(cosine_similarities(E, word), [word], topn)


def analogy(E, a, b, c, topn=1):
    return _top(_unit(E) @ _unit(E[b] - E[a] + E[c]), [a, b, c], topn)
