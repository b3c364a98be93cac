"""The protocol between the grader and the worker that runs student code.

Shared by both sides, so it imports only the standard library at module level
(numpy and torch are imported when a value needs them: the backprop worker must
be able to run with torch blocked).

A frame is `<u32 header length> <header JSON> <blob bytes...>`; the header
lists the blob lengths. Values are JSON with tagged objects, so every JSON
object in a frame is a single-key tag such as {"__tuple__": [...]}. Arrays and
tensors travel as raw bytes plus dtype and shape. Nothing is ever pickled: the
parent rebuilds every value itself, with exact built-in types.
"""
from __future__ import annotations

import json
import math
import os
import select
import struct
import time

MAX_HEADER_BYTES = 8 << 20
MAX_BLOB_BYTES = 256 << 20
_LEN = struct.Struct("<I")


class WireError(Exception):
    """A frame or value that does not follow the protocol."""


class WireTimeout(WireError):
    """The other side did not send a whole frame before the deadline."""


class WireClosed(WireError):
    """The other side closed its end (for the worker: it died)."""


class Handle:
    """A reference to an object that stays inside the worker."""

    __slots__ = ("id", "type_name")

    def __init__(self, id: int, type_name: str = "object"):
        self.id = id
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object in the worker>"


class Make:
    """A value the worker constructs itself: an RNG from a seed, a spy on a dotted function name, or a
    random tensor too large to send (timing inputs): "randn" [shape, seed, dtype, device, std] draws
    normal values times std, "randint" [shape, seed, high, device] integers in [0, high)."""

    __slots__ = ("kind", "arg")
    KINDS = {"numpy_rng": int, "torch_generator": int, "spy": str, "randn": list, "randint": list}
    DTYPES = ("float16", "bfloat16", "float32", "float64")
    DEVICES = ("cpu", "cuda")

    def __init__(self, kind: str, arg):
        if kind not in self.KINDS or type(arg) is not self.KINDS[kind] or (type(arg) is list and not _tensor_spec(kind, arg)):
            raise WireError(f"malformed constructor {kind!r}")
        self.kind, self.arg = kind, arg


def _tensor_spec(kind: str, arg: list) -> bool:
    """Whether `arg` is a whole "randn" or "randint" argument list, every item of its exact type."""
    if len(arg) != (5 if kind == "randn" else 4):
        return False
    shape, seed, last, device = arg[0], arg[1], arg[2], arg[3]
    if kind == "randn":
        std = arg[4]
        fits = type(last) is str and last in Make.DTYPES and type(std) is float and math.isfinite(std) and std > 0
    else:
        fits = type(last) is int and last > 0
    return (fits and type(shape) is list and all(type(d) is int and d >= 0 for d in shape)
            and type(seed) is int and 0 <= seed < 1 << 63 and type(device) is str and device in Make.DEVICES)


class Expr:
    """A lazy path to a student object: a module, then attribute lookups."""

    __slots__ = ("base", "attrs")

    def __init__(self, base, attrs: tuple[str, ...] = ()):
        self.base, self.attrs = base, attrs  # base: module name (str) or Handle

    def describe(self) -> str:
        head = self.base if isinstance(self.base, str) else repr(self.base)
        return ".".join((head, *self.attrs))


# ---- values <-> JSON + blobs -------------------------------------------------


def encode(value, blobs: list[bytes], to_handle=None):
    """Turn `value` into JSON-able data, appending raw arrays to `blobs`.

    `to_handle(obj) -> Handle` is called for objects with no plain-data form
    (the worker's side); the parent passes None and may only send plain data.
    """
    t = type(value)
    if value is None or t in (bool, int, str):
        return value
    if t is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if t is list:
        return [encode(v, blobs, to_handle) for v in value]
    if t is tuple:
        return {"__tuple__": [encode(v, blobs, to_handle) for v in value]}
    if isinstance(value, dict):  # Counter, defaultdict...: the parent rebuilds a plain dict
        return {"__dict__": [[encode(k, blobs, to_handle), encode(v, blobs, to_handle)] for k, v in value.items()]}
    if t is set or t is frozenset:
        return {"__set__": [encode(v, blobs, to_handle) for v in value]}
    if t is Handle:
        return {"__handle__": [value.id, value.type_name]}
    if t is Make:
        return {"__make__": [value.kind, value.arg]}
    if t is Expr:
        base = value.base if isinstance(value.base, str) else encode(value.base, blobs)
        return {"__expr__": [base, list(value.attrs)]}
    module = t.__module__
    if module == "numpy":
        return _encode_numpy(value, blobs, to_handle)
    if module.startswith("torch") and _is_plain_tensor(value):
        return _encode_tensor(value, blobs)
    if to_handle is None:
        _refuse(value)
    return to_handle(value)


