"""Calls every function a student bundle ships with the inputs of every solution function, and reports any
that returns the solution's result (tests/test_bundle.py). Run as a script, as an unprivileged user when
started by root, from a scratch folder:

    python -I tests/bundle_probe.py BUNDLE INPUTS OUT [FILES]

INPUTS is a torch.save'd list of recorded solution calls: (solution function, args, kwargs, result), with
modules turned into plain data (`as_data`). Each bundle function runs in a forked child with a time limit,
so whatever it does to its process (a seccomp filter, a patched torch, a killed process group) is undone
for the next. OUT gets a JSON list of [bundle function, solution function] matches. FILES, a glob inside BUNDLE, probes
those files only (default: every .py file).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import math
import os
import select
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch

CALL_SECONDS = 5
CHILD_SECONDS = 120
NOBODY = 65534


class NotData(Exception):
    """A recorded value that is not plain data (an RNG, a model object): the call is not recorded."""


def as_data(value):
    """A recorded value with every torch module turned into {"__module__": ...} of its parameters, buffers,
    submodules and plain attributes: the bundle gets the weights, never the solution's code."""
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, (np.ndarray, np.generic)):
        return value
    if isinstance(value, torch.nn.Module):
        state = {"params": {k: v.detach().clone() for k, v in value.named_parameters(recurse=False)},
                 "children": {k: as_data(m) for k, m in value.named_children()},
                 "attrs": {k: v for k, v in vars(value).items() if not k.startswith("_") and type(v) in (int, float, bool, str)}}
        return {"__module__": state}
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(as_data(v) for v in value)
    if isinstance(value, (dict, set)):
        return {k: as_data(v) for k, v in value.items()} if isinstance(value, dict) else {as_data(v) for v in value}
    raise NotData(type(value).__name__)


def from_data(value):
    if isinstance(value, dict) and list(value) == ["__module__"]:
        state = value["__module__"]
        module = torch.nn.ModuleList() if all(k.isdigit() for k in state["children"]) and state["children"] else torch.nn.Module()
        for k, child in state["children"].items():
            module.add_module(k, from_data(child))
        for k, p in state["params"].items():
            module.register_parameter(k, torch.nn.Parameter(p))
        for k, v in state["attrs"].items():
            setattr(module, k, v)
        return module
    if isinstance(value, (list, tuple)):
        return type(value)(from_data(v) for v in value)
    if isinstance(value, dict):
        return {k: from_data(v) for k, v in value.items()}
    return value


def nontrivial(value) -> bool:
    """A result that no function returns by coincidence: an array of several distinct values, a collection of
    several items, or a number that is not a round one."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        values = value.detach().reshape(-1) if isinstance(value, torch.Tensor) else value.reshape(-1)
        return len(values) >= 4 and len(set(values.tolist())) >= 2
    if isinstance(value, (list, tuple, dict, set)):
        return len(value) >= 2 or any(nontrivial(v) for v in (value.values() if isinstance(value, dict) else value))
    if isinstance(value, float):
        return math.isfinite(value) and value != round(value)
    return False


def leaves(value) -> list:
    """The tensors and arrays inside a (nested) tuple, list or dict."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    return [value] if isinstance(value, (torch.Tensor, np.ndarray)) else []


def parts(result, inputs) -> list:
    """The result, and every tensor or array inside it (hs of (hs, (h, c)), say) that could not be returned by
    coincidence, nor by handing back an input: a function that computes part of a solution's result computes
    that solution too."""
    given = leaves(inputs)
    computed = [p for p in leaves(result) if nontrivial(p) and not any(same(p, g) for g in given)]
    return [result, *computed] if isinstance(result, (list, tuple)) else [result]


