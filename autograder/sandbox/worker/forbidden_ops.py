"""Inside the worker: forbidden operators refused where they run, however they are reached; and Python code refused in
place (`refusing_code`), for the guard's forbidden calls too.

A Python call (`torch.lstm`, `nn.LSTM`), `torch.ops.aten.lstm`, an operator fetched by its schema name
(`torch._C._jit_get_operation("aten::lstm")`), TorchScript, `torch.compile`'s tracing and `__torch_function__`
subclasses all end in PyTorch's dispatcher. There each forbidden operator's kernels, one per dispatch key it has one
for, are replaced by a kernel that refuses: nothing any route reaches computes it. The registration is the dispatcher's
own (what torch.library uses), held only by the worker: a torch.library.Library would also leave a finalizer in
weakref's registry, which student code could call to take the refusals back. No other operator's dispatch changes, so
timing pays nothing.

PyTorch also computes some operators in Python without dispatching them: its decompositions and references (the
functions `torch._decomp` registers for an operator, its Python kernels) and the helpers that only they use
(`one_layer_lstm`), and higher-order operators such as flex attention, which exist only in Python. Those functions
have their code replaced in place, so every reference to them refuses too: a module attribute, a decomposition table,
a dispatcher's Python kernel.

Operators are named as the dispatcher names them, without an overload (`aten::lstm` stands for `aten::lstm.input`
and `aten::lstm.data`); a higher-order operator as `higher_order::NAME`.
"""
from __future__ import annotations

import importlib
import re
import types
import warnings
from collections.abc import Callable

HIGHER_ORDER = "higher_order"
_KEY = re.compile(r"^(\w+)(?:\[alias\])?: registered at", re.MULTILINE)


def overloads(operators: list[str]) -> dict[str, list[str]]:
    """The dispatcher's names of each operator's overloads ("aten::lstm" -> ["aten::lstm.data", "aten::lstm.input"]); []
    where this torch has none (a higher-order operator is its own one overload)."""
    import torch

    found: dict[str, list[str]] = {operator: [] for operator in operators}
    for full in sorted(torch._C._dispatch_get_all_op_names()):
        found.get(full.partition(".")[0], []).append(full)
    for operator in operators:
        namespace, _, name = operator.partition("::")
        if namespace == HIGHER_ORDER and _higher_order(name) is not None:
            found[operator] = [operator]
    return found


def refuse(operators: list[str], refusal: Callable[[str], Callable]) -> list:
    """Refuse every route to `operators`: `refusal(what)` makes the function that runs instead, which records and
    raises. Returns the registrations, which must be kept alive (dropping one brings the kernels back)."""
    if not operators:  # torch stays unimported where the component forbids it
        return []
    import torch

    libraries: dict = {}  # one registration per namespace
    implementations: dict[types.FunctionType, str] = {}
    with warnings.catch_warnings():  # "Overriding a previously registered kernel": intended
        warnings.simplefilter("ignore")
        for operator, names in overloads(operators).items():
            for full in names:
                namespace, _, name = full.partition("::")
                if namespace == HIGHER_ORDER:
                    op = _higher_order(name)
                    _refuse_object(op, refusal(f"the operator {operator}"))
                else:
                    if namespace not in libraries:
                        libraries[namespace] = torch._C._dispatch_library("IMPL", namespace, "", __file__, 0)
                    for key in _kernel_keys(full):
                        libraries[namespace].impl(name, key, refusal(f"the operator {operator}"), False)
                    op = _overload(namespace, name)
                implementations.update(dict.fromkeys(_python_implementations(op), operator))
    for fn, operator in {**implementations, **_helpers(implementations)}.items():
        what = f"the operator {operator}, through PyTorch's Python implementation {fn.__module__}.{fn.__qualname__}"
        fn.__code__ = refusing_code(fn, refusal(what))
    return list(libraries.values())


def _kernel_keys(full: str) -> list[str]:
    """The dispatch keys at which an overload has a kernel of its own, as the dispatcher lists them."""
    import torch

    return [key for key in _KEY.findall(torch._C._dispatch_dump(full)) if key != "debug"]


def _overload(namespace: str, name: str):
    import torch

    base, _, overload = name.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")


def _higher_order(name: str):
    """A higher-order operator, its module imported first (PyTorch imports flex attention's only when it is used)."""
    import torch

    try:
        importlib.import_module(f"torch._higher_order_ops.{name}")
    except ImportError:
        pass
    return getattr(torch.ops.higher_order, name, None)


