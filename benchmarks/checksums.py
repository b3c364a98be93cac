"""How far correct implementations' timing checksums fall from the reference's, and cheaters', against timing.py's bound.

    .venv/bin/python benchmarks/checksums.py                   # 1000 seeds of every timing case (about 20 minutes on 2 cores)
    .venv/bin/python benchmarks/checksums.py --seeds 50 --variants tests/timing_variants/lstm_fused.py

For each timing case of grading.yaml, on its CPU shapes and on inputs built as the workers build them
(autograder/cases/speed.py), the reference and every correct variant (tests/timing_variants/*.py, and the lstm.py,
attention.py and transformer.py of each folder in tests/alternatives/) run here on one thread, and the worker's own
functions reduce each call to checksums (worker.results, worker.checksums). Each output's discrepancy is printed in
roundings of its norm (unit roundoffs of the reference's dtype times the reference's norm), the unit timing.ROUNDINGS
is given in, and as a multiple of the bound (timing.checksum_misses: above 1 fails a timed block). Correct code: the
largest over the seeds. Cheaters, built from the reference's own results (the outputs of the previous seed's inputs,
as a cache returns them; every output left at zero, as a thread that has not started filling them; the last
position of the first output left at zero, the least unfinished work measured): the smallest over the seeds of their
largest miss, which decides whether a call is caught. Exit status 1 unless every correct implementation stays within
CORRECT_WITHIN of the bound and every cheater misses by CHEATERS_BEYOND times it. --gpu-shapes runs the cases' GPU
shapes here, on the CPU, to see how the differences grow with the shapes (the Transformer's is out of reach).
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

from autograder import timing
from autograder.cases import speed
from autograder.rubric import load_rubric
from autograder.sandbox.worker import worker
from autograder.sandbox.worker.wire import Make

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ROOT / "tests" / "timing_variants"
ALTERNATIVES = ROOT / "tests" / "alternatives"
CORRECT_WITHIN, CHEATERS_BEYOND = 0.25, 4.0  # of the bound


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Case:
    """One timing case of grading.yaml on its CPU (or GPU) shapes: its inputs for a seed, and one call's checksummed
    tensors."""

    def __init__(self, case, gpu: bool):
        self.name, self.check, self.shape = case.name, case.check, case.params["gpu" if gpu else "cpu"]
        self.which = case.params.get("which", "sdpa")
        file = self.check.split(".")[0]
        self.reference = load(ROOT / "solutions" / f"{file}.py", f"reference_{file}")
        self.outputs = {"lstm.speed": speed.LSTM_OUTPUTS, "attention.speed": ("output",)}.get(self.check)
        self._weights: tuple = (None, None)  # the Transformer's: (seed, state dict)

    def implements(self, module) -> bool:
        return hasattr(module, {"lstm.speed": "lstm_forward", "transformer.speed": "TransformerLM"}.get(
            self.check, "scaled_dot_product_attention" if self.which == "sdpa" else "multi_head_self_attention"))

    def inputs(self, seed: int) -> list:
        inputs = {"lstm.speed": speed.lstm_inputs, "transformer.speed": speed.transformer_inputs,
                  "attention.speed": lambda s, d, *shape: speed.attention_inputs(s, d, self.which, *shape)}[self.check]
        return [worker.random_tensor(a.kind, *a.arg) if isinstance(a, Make) else a for a in inputs(seed, "cpu", *self.shape)]

    def tensors(self, module, args: list, seed: int) -> list[torch.Tensor]:
        if self.check == "lstm.speed":
            return worker.results(module.lstm_forward, args, False)
        if self.check == "attention.speed":
            return worker.results(module.scaled_dot_product_attention if self.which == "sdpa" else module.multi_head_self_attention,
                                  args, False)
        model = module.TransformerLM(**speed.transformer_config(*self.shape))
        model.load_state_dict(self.weights(seed))
        return worker.results(model, args, True)

    def weights(self, seed: int) -> dict:
        """The reference's initialisation under the case's seed, as speed.transformer_speed draws it."""
        if self._weights[0] != seed:
            torch.manual_seed(seed)
            self._weights = seed, self.reference.TransformerLM(**speed.transformer_config(*self.shape)).state_dict()
            self.outputs = speed.transformer_outputs(self._weights[1])
        return self._weights[1]


def misses(got: list, want: list) -> list[float]:
    """Each tensor's miss, as a multiple of the bound."""
    return timing.checksum_misses({"checksums": [got]}, {"checksums": [want]})[0]


