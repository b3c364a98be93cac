"""Forbidden operators are judged where they run: every route to a forbidden kernel is refused in the worker.

Each route is a function `attack` in a component's file that reaches a kernel its component forbids some other way
than by a forbidden Python name: by its schema name, through torch.ops, TorchScript, torch.compile, a subclass,
PyTorch's own Python implementations, a custom op. The worker must refuse it where it runs and say which operator
and which line of the student's led there; the static scan, which only explains, says what it can read. The routes
of issue 39 come first: on 2885c7d each of them earned full marks.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from attacks import tier
from conftest import grade_folder, scores_by_component

from autograder.cases import TIMING
from autograder.forbidden import scan_forbidden
from autograder.report import leaderboard, review_notes
from autograder.sandbox.host.process import Deadline, Limits, start_template, template_modules
from autograder.sandbox.host.proxy import ForbiddenUsed, Slot
from autograder.sandbox.worker.forbidden_ops import overloads

HERE = "  # <- the student's line"  # marks the line the refusal must name


@dataclass(frozen=True)
class Route:
    name: str
    component: str
    code: str  # the body of attack(...), whose line marked HERE leads to the kernel
    refused: str  # what the worker says it refused
    explained: tuple[str, ...] | str = ()  # what the static scan says of the route, where it can read it

    def __post_init__(self):
        if isinstance(self.explained, str):
            object.__setattr__(self, "explained", (self.explained,))


LSTM_ARGS = "x, h0, c0, W_ih, W_hh, b"
LSTM_CALL = "(x, [h0[None], c0[None]], [W_ih, W_hh, b, torch.zeros_like(b)], True, 1, 0.0, False, False, True)"
ROUTES = [
    Route("an operator fetched by its schema name", "lstm",
          f'    op = torch._C._jit_get_operation("aten::lstm")[0]\n    return op{LSTM_CALL}{HERE}\n',
          "the operator aten::lstm", "mention of the operator aten::lstm by its schema name"),
    Route("torch.ops.aten.lstm inside a TorchScript function", "lstm",
          f"    return scripted({LSTM_ARGS}){HERE}\n\n\n@torch.jit.script\n"
          f"def scripted({LSTM_ARGS}):\n    return torch.ops.aten.lstm{LSTM_CALL}\n",
          "the operator aten::lstm", ("use of the operator aten::lstm (torch.ops.aten.lstm)",)),
    Route("PyTorch's own Python decomposition", "lstm",
          f"    from torch._decomp import decompositions\n    return decompositions.lstm_impl{LSTM_CALL}{HERE}\n",
          "the operator aten::lstm, through PyTorch's Python implementation torch._decomp.decompositions.lstm_impl"),
    Route("the decomposition table", "lstm",
          f"    import torch._decomp\n    impl = torch._decomp.decomposition_table[torch.ops.aten.lstm.input]\n"
          f"    return impl{LSTM_CALL}{HERE}\n",
          "the operator aten::lstm, through PyTorch's Python implementation torch._decomp.decompositions.lstm_impl",
          "mention of the operator aten::lstm (torch.ops.aten.lstm.input)"),
    Route("a helper only the decomposition uses", "lstm",
          f"    from torch._decomp import decompositions\n"
          f"    return decompositions.one_layer_lstm(x.transpose(0, 1), (h0, c0), [W_ih, W_hh, b, torch.zeros_like(b)]){HERE}\n",
          "the operator aten::lstm, through PyTorch's Python implementation torch._decomp.decompositions.one_layer_lstm"),
    Route("an overload of torch.ops.aten", "lstm", f"    return torch.ops.aten.lstm.input{LSTM_CALL}{HERE}\n",
          "the operator aten::lstm", "use of the operator aten::lstm (torch.ops.aten.lstm.input)"),
    Route("torch.compile", "lstm", f'    return torch.compile(torch.lstm, backend="eager"){LSTM_CALL}{HERE}\n',
          "the operator aten::lstm, through PyTorch's Python implementation torch._decomp.decompositions.lstm_impl",
          "mention of the operator aten::lstm (torch.lstm)"),
    Route("the C namespace of the kernels, by built names", "lstm",
          "    fn = getattr(getattr(torch._C, '_Variable' + 'Functions'), 'lstm' + '_cell')\n"
          f"    return fn(x[:, 0], (h0, c0), W_ih, W_hh, b){HERE}\n",
          "the operator aten::lstm_cell"),
    Route("a __torch_function__ subclass", "lstm",
          "    class Wrapped(torch.Tensor):\n        @classmethod\n"
          "        def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
          f"            return super().__torch_function__(func, types, args, kwargs or {{}}){HERE}\n"
          "    return torch.lstm_cell(x[:, 0].as_subclass(Wrapped), (h0, c0), W_ih, W_hh, b)\n",
          "the operator aten::lstm_cell", "use of the operator aten::lstm_cell (torch.lstm_cell)"),
    Route("a custom operator of torch.library", "lstm",
          '    @torch.library.custom_op("mine::cell", mutates_args=())\n'
          "    def cell(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, W_ih: torch.Tensor, W_hh: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
          f"        return torch.lstm_cell(x, (h, c), W_ih, W_hh, b)[0]{HERE}\n"
          "    return cell(x[:, 0], h0, c0, W_ih, W_hh, b)\n",
          "the operator aten::lstm_cell", "use of the operator aten::lstm_cell (torch.lstm_cell)"),
    Route("the refusals' registrations taken back by running weakref's finalizers", "lstm",
          "    import weakref\n    for finalizer in list(weakref.finalize._registry):\n        finalizer()\n"
          f"    return torch.lstm_cell(x[:, 0], (h0, c0), W_ih, W_hh, b){HERE}\n",
          "the operator aten::lstm_cell", "use of the operator aten::lstm_cell (torch.lstm_cell)"),
    Route("aten::scaled_dot_product_attention by its schema name", "attention",
          f'    op = torch._C._jit_get_operation("aten::scaled_dot_product_attention")[0]\n    return op(Q, K, V){HERE}\n',
          "the operator aten::scaled_dot_product_attention",
          "mention of the operator aten::scaled_dot_product_attention by its schema name"),
    Route("torch._C._nn, where F.scaled_dot_product_attention lives", "attention",
          f"    return torch._C._nn.scaled_dot_product_attention(Q, K, V){HERE}\n",
          "call of torch.nn.functional.scaled_dot_product_attention",
          "use of the operator aten::scaled_dot_product_attention (torch._C._nn.scaled_dot_product_attention)"),
    Route("the CPU flash kernel through torch.ops", "attention",
          f"    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(Q, K, V)[0]{HERE}\n",
          "the operator aten::_scaled_dot_product_flash_attention_for_cpu",
          "use of the operator aten::_scaled_dot_product_flash_attention_for_cpu "
          "(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)"),
    Route("the CPU flash kernel's Python decomposition", "attention",
          "    from torch._decomp import decompositions\n"
          f"    return decompositions.scaled_dot_product_flash_attention_for_cpu(Q, K, V)[0]{HERE}\n",
          "the operator aten::_scaled_dot_product_flash_attention_for_cpu, through PyTorch's Python implementation "
          "torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu"),
    Route("flex attention's public function (forbidden nowhere on 2885c7d)", "attention",
          f"    from torch.nn.attention.flex_attention import flex_attention\n    return flex_attention(Q, K, V){HERE}\n",
          "call of torch.nn.attention.flex_attention.flex_attention",
          ("mention of torch.nn.attention.flex_attention.flex_attention in an import",
           "use of torch.nn.attention.flex_attention.flex_attention")),
    Route("flex attention's higher-order operator", "attention",
          f"    import torch._higher_order_ops.flex_attention\n    return torch.ops.higher_order.flex_attention(Q, K, V){HERE}\n",
          "the operator higher_order::flex_attention",
          ("mention of the operator higher_order::flex_attention (torch._higher_order_ops.flex_attention) in an import",
           "use of the operator higher_order::flex_attention (torch.ops.higher_order.flex_attention)")),
    Route("the softmax that zeroes fully masked rows", "attention",
          f"    return torch.ops.aten._safe_softmax.default(Q @ K.transpose(-2, -1), -1) @ V{HERE}\n",
          "the operator aten::_safe_softmax", "use of the operator aten::_safe_softmax (torch.ops.aten._safe_softmax.default)"),
    Route("layer norm traced by torch.compile", "transformer",
          f'    return torch.compile(lambda x: torch.layer_norm(x, (x.shape[-1],)), backend="eager")(x){HERE}\n',
          "the operator aten::layer_norm", "use of the operator aten::layer_norm (torch.layer_norm)"),
    Route("batch norm over the transposed features", "transformer",
          "    flat = x.reshape(-1, x.shape[-1]).T.contiguous()  # each position a channel\n"
          f"    return torch.ops.aten.batch_norm(flat, None, None, None, None, True, 0.0, 1e-5, False).T.reshape(x.shape){HERE}\n",
          "the operator aten::batch_norm", "use of the operator aten::batch_norm (torch.ops.aten.batch_norm)"),
    Route("RMS norm of the centred input", "transformer",
          f"    return torch.rms_norm(x - x.mean(-1, keepdim=True), (x.shape[-1],)){HERE}\n",
          "the operator aten::rms_norm", "use of the operator aten::rms_norm (torch.rms_norm)"),
    Route("PyTorch's reference normalisation", "transformer",
          f"    import torch._refs\n    return torch._refs._normalize(x, [x.dim() - 1], 1e-5)[0]{HERE}\n",
          "the operator aten::native_layer_norm, through PyTorch's Python implementation torch._refs._normalize"),
]
ARGS = {"lstm": LSTM_ARGS, "attention": "Q, K, V", "transformer": "x"}
SHAPES = {"lstm": [(2, 3, 4), (2, 5), (2, 5), (20, 4), (20, 5), (20,)], "attention": [(2, 2, 4, 8)] * 3, "transformer": [(2, 3, 8)]}


def attack_file(route: Route) -> str:
    return f"import torch\n\n\ndef attack({ARGS[route.component]}):\n{route.code}"


@pytest.fixture(scope="module")
def template():
    """One template for every route, with torch.compile's modules imported (as cases.IMPORTS has a template do)."""
    started = start_template(tier(), template_modules(("torch._dynamo",)))
    yield started
    started.close()


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_every_route_to_a_forbidden_operator_is_refused_where_it_runs(route, rubric, template, tmp_path):
    component = rubric.component(route.component)
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / component.file).write_text(attack_file(route))
    line = next(n for n, text in enumerate(attack_file(route).splitlines(), 1) if text.endswith(HERE))
    slot = Slot(folder, component.forbidden, Limits(), tier(), template=template)
    try:
        student = slot.proxy(Deadline.after(120))
        module = getattr(student, component.file.removesuffix(".py"))
        with pytest.raises(ForbiddenUsed) as refused:
            module.attack(*[torch.randn(shape, dtype=torch.float64) for shape in SHAPES[route.component]])
    finally:
        slot.stop()
    assert str(refused.value).split("; ")[0] == f"{route.refused} ({component.file}, line {line})"
    explained = [finding.split(": ", 1)[1] for finding in scan_forbidden(folder / component.file, component.forbidden)]
    assert explained == list(route.explained), explained


