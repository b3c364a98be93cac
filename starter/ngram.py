# Starter code generated from the reference solution by `autograder release`.
# Replace each `raise NotImplementedError` with your implementation.
"""Component `ngram`: a count-based n-gram language model.

A sentence is a list of word strings. Before counting, every sentence is padded
with n - 1 BOS tokens in front and one EOS token at the end. BOS is only ever
history, never predicted; EOS is predicted like any other word.

Plain Python; numpy is used only for the random generator passed to `sample`.
Never modify the arguments you are given.

What you may not use here (written by `autograder release` from grading.yaml):
No module or call is forbidden in this component.

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
from collections import Counter
from typing import Sequence

import numpy as np

BOS = "<s>"
EOS = "</s>"


def pad_sentence(tokens: list[str], n: int) -> list[str]:
    """Pad one sentence for an n-gram model.

    Returns a new list: n - 1 copies of BOS, then `tokens`, then one EOS.
    For n == 1 there is no BOS: `tokens + [EOS]`.
    """
    raise NotImplementedError("pad_sentence is not implemented yet")


def count_ngrams(sentences: list[list[str]], n: int) -> dict[tuple[str, ...], int]:
    """Count every n-gram of every padded sentence (see `pad_sentence`).

    An n-gram is a tuple of n consecutive tokens of a padded sentence; a padded
    sentence of length L holds L - n + 1 of them. Returns a dict (a Counter is
    fine) mapping each n-gram that occurs to its count, summed over sentences.
    """
    raise NotImplementedError("count_ngrams is not implemented yet")


class NGramLM:
    """An n-gram language model with optional add-k smoothing.

    P(w | h) depends only on the history h = the last n - 1 tokens before w.

    Public attributes:
        n (int): the order; 1 = unigram (empty history), 2 = bigram, ...
        k (float): the add-k constant; 0 means unsmoothed maximum likelihood.
        vocab (set[str]): after `fit`, every word type seen in training plus
            EOS, never BOS. These are the words the model can predict.
    Any other attributes (the counts) are up to you.
    """

    def __init__(self, n: int, k: float = 0.0):
        """Store `n` and `k`; the model holds no counts until `fit`."""
        raise NotImplementedError("NGramLM.__init__ is not implemented yet")

    def fit(self, sentences: list[list[str]]) -> NGramLM:
        """Count n-grams and histories in `sentences` and build `vocab`.

        Replaces whatever an earlier `fit` learned. Returns self.
        """
        raise NotImplementedError("NGramLM.fit is not implemented yet")

    def prob(self, word: str, context: Sequence[str]) -> float:
        """P(word | context) as a Python float.

        Only the history h = the last n - 1 tokens of `context` matter; a
        shorter context is left-padded with BOS first (so context [] means
        "start of sentence"). With C the training counts and
        C(h) = sum over w' of C(h, w'):
            k == 0: C(h, word) / C(h), and 0.0 when C(h) == 0;
            k > 0:  (C(h, word) + k) / (C(h) + k * len(vocab)).
        """
        raise NotImplementedError("NGramLM.prob is not implemented yet")

    def next_token_distribution(self, context: Sequence[str]) -> dict[str, float]:
        """Map every word of `vocab` to `prob(word, context)`."""
        raise NotImplementedError("NGramLM.next_token_distribution is not implemented yet")

    def sentence_logprob(self, tokens: list[str]) -> float:
        """Natural-log probability of `tokens` followed by EOS.

        The sum of log P(w_i | history) over every word of the padded sentence
        after the BOS padding, EOS included (len(tokens) + 1 terms). Returns
        -inf (never raises) when any of these probabilities is 0.
        """
        raise NotImplementedError("NGramLM.sentence_logprob is not implemented yet")

    def perplexity(self, sentences: list[list[str]]) -> float:
        """Perplexity of the model on `sentences`.

        exp(-(sum of sentence_logprob) / N), where N counts every predicted
        token: the words of each sentence plus one EOS per sentence.
        Returns inf (never raises) when some sentence has probability 0.
        """
        raise NotImplementedError("NGramLM.perplexity is not implemented yet")

    def sample(self, rng: np.random.Generator, max_len: int = 50) -> list[str]:
        """Generate one sentence, word by word, starting from the BOS history.

        For each next word, draw one word from `next_token_distribution(history)`
        using `rng` (e.g. `rng.choice` over the words with their probabilities).
        Stop when EOS is drawn or after `max_len` words. Returns the words
        drawn, without BOS and EOS.
        """
        raise NotImplementedError("NGramLM.sample is not implemented yet")