def cheaters(case: Case, reference: list[torch.Tensor], previous: list | None) -> dict[str, list]:
    """The checksums a cheater's call gives where the reference gives `reference` (previous: the reference's
    checksums on the previous seed's inputs)."""
    last = reference[0].clone()
    last.select(-2, -1).zero_()
    found = {"zeros (work not started)": worker.checksums([torch.zeros_like(t) for t in reference]),
             "last position left at zero": worker.checksums([last] + reference[1:])}
    if previous is not None:
        found["cached (previous inputs)"] = previous
    return found


def distance(got: list[torch.Tensor], want: list[torch.Tensor]) -> float:
    """The largest normwise difference of the outputs, in roundings of the reference's norm: the standard deviation
    of the projections' difference, and a bound on the norms' (in the same unit as the checksums' misses)."""
    return max(float(torch.linalg.vector_norm(a.detach().double() - b.detach().double())
                     / (torch.finfo(b.dtype).eps / 2 * torch.linalg.vector_norm(b.detach().double()))) for a, b in zip(got, want))


def measure(case: Case, implementations: dict, seeds: int) -> list[tuple]:
    """[(implementation, correct, worst miss, its output, worst seed, largest normwise difference)], the worst being
    the largest miss for correct code and the smallest largest miss for a cheater."""
    worst: dict[str, tuple] = {}
    spread: dict[str, float] = {}
    previous = None
    for seed in range(seeds):
        args = case.inputs(seed)
        reference = case.tensors(case.reference, args, seed)
        want = worker.checksums(reference)
        found = {}
        for name, module in implementations.items():
            tensors = case.tensors(module, args, seed)
            spread[name] = max(spread.get(name, 0.0), distance(tensors, reference))
            found[name] = worker.checksums(tensors)
        for name, got in [*found.items(), *cheaters(case, reference, previous).items()]:
            correct = name in implementations
            per_output = misses(got, want)
            miss = max(per_output)
            if name not in worst or (miss > worst[name][1] if correct else miss < worst[name][1]):
                worst[name] = (correct, miss, case.outputs[per_output.index(miss)], seed)
        previous = want
    return [(name, *w, spread.get(name)) for name, w in worst.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1000, help="inputs per case (default 1000)")
    parser.add_argument("--gpu-shapes", action="store_true", help="the cases' GPU shapes (run here, on the CPU: slow)")
    parser.add_argument("--cases", nargs="+", help="only the cases whose check is one of these (lstm.speed ...)")
    parser.add_argument("--variants", type=Path, nargs="+", help="implementation files (default: tests/timing_variants/*.py "
                        "and the component files of tests/alternatives/*/)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as in the workers (OMP_NUM_THREADS=1)
    files = args.variants or sorted(VARIANTS.glob("*.py")) + sorted(p for name in ("lstm", "attention", "transformer")
                                                                  for p in ALTERNATIVES.glob(f"*/{name}.py"))
    modules = {f"{path.parent.name}/{path.stem}": load(path, f"variant_{i}") for i, path in enumerate(files)}
    ok = True
    print(f"bound: {timing.ROUNDINGS} roundings of each output's norm; {args.seeds} seeds; miss in roundings (x bound)")
    for rubric_case in (c for component in load_rubric(ROOT / "grading.yaml").components for c in component.cases
                        if c.check in (args.cases or ("lstm.speed", "attention.speed", "transformer.speed"))):
        case = Case(rubric_case, args.gpu_shapes)
        implementations = {name: m for name, m in modules.items() if case.implements(m)}
        started = time.monotonic()
        rows = measure(case, implementations, args.seeds)
        print(f"\n{case.name}, {'gpu' if args.gpu_shapes else 'cpu'} shape {case.shape} ({time.monotonic() - started:.0f} s)")
        for name, correct, miss, output, seed, spread in rows:
            good = miss <= CORRECT_WITHIN if correct else miss >= CHEATERS_BEYOND
            ok &= good
            kind = "largest" if correct else "smallest"
            apart = f"; normwise difference up to {spread:.3g}" if correct else ""
            print(f"  {'correct' if correct else 'cheater'} {name:36} {kind} miss {miss * timing.ROUNDINGS:10.4g} "
                  f"({miss:.3g} x bound) on {output}, seed {seed}{apart}{'' if good else '  <-- too close'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
