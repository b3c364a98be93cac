"""The worker: the one process that imports and runs a submission.

Started by `process.py` in a scratch folder holding a copy of the submission, in one of two ways:

- in the sandbox, as `python -I worker.py REQUEST_FD REPLY_FD` with an environment of the grader's making
  (process.worker_env: nothing of its own but what CUDA needs) and this folder's worker-side files beside it,
  or forked in that folder by the grader's template (template.py), which has imported numpy and torch already.
  Before any student code runs it walls itself in (walls.py: Linux's limits, namespaces, prctl and seccomp).
- by the portable runner (a student's own machine, any OS), as `python worker.py --stdio` from the grader's
  package: no walls, its stdin and stdout the channel. It imports nothing that only Linux has.

Either way it then answers requests until its request channel closes. Everything it sends after that is
untrusted by the parent.
"""
from __future__ import annotations

import importlib
import io
import os
import random
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import audit  # noqa: E402  (-I keeps this folder off sys.path; it is removed again below)
import guard  # noqa: E402
import wire  # noqa: E402

del sys.path[0]

PRINTED_CHARS = 2000  # of what student code prints during one request, kept for the reply; the rest is only counted


class Printed(io.TextIOBase):
    """sys.stdout and sys.stderr while student code runs: what it prints through Python, bounded, taken with each
    reply. Writes to the raw descriptors 1 and 2 (os.write, C extensions) still go to /dev/null."""

    def __init__(self, folder: str = ""):
        self.kept, self.more = [], 0
        self.room = PRINTED_CHARS
        self.folder = folder  # the scratch copy of the submission: its path is shown as the student's own, relative

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        text = str.__str__(text)  # a plain str, whatever a subclass overrides
        if self.folder:  # a warning's "/tmp/autograder-worker-x1y2/submission/ngram.py:12: ..." reads "ngram.py:12: ..."
            text = text.replace(self.folder, "")
        if self.room:
            self.kept.append(text[:self.room])
        self.more += max(0, len(text) - self.room)
        self.room = max(0, self.room - len(text))
        return len(text)

    def take(self) -> dict:
        """What was printed since the last reply: {"printed": at most PRINTED_CHARS characters, "printed_more": the count of the rest}."""
        taken = {"printed": "".join(self.kept), "printed_more": self.more}
        self.__init__(self.folder)
        return taken


class Objects:
    """Objects that stay in the worker; the parent refers to them by handle."""

    def __init__(self):
        self.by_id: dict[int, object] = {}
        self.ids: dict[int, int] = {}  # id(obj) -> handle, so one object keeps one handle
        self.next_id = 1

    def handle(self, obj) -> dict:
        key = id(obj)
        if key not in self.ids:
            self.ids[key], self.next_id = self.next_id, self.next_id + 1
            self.by_id[self.ids[key]] = obj
        return {"__handle__": [self.ids[key], wire.kept_name(obj)]}

    def drop(self, handle_ids: list) -> None:
        """Let go of objects the parent no longer needs (timing inputs), so memory stays flat."""
        for handle_id in handle_ids:
            obj = self.by_id.pop(handle_id, None)
            if obj is not None:
                del self.ids[id(obj)]

    def get(self, handle_id: int):
        if handle_id not in self.by_id:
            raise wire.WireError(f"unknown handle {handle_id}")
        return self.by_id[handle_id]


def build(value):
    """Turn the parent's requests for objects into the objects: an RNG, a spy, or a student attribute."""
    if isinstance(value, wire.Make):
        if value.kind == "spy":
            return guard.Spy(value.arg)
        if value.kind == "torch_generator":
            import torch

            return torch.Generator().manual_seed(value.arg)
        if value.kind in ("randn", "randint"):
            return random_tensor(value.kind, *value.arg)
        import numpy

        return numpy.random.default_rng(value.arg)
    obj = importlib.import_module(value.base) if isinstance(value.base, str) else value.base
    for name in value.attrs:
        obj = getattr(obj, name)
    return obj


def random_tensor(kind: str, shape: list, seed: int, dtype_or_high, device: str, std: float = 1.0):
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)  # drawn on the device: GPU inputs are large
    if kind == "randn":
        return torch.randn(shape, generator=generator, dtype=getattr(torch, dtype_or_high), device=device).mul_(std)
    return torch.randint(dtype_or_high, shape, generator=generator, device=device)