def test_every_operator_the_rubric_forbids_is_one_of_this_torch(rubric):
    """The rubric may name operators another torch lacks (a worker has nothing to refuse there), so its loader accepts
    them; under the pinned torch each must exist, or a misspelt name would forbid nothing."""
    wanted = {op for c in rubric.components for op in c.forbidden.operators}
    assert wanted and [op for op, names in overloads(sorted(wanted)).items() if not names] == []


def test_the_scan_explains_operator_names_with_their_lines(rubric, tmp_path):
    """The scan reads what it can of the routes: torch names of a forbidden operator and its schema name in a string,
    called or merely named; a name that only shares a word with an operator is no finding."""
    source = tmp_path / "lstm.py"
    source.write_text('import torch\nfrom torch import _VF\n\n\ndef f(x, s):\n    a = torch.ops.aten.lstm_cell.default\n'
                      '    b = _VF.gru_cell(x, s)\n    c = "aten::rnn_tanh.input"\n    return torch.lstm_mine(a, b, c)\n')
    assert scan_forbidden(source, rubric.component("lstm").forbidden) == [
        "line 6: mention of the operator aten::lstm_cell (torch.ops.aten.lstm_cell.default)",
        "line 7: use of the operator aten::gru_cell (torch._VF.gru_cell)",
        "line 8: mention of the operator aten::rnn_tanh by its schema name"]


