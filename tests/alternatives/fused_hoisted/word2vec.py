"""A correct `word2vec` in another vectorised style: the pairs from a (sentence, i, j) grid masked to the window,
noise as counts ** power normalised by its sum, negatives by rng.choice, one fused score matrix per batch
(the true context as column 0, the negatives after it, with signs +1 and -1), log sigmoid by np.logaddexp, and
every scatter-add as one np.bincount per embedding dimension; cosines by einsum; rankings by np.argpartition
then a sort of the few kept."""
from __future__ import annotations

import numpy as np


def skipgram_pairs(sentences, window):
    out = []
    for sentence in sentences:
        ids = np.asarray(sentence, dtype=np.int64)
        i, j = np.meshgrid(np.arange(len(ids)), np.arange(len(ids)), indexing="ij")
        keep = (np.abs(i - j) <= window) & (i != j)
        out.append(np.stack([ids[i[keep]], ids[j[keep]]], axis=1))  # row-major: i, then j ascending
    return np.concatenate(out).astype(np.int64) if out else np.empty((0, 2), dtype=np.int64)


def noise_distribution(counts, power=0.75):
    p = np.power(np.asarray(counts, dtype=np.float64), power)
    return p / np.sum(p)


def sample_negatives(noise, shape, rng):
    return rng.choice(np.arange(len(noise), dtype=np.int64), size=shape, replace=True, p=noise)


def _fused(W, C, centers, contexts, negatives):
    ids = np.concatenate([contexts[:, None], negatives], axis=1)  # (B, 1 + k)
    signs = np.concatenate([np.ones((len(centers), 1)), -np.ones(negatives.shape)], axis=1)
    scores = np.einsum("bkd,bd->bk", C[ids], W[centers])
    return ids, signs, scores


def sgns_loss(W, C, centers, contexts, negatives):
    _, signs, scores = _fused(W, C, centers, contexts, negatives)
    return float(np.logaddexp(0.0, -signs * scores).sum(axis=1).mean())


def _scatter(ids, rows, V):
    ids, rows = ids.reshape(-1), rows.reshape(len(ids.reshape(-1)), -1)
    return np.stack([np.bincount(ids, weights=rows[:, j], minlength=V) for j in range(rows.shape[1])], axis=1)


def sgns_gradients(W, C, centers, contexts, negatives):
    ids, signs, scores = _fused(W, C, centers, contexts, negatives)
    g = -signs * np.exp(-np.logaddexp(0.0, signs * scores)) / len(centers)  # d loss / d score: -sign * sigmoid(-sign * s)
    dW = _scatter(centers, np.einsum("bk,bkd->bd", g, C[ids]), len(W))
    dC = _scatter(ids, g[:, :, None] * W[centers][:, None, :], len(C))
    return dW, dC


def sgd_step(W, C, centers, contexts, negatives, lr):
    loss = sgns_loss(W, C, centers, contexts, negatives)
    dW, dC = sgns_gradients(W, C, centers, contexts, negatives)
    return W - lr * dW, C - lr * dC, loss


def train(sentences, vocab_size, dim, window, negatives, lr, rng, batch_size=64, max_epochs=50, tol=1e-3):
    pairs = skipgram_pairs(sentences, window)
    words = np.array([w for s in sentences for w in s], dtype=np.int64)
    noise = noise_distribution(np.bincount(words, minlength=vocab_size))
    W = rng.uniform(-0.5 / dim, 0.5 / dim, size=(vocab_size, dim))
    C = np.zeros_like(W)
    losses = []
    for epoch in range(max_epochs):
        epoch_pairs = rng.permutation(pairs, axis=0)
        total, batches = 0.0, 0
        for start in range(0, len(epoch_pairs), batch_size):
            batch = epoch_pairs[start:start + batch_size]
            W, C, loss = sgd_step(W, C, batch[:, 0], batch[:, 1], sample_negatives(noise, (len(batch), negatives), rng), lr)
            total, batches = total + loss, batches + 1
        losses.append(total / batches)
        if epoch and losses[-2] - losses[-1] < tol * losses[-2]:
            break
    return W, C, losses


def cosine_similarities(E, word):
    norms = np.sqrt(np.einsum("vd,vd->v", E, E))
    return np.einsum("vd,d->v", E, E[word]) / norms / norms[word]


def _ranked(sims, exclude, topn):
    sims = sims.copy()
    sims[exclude] = -np.inf
    kept = np.argpartition(-sims, topn - 1)[:topn]
    return [int(i) for i in kept[np.argsort(-sims[kept])]]


def most_similar(E, word, topn=5):
    return _ranked(cosine_similarities(E, word), [word], topn)


def analogy(E, a, b, c, topn=1):
    q = E[b] - E[a] + E[c]
    sims = np.einsum("vd,d->v", E, q) / (np.sqrt(np.einsum("vd,vd->v", E, E)) * np.sqrt(q @ q))
    return _ranked(sims, [a, b, c], topn)