_timing_cuda: types.SimpleNamespace | None = None  # bind_timing_cuda's, once bound


def bind_timing_cuda() -> types.SimpleNamespace:
    """The CUDA functions that timing uses, kept as torch has them now: main binds them before student code runs,
    so a student who patches torch.cuda (is_available, synchronize, the memory counters) or the flush's torch.empty
    changes nothing the worker measures, and no work of theirs on any stream outlives the reply to run on while the
    reference is timed. Student code shares this process and could reach further in; what it would gain there is
    bounded by the parent's clock and the checksums. Binding calls nothing: CUDA starts only where it is used.
    Devices are named by index: torch finds "the current device" through torch.cuda.is_available, which a patch
    would turn into no device at all (seen on an H200: "invalid argument to exchangeDevice")."""
    global _timing_cuda
    if _timing_cuda is None:
        import torch

        c, empty, zero, uint8 = torch.cuda, torch.empty, torch.Tensor.zero_, torch.uint8
        count, sync = c.device_count, c.synchronize

        def synchronize() -> None:  # every device: work the student started on another one ends before the reply too
            for device in range(count()):
                sync(device)

        def flush() -> None:  # writing a buffer larger than the L2 cache evicts what it held
            zero(empty(FLUSH_BYTES, dtype=uint8, device="cuda:0"))

        def each(counter):  # memory summed over the devices: moving work to another one hides none of it
            return lambda: [counter(device) for device in range(count())]

        _timing_cuda = types.SimpleNamespace(
            available=c.is_available, synchronize=synchronize, reset_peak=each(c.reset_peak_memory_stats),
            allocated=lambda: sum(each(c.memory_allocated)()), peak=lambda: sum(each(c.max_memory_allocated)()), flush=flush)
    return _timing_cuda


def repeat(fn, calls: list, backward: bool) -> dict:
    """Timing: call fn on each argument list in turn and reduce what each call gives (`results`) to checksums
    before returning, so work deferred past the reply shows as a wrong sum. The parent times the whole
    request with its own clock; nothing here reports a time. On a GPU, the whole device (every stream) is
    synchronized before the reply, and the block's peak memory above what was allocated before it comes back."""
    cuda = bind_timing_cuda()
    on_gpu = cuda.available()
    if on_gpu:
        cuda.synchronize()
        cuda.reset_peak()
    base = cuda.allocated() if on_gpu else 0
    sums = [checksums(results(fn, args, backward)) for args in calls]
    if on_gpu:
        cuda.synchronize()
    return {"checksums": sums, "peak_bytes": cuda.peak() - base if on_gpu else None}


def results(fn, args: list, backward: bool) -> list:
    """The tensors of one timed call: fn's outputs and, with backward (of the first output's sum), the gradient
    of each input that requires one, then of each of fn's parameters in the order of their names."""
    import torch

    grads_of = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads_of += [p for _, p in sorted(fn.named_parameters())] if backward and hasattr(fn, "named_parameters") else []
    for p in grads_of:
        p.grad = None
    out = _tensors(fn(*args))
    if not backward:
        return out
    out[0].sum().backward()
    return out + [torch.zeros_like(p) if p.grad is None else p.grad for p in grads_of]


FLUSH_BYTES = 256 << 20  # several times the largest L2 cache (an H100's 50 MB, an H200's 60 MB)


def flush_cache() -> None:
    """Evict the GPU's L2 cache between timed blocks, outside them."""
    cuda = bind_timing_cuda()
    if cuda.available():
        cuda.flush()
        cuda.synchronize()


def _tensors(value) -> list:
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return [value]


PROJECTION_LENGTH = 1 << 20  # a longer output is projected block by block on the same random vector
_projections: dict = {}  # device -> that vector, drawn once per worker (outside the timed blocks: the first call is untimed)