def with_body(rubric, file: str, function: str, body: str) -> str:
    """The reference's `file` with the body of `function` (its BEGIN/END SOLUTION block) replaced by `body`."""
    source = (rubric.solutions_dir / file).read_text()
    head, rest = source.split(f"\ndef {function}(", 1)
    signature, block = rest.split("    # BEGIN SOLUTION\n", 1)
    after = block.split("    # END SOLUTION\n", 1)[1]
    return f"{head}\ndef {function}({signature}{body}{after}"


@pytest.mark.slow
def test_issue_39s_routes_earn_nothing_rank_nowhere_and_no_note_calls_them_unrun(rubric, tmp_path):
    """On 2885c7d: lstm_forward through _jit_get_operation scored 19/19 and ranked first at 0.43x the reference;
    scaled_dot_product_attention fetched the same way scored attention 33/33 and causal_mask 10/10."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "lstm.py").write_text(with_body(rubric, "lstm.py", "lstm_forward", ROUTES[0].code.replace(HERE, "")))
    sdpa = '    op = torch._C._jit_get_operation("aten::scaled_dot_product_attention")[0]\n    return op(Q, K, V, attn_mask=mask)\n'
    (folder / "attention.py").write_text(with_body(rubric, "attention.py", "scaled_dot_product_attention", sdpa))
    run = grade_folder(rubric, folder, tmp_path, component_ids=["lstm", "attention", "causal_mask"])
    assert {c: got for c, (got, _) in scores_by_component(run).items()} == {"lstm": 0, "attention": 0, "causal_mask": 0}
    assert all(r.forbidden and "Uses what this component forbids: the operator aten::" in r.output for r in run.results)
    assert any(r.case.check in TIMING for r in run.results if r.case.component == "lstm")
    assert leaderboard(run.results) == [] and review_notes(run.results) == []
