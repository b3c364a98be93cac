"""The grader's own oracles and mistake simulators, one module per component: `ref.oracles.<component>`.

Staff side only: these compute right answers (independently of the reference solutions) and the wrong
answers of classic mistakes, so a student bundle never holds this package. Checks reach them only
through the `ref` given to `t.expect` and hint lambdas, which a bundle replays and never runs.
"""
import importlib


def __getattr__(name: str):
    """`ref.oracles.ngram`: a component's oracles are imported when its cases first ask for them (those of torch's
    components import torch, which a check of ngram must not pay for)."""
    if name.startswith("_"):
        raise AttributeError(name)
    return importlib.import_module(f"{__name__}.{name}")
