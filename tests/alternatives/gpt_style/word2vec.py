"""A correct `word2vec` written like the original C code, one pair at a time: Python loops for the pairs, a
piecewise stable sigmoid (1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) otherwise, through e^-|x|), the loss and the
gradients accumulated pair by pair and negative by negative with plain row updates (dW[c] += ...), and rankings by
sorting (similarity, id) tuples."""
from __future__ import annotations

import math

import numpy as np


def skipgram_pairs(sentences, window):
    pairs = [(s[i], s[j]) for s in sentences for i in range(len(s)) for j in range(len(s)) if j != i and abs(i - j) <= window]
    return np.array(pairs, dtype=np.int64).reshape(len(pairs), 2)


def noise_distribution(counts, power=0.75):
    weights = np.array([float(c) ** power for c in counts])
    return weights / weights.sum()


def sample_negatives(noise, shape, rng):
    return rng.choice(len(noise), size=int(np.prod(shape)), p=noise).reshape(shape).astype(np.int64)


def _sigmoid(x: float) -> float:
    z = math.exp(-abs(x))
    return 1.0 / (1.0 + z) if x >= 0 else z / (1.0 + z)


def _log_sigmoid(x: float) -> float:
    return min(x, 0.0) - math.log1p(math.exp(-abs(x)))


def sgns_loss(W, C, centers, contexts, negatives):
    total = 0.0
    for b in range(len(centers)):
        w = W[centers[b]]
        total -= _log_sigmoid(float(C[contexts[b]] @ w))
        for n in negatives[b]:
            total -= _log_sigmoid(-float(C[n] @ w))
    return total / len(centers)


def sgns_gradients(W, C, centers, contexts, negatives):
    dW, dC = np.zeros_like(W), np.zeros_like(C)
    B = len(centers)
    for b in range(B):
        c, o = centers[b], contexts[b]
        w = W[c]
        g = (_sigmoid(float(C[o] @ w)) - 1.0) / B
        dW[c] += g * C[o]
        dC[o] += g * w
        for n in negatives[b]:
            g = _sigmoid(float(C[n] @ w)) / B
            dW[c] += g * C[n]
            dC[n] += g * w
    return dW, dC


def sgd_step(W, C, centers, contexts, negatives, lr):
    loss = sgns_loss(W, C, centers, contexts, negatives)
    dW, dC = sgns_gradients(W, C, centers, contexts, negatives)
    W_new, C_new = W.copy(), C.copy()
    W_new -= lr * dW
    C_new -= lr * dC
    return W_new, C_new, loss


def train(sentences, vocab_size, dim, window, negatives, lr, rng, batch_size=64, max_epochs=50, tol=1e-3):
    pairs = skipgram_pairs(sentences, window)
    counts = [0] * vocab_size
    for sentence in sentences:
        for word in sentence:
            counts[word] += 1
    noise = noise_distribution(counts)
    W = rng.uniform(-0.5 / dim, 0.5 / dim, size=(vocab_size, dim))
    C = np.zeros((vocab_size, dim))
    losses = []
    for epoch in range(max_epochs):
        order = rng.permutation(len(pairs))
        batch_losses = []
        for start in range(0, len(order), batch_size):
            batch = pairs[order[start:start + batch_size]]
            negs = sample_negatives(noise, (len(batch), negatives), rng)
            W, C, loss = sgd_step(W, C, batch[:, 0], batch[:, 1], negs, lr)
            batch_losses.append(loss)
        losses.append(sum(batch_losses) / len(batch_losses))
        if epoch >= 1 and losses[epoch - 1] - losses[epoch] < tol * losses[epoch - 1]:
            break
    return W, C, losses


def cosine_similarities(E, word):
    return np.array([float(E[v] @ E[word]) / (np.linalg.norm(E[v]) * np.linalg.norm(E[word])) for v in range(len(E))])


def _ranked(sims, exclude, topn):
    return [v for _, v in sorted((-s, v) for v, s in enumerate(sims) if v not in exclude)][:topn]


def most_similar(E, word, topn=5):
    return _ranked(cosine_similarities(E, word), {word}, topn)


def analogy(E, a, b, c, topn=1):
    q = E[b] - E[a] + E[c]
    sims = [float(E[v] @ q) / (np.linalg.norm(E[v]) * np.linalg.norm(q)) for v in range(len(E))]
    return _ranked(sims, {a, b, c}, topn)