def checksums(tensors: list) -> list[list[float]]:
    """Per tensor: its projection on a fixed random direction and its Euclidean norm, both accumulated in
    float64 (no float64 copy: the cost is timed on both sides), and the unit roundoff of its dtype.

    A correct output differs from the reference's by rounding errors d; its projection then differs by a
    normal number of standard deviation |d| whatever d's pattern, as no implementation sees the direction,
    and its norm by at most |d|. So the parent bounds both by the reference's norm times a multiple of the
    roundoff (timing.py); an output of other inputs, or one not yet computed, misses by about its own norm."""
    import torch

    result = []
    for t in tensors:
        t = t.detach()
        if t.device not in _projections:
            generator = torch.Generator(device=t.device).manual_seed(0)
            _projections[t.device] = torch.randn(PROJECTION_LENGTH, generator=generator, dtype=torch.float32, device=t.device)
        r = _projections[t.device]
        projection = sum(float(torch.sum(part * r[:part.numel()], dtype=torch.float64))
                         for part in t.reshape(-1).split(PROJECTION_LENGTH))
        norm = float(torch.linalg.vector_norm(t, dtype=torch.float64))
        result.append([projection, norm, float(torch.finfo(t.dtype).eps) / 2 if t.is_floating_point() else 0.0])
    return result


def serve(request: dict, blobs: list[bytes], objects: Objects) -> tuple[dict, list[bytes]]:
    args = wire.decode(request.get("args", []), blobs, objects.get, build)
    op = request.get("op")
    if op == "call":
        fn, args, kwargs = args
        result = fn(*args, **kwargs)
    elif op == "map":
        fn, calls = args
        result = [fn(*call_args, **call_kwargs) for call_args, call_kwargs, times in calls for _ in range(times)]
    elif op in ("get", "put"):
        (result,) = args
    elif op == "repeat":
        result = repeat(*args)
    elif op == "flush":
        result = flush_cache()
    elif op == "drop":
        result = objects.drop(*args)
    else:
        raise wire.WireError(f"unknown op {op!r}")
    out: list[bytes] = []
    if request.get("keep"):
        return {"value": objects.handle(result)}, out
    return {"value": wire.encode(result, out, objects.handle)}, out