def _refuse_object(op, refusal: Callable) -> None:
    """A higher-order operator is a Python object: calling it refuses (its class swapped for a refusing subclass,
    so that PyTorch's registries, keyed by the object, still hold it)."""
    op.__class__ = type(type(op).__name__, (type(op),), {"__call__": lambda self, *a, **k: refusal(*a, **k)})


def _python_implementations(op) -> list[types.FunctionType]:
    """The Python functions PyTorch registers to compute `op`: its decompositions and references, its Python kernels,
    and what each wraps."""
    import torch._decomp

    found = [table[op] for table in torch._decomp.global_decomposition_table.values() if op in table]
    found += list(getattr(op, "py_kernels", {}).values())
    return [fn for top in found for fn in _wrapped_chain(top)]


def _wrapped_chain(fn) -> list[types.FunctionType]:
    chain = []
    while isinstance(fn, types.FunctionType) and fn not in chain:
        chain.append(fn)
        fn = getattr(fn, "__wrapped__", None)
    return chain


def _helpers(implementations: dict[types.FunctionType, str]) -> dict[types.FunctionType, str]:
    """The functions that only the implementations (and each other) use, each with the operator of an implementation
    that calls it: what they call by name in their own modules, transitively, less whatever another function of
    PyTorch's Python implementations names, or is registered for an operator of its own (`dropout`, `rsqrt`)."""
    helpers: dict[types.FunctionType, str] = {}
    todo = list(implementations.items())
    while todo:
        fn, operator = todo.pop()
        for name in _names(fn.__code__):
            helper = _innermost(fn.__globals__.get(name))
            if helper is not None and helper.__module__ == fn.__module__ and helper not in implementations and helper not in helpers:
                helpers[helper] = operator
                todo.append((helper, operator))
    others = {fn: _names(fn.__code__) for fn in _python_package_functions() if fn not in implementations}
    registered = _registered()
    while shared := {fn for fn in helpers if fn in registered
                     or any(fn.__name__ in names for user, names in others.items() if user not in helpers)}:
        for fn in shared:
            del helpers[fn]
    return helpers


# Where PyTorch keeps its Python implementations of operators.
PYTHON_PACKAGES = ("torch._decomp", "torch._refs", "torch._prims", "torch._prims_common", "torch._meta_registrations",
                   "torch._higher_order_ops")


def _python_package_functions() -> list[types.FunctionType]:
    """Every function defined in the loaded modules of PYTHON_PACKAGES, each by the code it wraps."""
    import sys

    spaces = [vars(m) for name, m in list(sys.modules.items()) if m is not None and name.startswith(PYTHON_PACKAGES)]
    return list({fn for space in spaces for value in list(space.values())
                 if (fn := _innermost(value)) is not None and fn.__module__ == space["__name__"]})


def _registered() -> set[types.FunctionType]:
    """Every function registered to compute some operator."""
    import torch._decomp

    return {fn for table in torch._decomp.global_decomposition_table.values() for top in table.values() for fn in _wrapped_chain(top)}


def _innermost(value) -> types.FunctionType | None:
    chain = _wrapped_chain(value)
    return chain[-1] if chain else None


def _names(code: types.CodeType) -> set[str]:
    """The global names a code object and the functions nested in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


_MARK = "refusal"


def refusing_code(fn: types.FunctionType, refusal: Callable) -> types.CodeType:
    """Code for `fn` that calls `refusal` with its arguments, to put in place of its own: every reference to `fn` then
    refuses. It holds `refusal` among its constants, so that it needs no global name a student could rebind, and as
    many (unused) free variables as `fn` has cells, as Python requires."""
    free = [f"_{i}" for i in range(len(fn.__code__.co_freevars))]
    source = (f"def outer({', '.join(free)}):\n    def refused(*args, **kwargs):\n        {'; '.join(free) or 'pass'}\n"
              f"        return {_MARK!r}(args, kwargs)\n    return refused\n")
    with warnings.catch_warnings():  # "'str' object is not callable": the constant is replaced below
        warnings.simplefilter("ignore")
        outer = compile(source, fn.__code__.co_filename, "exec")
    inner = next(c for c in next(c for c in outer.co_consts if isinstance(c, types.CodeType)).co_consts if isinstance(c, types.CodeType))
    call = lambda args, kwargs: refusal(*args, **kwargs)  # noqa: E731
    return inner.replace(co_consts=tuple(call if c == _MARK else c for c in inner.co_consts), co_name=fn.__code__.co_name,
                         co_qualname=fn.__code__.co_qualname)


def resolve(dotted: str):
    """The object at a dotted path: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)
