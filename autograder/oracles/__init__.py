"""The grader's own oracles and mistake simulators, one module per component: `ref.oracles.<component>`.

Staff side only: these compute right answers (independently of the reference solutions) and the wrong
answers of classic mistakes, so a student bundle never holds this package. Checks reach them only
through the `ref` given to `t.expect` and hint lambdas, which a bundle replays and never runs.
"""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