class Settings:
    """Process-wide settings that change what code computes, or how fast: torch's thread count, default dtype and
    device, grad and inference mode, determinism, anomaly detection, autocast, matmul precision, backend flags, denormals,
    and the torch function and dispatch modes left active. Taken before any student code runs and set back after every
    request, in the student's and the reference's worker alike, so a setting neither helps nor hurts a later case or
    timing sample; `restore` says what the request had changed. The random states of torch, numpy and random start
    afresh at each case and each timing sample (`reseed`), not at each request: within a case, a function that draws
    from a global generator where it was given one draws differently on each call, as it would anywhere."""

    SEED = 0  # numpy's and random's global generators start here (torch's own start is fixed already)

    def __init__(self):
        self.torch = sys.modules.get("torch")  # a component that forbids torch has none to set
        self.numpy = sys.modules.get("numpy")
        self.flags = self._flags()
        self.values = {name: read() for name, (read, _) in self.flags.items()}
        self.torch_random = self.torch.get_rng_state() if self.torch else None
        self.reseed()

    def _flags(self) -> dict:
        """Each setting by the call a student would make, with how to read it and how to set it."""
        if self.torch is None:
            return {}
        torch, backends = self.torch, self.torch.backends
        pop_mode = importlib.import_module("torch.utils._python_dispatch")._pop_mode

        def attribute(owner, name: str):
            return lambda: getattr(owner, name), lambda value: setattr(owner, name, value)

        def popped(depth, pop):
            return lambda: depth(), lambda want: [pop() for _ in range(depth() - want)]

        return {
            "torch.set_num_threads": (torch.get_num_threads, torch.set_num_threads),
            "torch.set_default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
            "torch.set_default_device": (torch.get_default_device, lambda device: torch.set_default_device(None)),  # cpu: no mode
            "torch.set_grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
            "torch.inference_mode": (torch.is_inference_mode_enabled, lambda on: torch.inference_mode(on).__enter__()),
            "torch.use_deterministic_algorithms": (
                lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
                lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
            "torch.autograd.set_detect_anomaly": (torch.is_anomaly_enabled, torch.autograd.set_detect_anomaly),
            "torch.set_float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
            "torch.set_autocast_enabled('cpu')": (lambda: torch.is_autocast_enabled("cpu"), lambda on: torch.set_autocast_enabled("cpu", on)),
            "torch.set_autocast_enabled('cuda')": (lambda: torch.is_autocast_enabled("cuda"), lambda on: torch.set_autocast_enabled("cuda", on)),
            "torch.backends.cudnn.benchmark": attribute(backends.cudnn, "benchmark"),
            "torch.backends.cudnn.deterministic": attribute(backends.cudnn, "deterministic"),
            "torch.backends.cudnn.enabled": attribute(backends.cudnn, "enabled"),
            "torch.backends.cudnn.allow_tf32": attribute(backends.cudnn, "allow_tf32"),
            "torch.backends.cuda.matmul.allow_tf32": attribute(backends.cuda.matmul, "allow_tf32"),
            "torch.backends.mkldnn.enabled": attribute(backends.mkldnn, "enabled"),
            "a torch function mode left active": popped(torch._C._len_torch_function_stack, torch._C._pop_torch_function_stack),
            "a torch dispatch mode left active": popped(torch._C._len_torch_dispatch_stack, pop_mode),
        }

    def reseed(self) -> None:
        if self.torch is not None:
            self.torch.set_rng_state(self.torch_random)
        if self.numpy is not None:
            self.numpy.random.seed(self.SEED)
        random.seed(self.SEED)

    def restore(self) -> list[str]:
        """Set everything back; the settings that differed, as "torch.set_num_threads (2)"."""
        changed = []
        for name, (read, write) in self.flags.items():
            value = read()
            if value != self.values[name]:
                changed.append(f"{name} ({value})")
                write(self.values[name])
        if self.torch is not None:
            self.torch.set_flush_denormal(False)  # no getter: set whether or not it changed
        return changed


def describe_error(exc: BaseException, submission_dir: str) -> dict:
    frames = [
        f"{os.path.basename(f.filename)}, line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename.startswith(submission_dir + os.sep)
    ]
    try:
        message = str(exc)[:2000]
    except BaseException:  # an exception whose __str__ raises is still the student's exception
        message = "(its message could not be printed)"
    return {"type": type(exc).__name__, "message": message, "frames": frames[-8:]}


def main(request_fd: int, reply_fd: int, walled: bool = True) -> None:
    """Serve the grader from the submission folder, the working directory, until the request channel closes."""
    submission_dir = os.getcwd()
    hello, _ = wire.read_frame(request_fd)
    held = _walls().isolate(hello) if walled else {}
    for name in hello["preload"]:  # the grader's imports, inside the walls and before any student code
        importlib.import_module(name)
    if "torch" in sys.modules:  # else a component that forbids torch, timed by no case; bound on first use
        bind_timing_cuda()
    forbidden = guard.Guard(submission_dir, **hello["forbidden"])
    settings = Settings()
    refused = audit.install(submission_dir)  # last: from here on only the submission's code is new, and it is imported only by audit
    objects = Objects()
    printed = sys.stdout = sys.stderr = Printed(submission_dir + os.sep)  # one stream: stdout and stderr keep their order
    wire.write_frame(reply_fd, {"ready": True, "held": held}, [])
    while True:
        try:
            request, blobs = wire.read_frame(request_fd)
        except wire.WireClosed:
            return
        if request.get("first") or request.get("op") == "repeat":  # a case, or a timing sample, starts
            settings.reseed()
        try:
            reply, out = serve(request, blobs, objects)
        except BaseException as exc:  # student code may raise anything, SystemExit included
            reply, out = {"error": describe_error(exc, submission_dir)}, []
        reply["changed"] = settings.restore()
        reply["violations"] = forbidden.report()
        reply["refused"] = refused()
        reply.update(printed.take())
        wire.write_frame(reply_fd, reply, out)


def _walls() -> types.ModuleType:
    """walls.py, imported only where the worker walls itself in: it needs Linux."""
    sys.path.insert(0, HERE)
    try:
        import walls
    finally:
        del sys.path[0]
    return walls


def stdio() -> tuple[int, int]:
    """The portable worker's channel: its stdin and stdout, moved to descriptors of their own. Descriptors 0 and 1
    then read nothing and write nowhere, so what student code writes below Python cannot break a frame."""
    request_fd, reply_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    if sys.platform == "win32":  # frames are bytes: no newline translation on Windows's pipes
        import msvcrt

        for fd in (request_fd, reply_fd):
            msvcrt.setmode(fd, os.O_BINARY)
    return request_fd, reply_fd


if __name__ == "__main__":
    if sys.argv[1:] == ["--stdio"]:  # without -I, which would hide packages a student installed with --user
        if sys.path and os.path.abspath(sys.path[0]) == HERE:  # the worker's own folder, as in the sandbox, is not the student's
            del sys.path[0]
        main(*stdio(), walled=False)
    else:
        main(int(sys.argv[1]), int(sys.argv[2]))