# A numpy scalar crosses as the Python value it stands for (np.str_ from rng.choice over words, np.int64 from argmax,
# np.float32 from a float32 sum), so the parent judges plain values only. Nothing the judge uses is lost: it compares
# numbers in float64, with a tolerance that comes from the expected value, never from the dtype of a returned number.
_SCALARS = {"b": bool, "i": int, "u": int, "f": float, "U": str}
_ARRAY_KINDS = "biufc"  # arrays of numbers travel as bytes; strings, dates, records and Python objects stay in the worker


def _encode_numpy(value, blobs, to_handle):
    import numpy as np

    # Only classes that numpy defines get here (encode checks the module): a subclass of np.str_ is the student's.
    if type(value) is np.ndarray and value.dtype.kind in _ARRAY_KINDS:
        blobs.append(np.ascontiguousarray(value).tobytes())
        return {"__ndarray__": [value.dtype.str, list(value.shape), len(blobs) - 1]}
    if isinstance(value, np.generic) and value.dtype.kind in _SCALARS:
        return encode(_SCALARS[value.dtype.kind](value), blobs)
    return to_handle(value) if to_handle else _refuse(value)


def _is_plain_tensor(value) -> bool:
    import torch

    # A Parameter is data; any other subclass could carry custom behaviour. Dtypes the parent cannot rebuild (uint16,
    # float8), sparse and meta tensors stay in the worker like any other object.
    return ((type(value) is torch.Tensor or type(value) is torch.nn.Parameter) and _dtype_name(value) in _TORCH_DTYPES
            and value.layout is torch.strided and not value.is_meta)


def _dtype_name(tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _encode_tensor(value, blobs):
    import torch

    t = value.detach().to("cpu").contiguous().reshape(-1)
    blobs.append(t.view(torch.uint8).numpy().tobytes())
    return {"__tensor__": [_dtype_name(t), list(value.shape), len(blobs) - 1, value.requires_grad]}


def _refuse(value):
    raise WireError(f"cannot send a value of type {type(value).__qualname__}")


_HOLDS = {"O": "Python objects", "U": "strings", "S": "bytes", "M": "dates", "m": "time spans", "V": "raw records"}


def kept_name(obj) -> str:
    """What the worker calls an object it keeps rather than sends, for feedback to name: a subclass with the plain type
    it subclasses ("Word (a subclass of str)"), a numpy array or tensor with what its dtype holds."""
    t = type(obj)
    if t.__module__ == "numpy" and t.__name__ == "ndarray":
        return f"numpy array of {_HOLDS.get(obj.dtype.kind, 'values')} (dtype {obj.dtype})"
    if t.__module__ == "numpy":
        return f"numpy {t.__name__}"
    if t.__module__ == "torch" and t.__name__ == "Tensor":
        import torch

        where = " on the meta device" if obj.is_meta else "" if obj.layout is torch.strided else f" in layout {obj.layout}"
        return f"torch tensor of dtype {obj.dtype}{where}"
    plain = next((b for b in t.__mro__[1:-1] if b.__module__ in ("builtins", "numpy", "torch")), None)
    return f"{t.__qualname__} (a subclass of {plain.__name__})" if plain else t.__qualname__


def decode(data, blobs: list[bytes], from_handle=None, resolve=None):
    """Rebuild a value from `encode`'s output, with exact built-in types only.

    On the worker's side `from_handle(id)` returns the object behind a handle
    and `resolve` turns `Make`/`Expr` into live objects; the parent leaves both
    None and gets `Handle`, `Make` and `Expr` values back.
    """
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v, blobs, from_handle, resolve) for v in data]
    if type(data) is not dict or len(data) != 1:
        raise WireError("malformed value")
    (tag, body), = data.items()
    if tag == "__float__":
        if body not in ("inf", "-inf", "nan"):
            raise WireError("malformed float")
        return float(body)
    if tag == "__tuple__":
        return tuple(decode(v, blobs, from_handle, resolve) for v in _list(body))
    if tag == "__dict__":
        pairs = [(decode(k, blobs, from_handle, resolve), decode(v, blobs, from_handle, resolve)) for k, v in (_pair(p) for p in _list(body))]
        try:
            return dict(pairs)
        except TypeError:
            raise WireError("dictionary key is not hashable") from None
    if tag == "__set__":
        try:
            return set(decode(v, blobs, from_handle, resolve) for v in _list(body))
        except TypeError:
            raise WireError("set element is not hashable") from None
    if tag == "__ndarray__":
        return _decode_ndarray(body, blobs)
    if tag == "__tensor__":
        return _decode_tensor(body, blobs)
    if tag == "__handle__":
        id, type_name = _pair(body)
        if type(id) is not int or type(type_name) is not str:
            raise WireError("malformed handle")
        return from_handle(id) if from_handle else Handle(id, type_name[:200])
    if tag == "__make__":
        kind, arg = _pair(body)
        made = Make(kind, arg)
        return resolve(made) if resolve else made
    if tag == "__expr__":
        base, attrs = _pair(body)
        if type(base) is not str:
            base = decode(base, blobs, from_handle)
        if not all(type(a) is str for a in _list(attrs)):
            raise WireError("malformed attribute path")
        expr = Expr(base, tuple(attrs))
        return resolve(expr) if resolve else expr
    raise WireError(f"unknown tag {tag[:40]!r}")


