"""Gradient cases: student and reference get the same weights, the same inputs
and the same random upstream gradient; every output, every parameter gradient
and every input gradient is compared.

The reference runs here, in the parent. The student's pass runs in the worker,
driven through the generic remote calls: inputs are placed there with
`requires_grad`, the output stays there, `torch.autograd.backward` is called
there with the parent's upstream gradient, and the `.grad` of each input and
parameter comes back as data. Outputs are always compared before gradients,
so an all-zero implementation never passes on its gradients alone.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .rounding import rounded
from .sandbox.host.proxy import Remote
from .tensors import deferred, is_tensor

torch = deferred("torch")


def random_like(rng: np.random.Generator, t: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return torch.from_numpy(rng.normal(scale=scale, size=tuple(t.shape))).to(t.dtype)


def fill_parameters(rng: np.random.Generator, module: torch.nn.Module, scale: float = 0.5) -> torch.nn.Module:
    """Random, non-symmetric weights (so a missing transpose shows) drawn from the case's RNG."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(random_like(rng, p, scale))
    return module


def load_reference_weights(t, student_module: Remote, reference_module: torch.nn.Module) -> None:
    """Give the student's module the reference's weights, dtype included, by state-dict name."""
    want = t.expect(lambda ref: {k: v.detach().clone() for k, v in reference_module.state_dict().items()})
    got = t.student.call(student_module.state_dict)
    if not isinstance(got, dict):
        t.fail(f"state_dict() returned {type(got).__name__}; is your model a torch.nn.Module?")
    shapes = {k: tuple(v.shape) for k, v in got.items() if is_tensor(v, subclasses=True)}
    missing = [k for k in want if k not in shapes]
    extra = [k for k in shapes if k not in want]
    wrong = [f"{k} {shapes[k]} (expected {tuple(want[k].shape)})" for k in want if k in shapes and shapes[k] != tuple(want[k].shape)]
    if missing or extra or wrong:
        problems = [f"missing {', '.join(missing)}"] * bool(missing) + [f"unexpected {', '.join(extra)}"] * bool(extra)
        t.fail("The model's parameters do not match the required names and shapes: "
               + "; ".join(problems + [f"wrong shape: {', '.join(wrong)}"] * bool(wrong))
               + f". Expected exactly: {', '.join(f'{k} {tuple(v.shape)}' for k, v in want.items())}.")
    if next(iter(want.values())).dtype == torch.float64:
        student_module.double()
    student_module.load_state_dict(want, strict=True)


def check_gradients(t, student_fn: Remote, reference_fn, args: Sequence, *, grad_args: Sequence[int], names: Sequence[str],
                    outputs: Sequence[str], parameters: tuple[Remote, torch.nn.Module] | None = None) -> None:
    """Compare outputs, then input gradients (args at `grad_args`, called `names`), then parameter gradients; the
    outputs are judged together, then all gradients together (Trial.close_each: the message says which match).

    `outputs` names the tensors of the output in order (e.g. "hs", "h_last"), nested tuples flattened.
    `parameters` = (student module, reference module) whose weights were loaded with load_reference_weights.
    A student object among `args` (a Remote) reaches the reference as it is: the reference callable
    uses its own module in that place. A low-precision reference pass is judged against float64
    (rounding.rounded); its module must then be `reference_fn` itself or among `args`, to be converted too.
    """
    upstream, (ref_out, ref_grads, param_grads) = t.expect(lambda ref: _reference_pass(t.rng, reference_fn, args, grad_args, parameters))
    stu_args = [t.student.put(_leaf(a, True)) if i in grad_args else a for i, a in enumerate(args)]
    out = t.student.call(student_fn, *stu_args, keep=True)
    got = _tensors_or_fail(t, t.student.value(out), len(ref_out), outputs)
    t.close_each("the outputs", [(name, functools.partial(_compare_output, t, g, w, name))
                                 for name, g, w in zip(outputs, got, ref_out)])
    leaves = t.student.torch.utils._pytree.tree_leaves(out, keep=True)
    tensors = [t.student.call(t.student.operator.getitem, leaves, i, keep=True) for i in range(len(ref_out))]
    t.student.torch.autograd.backward(tensors, upstream)

    # (name, the student's .grad, still in the worker, and the reference's), fetched only when judged
    grads = [(name, stu_args[i].grad, want, f"the gradient of {name}") for i, name, want in zip(grad_args, names, ref_grads)]
    grads += [(pname, _parameter(parameters[0], pname).grad, want, f"the gradient of parameter {pname}")
              for pname, want in param_grads.items()]
    t.close_each("the gradients", [(name, functools.partial(_compare_grad, t, grad, want, what))
                                   for name, grad, want, what in grads])


def _reference_pass(rng: np.random.Generator, reference_fn, args: Sequence, grad_args: Sequence[int], parameters):
    """A random upstream gradient drawn for the reference's outputs, then (outputs, the gradients of the
    inputs at `grad_args`, the gradients of the reference module's parameters by name): all data."""
    with torch.no_grad():
        shapes = _tensors(reference_fn(*args))
    upstream = [random_like(rng, o) for o in shapes]
    module = parameters[1] if parameters is not None else None
    return upstream, rounded(_backward, reference_fn, list(args), upstream, module, tuple(grad_args))


def _backward(reference_fn, args: list, upstream: list, module, grad_args: tuple):
    ref_args = [_leaf(a, i in grad_args) for i, a in enumerate(args)]
    ref_out = _tensors(reference_fn(*ref_args))
    torch.autograd.backward(ref_out, upstream)
    params = module.named_parameters() if module is not None else ()
    return [o.detach() for o in ref_out], [ref_args[i].grad for i in grad_args], {name: p.grad for name, p in params}


def _leaf(value, requires_grad: bool):
    if is_tensor(value, subclasses=True):
        return value.detach().clone().requires_grad_(requires_grad)
    return value


def _tensors(out) -> list[torch.Tensor]:
    """The tensors of a (nested) tuple/list output, in order."""
    if is_tensor(out, subclasses=True):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _tensors(item)]
    raise TypeError(type(out).__name__)


def _tensors_or_fail(t, got, count: int, outputs: Sequence[str]) -> list[torch.Tensor]:
    try:
        tensors = _tensors(got)
    except TypeError:
        tensors = None
    if tensors is None or len(tensors) != count or not all(is_tensor(x) for x in tensors):
        t.fail(f"Expected the output to hold {count} tensor(s): {', '.join(outputs)}; got {_describe(got)}.")
    return tensors


def _describe(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of " + ", ".join(_describe(v) for v in value)
    if is_tensor(value, subclasses=True):
        return f"tensor{tuple(value.shape)}"
    return type(value).__name__


def _compare_output(t, got: torch.Tensor, want, name: str) -> None:
    t.close(got.detach(), want, name)
    if not got.requires_grad:
        t.fail(f"{name} is detached from the autograd graph, so no gradient can flow back through it "
               "(.detach(), .data, .item(), numpy or torch.no_grad() in the forward pass?).")


def _parameter(module: Remote, name: str) -> Remote:
    """The student's parameter by its dotted name ("encoder.weight")."""
    for part in name.split("."):
        module = getattr(module, part)
    return module


def _compare_grad(t, remote: Remote, want: torch.Tensor, what: str) -> None:
    got = t.student.value(remote)
    if got is None:
        t.fail(f"{what}: no gradient reached it; the computation must use it through differentiable torch operations.")
    t.close(got, want, what)
