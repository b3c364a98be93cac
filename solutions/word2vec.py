"""Component `word2vec`: skip-gram with negative sampling (SGNS), trained by hand.

NumPy only: every gradient is yours to derive.
Conventions:
- Words are integer ids in [0, V). W (V, d) holds the centre-word vectors, C (V, d)
  the context-word vectors; row v of each belongs to word v.
- Arrays of ids are int64; embeddings, gradients and probabilities are float64.
- No function modifies its inputs in place; the only randomness is the `rng`
  passed in (a numpy.random.Generator).

What you may not use here (written by `autograder release` from grading.yaml):
Forbidden in this component:

- importing `torch`, `jax`, `tensorflow`, `autograd` or `gensim`, or a module
  inside one of them

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

import numpy as np


def skipgram_pairs(sentences: list[list[int]], window: int) -> np.ndarray:
    """The (centre, context) training pairs of a corpus.

    sentences: lists of word ids; window: how many positions on each side count
    as context. For every position i of every sentence and every position j of
    the same sentence with j != i and |i - j| <= window, one row
    [sentence[i], sentence[j]]. Rows in order: sentence by sentence, then by i,
    then by j ascending. Windows never cross from one sentence into another.
    Returns an int64 array of shape (P, 2); (0, 2) when there is no pair (a
    one-word sentence has none).
    """
    # BEGIN SOLUTION
    pairs = []
    for sentence in sentences:
        for i, center in enumerate(sentence):
            for j in range(max(0, i - window), min(len(sentence), i + window + 1)):
                if j != i:  # a word is not its own context
                    pairs.append((center, sentence[j]))
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)
    # END SOLUTION


def noise_distribution(counts: np.ndarray, power: float = 0.75) -> np.ndarray:
    """The distribution negatives are drawn from: the unigram counts raised to `power`.

    counts: (V,) non-negative word counts. Returns (V,) float64 probabilities
    proportional to counts ** power, summing to 1.
    """
    # BEGIN SOLUTION
    weights = np.asarray(counts, dtype=np.float64) ** power  # (V,)
    return weights / weights.sum()
    # END SOLUTION


def sample_negatives(noise: np.ndarray, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Independent draws of word ids from `noise`.

    noise: (V,) probabilities summing to 1; shape: the shape of the result, e.g.
    (B, k); rng: the only source of randomness (two generators seeded alike must
    give the same draws). Returns an int64 array of `shape` whose entries are ids
    drawn independently with P(v) = noise[v].
    """
    # BEGIN SOLUTION
    return rng.choice(len(noise), size=shape, p=noise)
    # END SOLUTION


def sgns_loss(W: np.ndarray, C: np.ndarray, centers: np.ndarray, contexts: np.ndarray, negatives: np.ndarray) -> float:
    """The mean SGNS loss of a batch of B (centre, context) pairs with k negatives each.

    W, C: (V, d); centers, contexts: (B,) ids; negatives: (B, k) ids. For pair b
    with centre c, context o and negatives n_1..n_k:
        loss_b = -log sigmoid(C[o] . W[c]) - sum_j log sigmoid(-C[n_j] . W[c])
    Returns the mean over b of loss_b as a Python float. Must stay finite and
    exact for scores as large as |C[v] . W[c]| ~ 1000 (the handout shows how).
    """
    # BEGIN SOLUTION
    w = W[centers]  # (B, d)
    pos = np.sum(C[contexts] * w, axis=1)  # (B,) scores of the true contexts
    neg = np.einsum("bkd,bd->bk", C[negatives], w)  # (B, k) scores of the negatives
    # log sigmoid(x) = -logaddexp(0, -x), finite for any x
    return float(np.mean(np.logaddexp(0, -pos) + np.logaddexp(0, neg).sum(axis=1)))
    # END SOLUTION


