"""The protocol rebuilds exact types and refuses malformed or oversized frames."""
import os

import numpy as np
import pytest
import torch

from autograder.sandbox.worker import wire


def roundtrip(value):
    blobs: list[bytes] = []
    data = wire.encode(value, blobs)
    header, got_blobs = wire.read_frame(*_pipe_with(wire.pack({"v": data}, blobs)))
    return wire.decode(header["v"], got_blobs)


def _pipe_with(frame: bytes):
    r, w = os.pipe()
    os.write(w, frame)
    os.close(w)
    return (r,)


def test_values_roundtrip_with_exact_types():
    value = {("a", "b"): 3, "x": [1.5, float("inf"), None, True], "s": {"w"}}
    assert roundtrip(value) == value
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = roundtrip(arr)
    assert type(got) is np.ndarray and got.dtype == np.float32 and (got == arr).all()
    t = torch.randn(3, 4, dtype=torch.float64)
    got = roundtrip(t)
    assert type(got) is torch.Tensor and got.dtype == torch.float64 and torch.equal(got, t)
    assert roundtrip(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert type(roundtrip(np.float32(2.5))) is float  # numpy scalars cross as the Python values they stand for


def test_parent_refuses_to_send_objects():
    with pytest.raises(wire.WireError):
        wire.encode(object(), [])


def test_tensor_subclass_is_not_sent_as_a_tensor():
    class Sneaky(torch.Tensor):
        pass

    handles = []
    wire.encode(torch.ones(2).as_subclass(Sneaky), [], lambda obj: handles.append(obj) or {"__handle__": [1, "Sneaky"]})
    assert handles, "a Tensor subclass must stay a handle, never become data"


@pytest.mark.parametrize("header, blobs, message", [
    ({"v": {"__ndarray__": ["<f8", [2, 2], 0]}}, [b"\0" * 8], "do not match"),
    ({"v": {"__ndarray__": ["|O", [1], 0]}}, [b"\0" * 8], "unsupported array dtype"),
    ({"v": {"__tensor__": ["float32", [3], 0, False]}}, [b"\0" * 4], "do not match"),
    ({"v": {"__evil__": 1}}, [], "unknown tag"),
    ({"v": {"__handle__": ["1", "x"]}}, [], "malformed handle"),
    ({"v": {"__float__": "1e400"}}, [], "malformed float"),
])
def test_malformed_values_are_refused(header, blobs, message):
    with pytest.raises(wire.WireError, match=message):
        wire.decode(header["v"], blobs)


def test_oversized_and_truncated_frames_are_refused():
    frame = wire.pack({"v": 1}, [b"x" * 1000])
    with pytest.raises(wire.WireError, match="exceeds"):
        wire.read_frame(*_pipe_with(frame), max_blob_bytes=100)
    with pytest.raises(wire.WireClosed):
        wire.read_frame(*_pipe_with(frame[:-10]))
    with pytest.raises(wire.WireError, match="not valid JSON"):
        wire.read_frame(*_pipe_with(b"\x05\x00\x00\x00{{{{{"))


def test_random_tensor_constructors_roundtrip():
    """Timing inputs travel as constructors: [shape, seed, dtype, device, std] and [shape, seed, high, device]."""
    for kind, arg in (("randn", [[2, 3], 7, "float32", "cpu", 0.125]), ("randint", [[4], 7, 10, "cpu"])):
        got = roundtrip(wire.Make(kind, arg))
        assert type(got) is wire.Make and (got.kind, got.arg) == (kind, arg)


@pytest.mark.parametrize("kind, arg", [
    ("randn", [[2, 3], 7, "float32", "cpu"]),  # no std
    ("randn", [[2, 3], 7, "float32", "cpu", 1]),  # std an int
    ("randn", [[2, 3], 7, "float32", "cpu", float("nan")]),
    ("randn", [[2, 3], 7, "float32", "cpu", -1.0]),
    ("randn", [[2, 3], 7, "int64", "cpu", 1.0]),
    ("randn", [[2, 3], 7, "__class__", "cpu", 1.0]),
    ("randn", [[2, 3], 7, "float32", "mps", 1.0]),
    ("randn", [[2, -3], 7, "float32", "cpu", 1.0]),
    ("randn", [[2, 3.0], 7, "float32", "cpu", 1.0]),
    ("randn", [(2, 3), 7, "float32", "cpu", 1.0]),
    ("randn", [[2, 3], True, "float32", "cpu", 1.0]),
    ("randn", [[2, 3], -1, "float32", "cpu", 1.0]),
    ("randint", [[4], 7, 0, "cpu"]),
    ("randint", [[4], 7, 10, "cpu", 1.0]),
    ("randint", [[4], 7, "10", "cpu"]),
    ("spy", ["torch.multinomial"]),
], ids=lambda v: repr(v))
def test_malformed_constructors_are_refused(kind, arg):
    """Every item of a constructor's arguments is checked for its exact type and range, on either side of the pipe."""
    with pytest.raises(wire.WireError, match="malformed constructor"):
        wire.Make(kind, arg)
    with pytest.raises(wire.WireError, match="malformed constructor"):
        wire.decode({"__make__": [kind, arg]}, [])