def same(a, b) -> bool:
    if isinstance(b, torch.Tensor):
        return type(a) is torch.Tensor and a.shape == b.shape and a.dtype == b.dtype and bool(torch.allclose(
            a.detach().double(), b.double(), rtol=1e-6, atol=1e-9, equal_nan=True))
    if isinstance(b, np.ndarray):
        return type(a) is np.ndarray and a.shape == b.shape and np.allclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True)
    if isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(b, dict):
        return isinstance(a, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in b)
    if isinstance(b, float):
        return isinstance(a, (float, np.floating)) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return type(a) is type(b) and a == b


def bundle_functions(bundle: Path, files: str) -> dict[str, object]:
    """Every function defined in a Python file of the bundle that `files` (a glob) names, module-level or in a class, by
    qualified name."""
    sys.path.insert(0, str(bundle))
    found = {}
    for path in sorted(p for p in bundle.glob(files) if p.name != "__main__.py"):  # a __main__ runs a program on import
        relative = path.relative_to(bundle).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        try:
            module = importlib.import_module(name)
        except Exception:  # a file that needs its own process (the worker) or a test runner: its functions still count
            spec = importlib.util.spec_from_file_location(f"probe_{len(found)}", path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                print(f"cannot load {relative}: {exc}", file=sys.stderr)
                continue
        for owner in [module, *(c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__)]:
            for attr, fn in vars(owner).items():
                fn = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
                if inspect.isfunction(fn) and fn.__module__ == module.__name__:
                    found[f"{relative}:{fn.__qualname__}"] = fn
    return found


def calls_for(fn, args, kwargs) -> list[tuple[tuple, dict]]:
    """The recorded positional arguments, completed by name from the recorded keywords where `fn` needs more."""
    try:
        signature = inspect.signature(fn)
        bound = signature.bind_partial(*args)
    except (TypeError, ValueError):
        return []
    extra = {k: v for k, v in kwargs.items() if k in signature.parameters and k not in bound.arguments}
    return [(args, extra)]


class CallTimeout(Exception):
    pass


def _timeout(signum, frame):
    raise CallTimeout


def matches(fn, recorded, report) -> None:
    """report(solution) for each solution function one of whose recorded results `fn` reproduces."""
    signal.signal(signal.SIGALRM, _timeout)
    for solution, args, kwargs, result in recorded:
        for call_args, call_kwargs in calls_for(fn, from_data(args), from_data(kwargs)):
            signal.alarm(CALL_SECONDS)
            try:
                got = fn(*call_args, **call_kwargs)
            except BaseException:
                continue
            finally:
                signal.alarm(0)
            if any(same(got, part) for part in parts(result, (args, kwargs))):
                report(solution)
                return


def unprivileged() -> None:
    """In the child: a session of its own, and as root, the uid nobody, so that a bundle function given a
    recorded integer as a pid or uid can signal or change nothing of anyone else's."""
    os.setsid()
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)


def probe(bundle: Path, recorded: list, files: str = "**/*.py") -> list[list[str]]:
    torch.set_num_threads(1)  # so that forked children hold no thread pool
    recorded = [r for r in recorded if nontrivial(r[3])]
    found = []
    for name, fn in bundle_functions(bundle, files).items():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                unprivileged()
                matches(fn, recorded, lambda solution: os.write(write, f"{solution}\n".encode()))
            finally:
                os._exit(0)
        os.close(write)
        found += [[name, solution] for solution in _lines(read, pid)]
    return found


def _lines(read: int, pid: int) -> list[str]:
    """What the child reported before it ended, or before CHILD_SECONDS, when it is killed."""
    chunks, deadline = [], time.monotonic() + CHILD_SECONDS
    while (wait := deadline - time.monotonic()) > 0 and select.select([read], [], [], wait)[0]:
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return b"".join(chunks).decode().split()


if __name__ == "__main__":
    bundle, inputs, out = (Path(a) for a in sys.argv[1:4])
    Path(out).write_text(json.dumps(probe(bundle, torch.load(inputs, weights_only=False), *sys.argv[4:5])))