def sgns_gradients(
    W: np.ndarray, C: np.ndarray, centers: np.ndarray, contexts: np.ndarray, negatives: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The gradients of `sgns_loss` (the mean over the batch) with respect to W and C.

    Same arguments as `sgns_loss`. Returns (dW, dC), each (V, d) like W and C:
    zero in the rows of words not in the batch, and summing every contribution
    of an id that occurs several times (in several pairs, or as a context and a
    negative). Must stay finite for large scores, as `sgns_loss`.
    """
    # BEGIN SOLUTION
    B = len(centers)
    w, c_pos, c_neg = W[centers], C[contexts], C[negatives]  # (B, d), (B, d), (B, k, d)
    pos = np.sum(c_pos * w, axis=1)  # (B,)
    neg = np.einsum("bkd,bd->bk", c_neg, w)  # (B, k)
    # sigmoid(x) = exp(-logaddexp(0, -x)): no overflow for any x
    g_pos = -np.exp(-np.logaddexp(0, pos)) / B  # (B,) dL/dpos = sigmoid(pos) - 1 = -sigmoid(-pos)
    g_neg = np.exp(-np.logaddexp(0, -neg)) / B  # (B, k) dL/dneg = sigmoid(neg)
    dW, dC = np.zeros_like(W), np.zeros_like(C)
    # scatter-add: a plain dW[centers] += ... would keep one contribution per repeated id
    np.add.at(dW, centers, g_pos[:, None] * c_pos + np.einsum("bk,bkd->bd", g_neg, c_neg))
    np.add.at(dC, contexts, g_pos[:, None] * w)
    np.add.at(dC, negatives, g_neg[:, :, None] * w[:, None, :])
    return dW, dC
    # END SOLUTION


def sgd_step(
    W: np.ndarray, C: np.ndarray, centers: np.ndarray, contexts: np.ndarray, negatives: np.ndarray, lr: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """One step of gradient descent on `sgns_loss`.

    Returns (W_new, C_new, loss): W - lr * dW and C - lr * dC as new arrays (W and
    C themselves are left unchanged), and the loss at W and C, before the step.
    """
    # BEGIN SOLUTION
    loss = sgns_loss(W, C, centers, contexts, negatives)
    dW, dC = sgns_gradients(W, C, centers, contexts, negatives)
    return W - lr * dW, C - lr * dC, loss
    # END SOLUTION


def train(
    sentences: list[list[int]],
    vocab_size: int,
    dim: int,
    window: int,
    negatives: int,
    lr: float,
    rng: np.random.Generator,
    batch_size: int = 64,
    max_epochs: int = 50,
    tol: float = 1e-3,
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Train SGNS embeddings on a corpus of word ids by minibatch SGD.

    - The pairs are skipgram_pairs(sentences, window); the noise distribution is
      noise_distribution of the corpus's word counts (np.bincount with
      minlength=vocab_size), with the default power.
    - W starts uniform in [-0.5 / dim, 0.5 / dim), drawn from rng with shape
      (vocab_size, dim); C starts at zero.
    - Each epoch visits the pairs in a new order (a permutation drawn from rng),
      in batches of batch_size consecutive pairs (the last may be smaller); each
      batch draws its (batch, negatives) negatives with sample_negatives(noise,
      ..., rng) and takes one sgd_step with learning rate lr.
    - losses[e] is the mean of epoch e's batch losses. Training stops after the
      first epoch e > 0 with losses[e - 1] - losses[e] < tol * losses[e - 1], or
      after max_epochs epochs.
    Use no randomness but rng. Returns (W, C, losses), losses a list of floats.
    """
    # BEGIN SOLUTION
    pairs = skipgram_pairs(sentences, window)  # (P, 2)
    counts = np.bincount([w for sentence in sentences for w in sentence], minlength=vocab_size)  # (V,)
    noise = noise_distribution(counts)
    W = rng.uniform(-0.5 / dim, 0.5 / dim, size=(vocab_size, dim))
    C = np.zeros((vocab_size, dim))
    losses: list[float] = []
    for epoch in range(max_epochs):
        shuffled = pairs[rng.permutation(len(pairs))]
        batch_losses = []
        for start in range(0, len(shuffled), batch_size):
            centers, contexts = shuffled[start : start + batch_size].T  # (b,), (b,)
            noise_ids = sample_negatives(noise, (len(centers), negatives), rng)  # (b, k)
            W, C, loss = sgd_step(W, C, centers, contexts, noise_ids, lr)
            batch_losses.append(loss)
        losses.append(float(np.mean(batch_losses)))
        if epoch > 0 and losses[-2] - losses[-1] < tol * losses[-2]:  # the loss stopped improving
            break
    return W, C, losses
    # END SOLUTION


def cosine_similarities(E: np.ndarray, word: int) -> np.ndarray:
    """The cosine similarity of every row of E with row `word`.

    E: (V, d) embeddings with no zero row. Returns (V,) float64:
    E[v] . E[word] / (|E[v]| |E[word]|); entry `word` is 1 (up to rounding).
    """
    # BEGIN SOLUTION
    norms = np.linalg.norm(E, axis=1)  # (V,)
    return E @ E[word] / (norms * norms[word])
    # END SOLUTION


def most_similar(E: np.ndarray, word: int, topn: int = 5) -> list[int]:
    """The `topn` words closest to `word` by cosine similarity, closest first.

    E: (V, d); `word` itself is never in the result. Returns a Python list of
    int ids (e.g. [int(i) for i in ...]), not an array.
    """
    # BEGIN SOLUTION
    sims = cosine_similarities(E, word)  # (V,), a new array
    sims[word] = -np.inf  # never the word itself
    return [int(i) for i in np.argsort(-sims)[:topn]]
    # END SOLUTION


def analogy(E: np.ndarray, a: int, b: int, c: int, topn: int = 1) -> list[int]:
    """Solve "a is to b as c is to ?" by vector offset (3CosAdd).

    E: (V, d). The query is q = E[b] - E[a] + E[c], from the rows as given (not
    normalised first). Returns the `topn` words with the highest cosine
    similarity to q, highest first, never a, b or c, as a Python list of ints.
    """
    # BEGIN SOLUTION
    q = E[b] - E[a] + E[c]  # (d,)
    sims = E @ q / (np.linalg.norm(E, axis=1) * np.linalg.norm(q))  # (V,)
    sims[[a, b, c]] = -np.inf  # the question's own words are no answer
    return [int(i) for i in np.argsort(-sims)[:topn]]
    # END SOLUTION