def _list(body) -> list:
    if type(body) is not list:
        raise WireError("malformed value")
    return body


def _pair(body):
    if type(body) is not list or len(body) != 2:
        raise WireError("malformed value")
    return body


def _blob(blobs, index) -> bytes:
    if type(index) is not int or not 0 <= index < len(blobs):
        raise WireError("malformed blob reference")
    return blobs[index]


def _shape(shape) -> tuple[int, ...]:
    if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
        raise WireError("malformed shape")
    return tuple(shape)


def _decode_ndarray(body, blobs):
    import numpy as np

    if type(body) is not list or len(body) != 3:
        raise WireError("malformed array")
    dtype_str, shape, index = body
    dtype = _numpy_dtype(dtype_str)
    shape = _shape(shape)
    raw = _blob(blobs, index)
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise WireError("array bytes do not match its dtype and shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _numpy_dtype(dtype_str):
    import numpy as np

    try:
        dtype = np.dtype(dtype_str) if type(dtype_str) is str else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in _ARRAY_KINDS:
        raise WireError("unsupported array dtype")
    return dtype


_TORCH_DTYPES = (
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
    "complex64", "complex128",
)


def _decode_tensor(body, blobs):
    import torch

    if type(body) is not list or len(body) != 4:
        raise WireError("malformed tensor")
    dtype_name, shape, index, requires_grad = body
    if dtype_name not in _TORCH_DTYPES:
        raise WireError("unsupported tensor dtype")
    dtype = getattr(torch, dtype_name)
    shape = _shape(shape)
    raw = _blob(blobs, index)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != math.prod(shape) * itemsize:
        raise WireError("tensor bytes do not match its dtype and shape")
    if not raw:
        return torch.empty(shape, dtype=dtype)
    t = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()
    return t.requires_grad_(True) if requires_grad is True and t.is_floating_point() else t


# ---- frames over pipes and streams -----------------------------------------


def pack(header: dict, blobs: list[bytes]) -> bytes:
    header = dict(header, blobs=[len(b) for b in blobs])
    text = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    return b"".join([_LEN.pack(len(text)), text, *blobs])


def write_frame(fd: int, header: dict, blobs: list[bytes], deadline: float | None = None) -> None:
    """Write one frame; with a deadline, `fd` must be non-blocking: a reader that stops reading
    (a worker that swapped out its request pipe) then costs the deadline, not a hang."""
    view = memoryview(pack(header, blobs))
    while view:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [fd], [], wait)[1]:
                raise WireTimeout("the request was not taken before the time limit")
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


def read_frame(fd: int, deadline: float | None = None, max_blob_bytes: int = MAX_BLOB_BYTES) -> tuple[dict, list[bytes]]:
    """Read one frame; a deadline (time.monotonic) bounds the whole read."""
    return _frame(lambda n: _read_exact(fd, n, deadline), max_blob_bytes)


def read_stream(stream, max_blob_bytes: int = MAX_BLOB_BYTES) -> tuple[dict, list[bytes]]:
    """Read one frame from a binary stream (the portable runner's worker's stdout), waiting as long as it takes:
    the caller bounds the wait (process.Streams)."""
    def exact(n: int) -> bytes:
        data = stream.read(n) if n else b""
        if len(data) < n:
            raise WireClosed("the worker closed the connection")
        return data

    return _frame(exact, max_blob_bytes)


def _frame(read_exact, max_blob_bytes: int) -> tuple[dict, list[bytes]]:
    (length,) = _LEN.unpack(read_exact(_LEN.size))
    if length > MAX_HEADER_BYTES:
        raise WireError(f"reply header of {length} bytes exceeds the limit")
    try:
        header = json.loads(read_exact(length))
    except (ValueError, RecursionError):
        raise WireError("reply header is not valid JSON") from None
    sizes = header.get("blobs") if type(header) is dict else None
    if type(sizes) is not list or not all(type(s) is int and s >= 0 for s in sizes):
        raise WireError("reply header has no valid blob list")
    if sum(sizes) > max_blob_bytes:
        raise WireError(f"reply of {sum(sizes)} bytes exceeds the {max_blob_bytes}-byte limit")
    return header, [read_exact(s) for s in sizes]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, remaining = [], n
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise WireTimeout("no reply before the time limit")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise WireClosed("the worker closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
