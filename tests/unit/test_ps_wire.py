"""spmd.ps.wire: the pserver frame (JSON header + raw bytes) round-trips every value kind and
dtype, and rejects every malformed frame with a WireError instead of decoding it."""
from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import pytest

from spmd.core.dtypes import SUPPORTED
from spmd.core.lod import LoDTensor
from spmd.core.selected_rows import SelectedRows
from spmd.ps.wire import MAGIC, MAX_HEADER_BYTES, Frame, WireError, decode_frame, encode_frame

pytestmark = pytest.mark.timeout(60)


def _sample(dtype: str, shape) -> np.ndarray:
    rng = np.random.default_rng(0)
    if dtype == "bool":
        return np.asarray(rng.random(shape) > 0.5)
    return np.asarray(rng.random(shape) * 100 - 50).astype(dtype)


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, SelectedRows):
        assert a.height == b.height
        np.testing.assert_array_equal(a.rows, b.rows)
        _same(a.value, b.value)
    elif isinstance(a, LoDTensor):
        assert a.lod() == b.lod()
        _same(a.array, b.array)
    else:
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _roundtrip(values, meta=None) -> Frame:
    got = decode_frame(encode_frame(values, meta))
    assert list(got.values) == list(values)
    for name, value in values.items():
        _same(value, got.values[name])
    return got


@pytest.mark.parametrize("dtype", sorted(SUPPORTED))
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (7,), (4, 3), (2, 3, 4)])
def test_dense_roundtrip_every_dtype_and_shape(dtype, shape):
    _roundtrip({"x": _sample(dtype, shape)})


@pytest.mark.parametrize("dtype", sorted(SUPPORTED))
def test_lod_and_selected_rows_roundtrip_every_dtype(dtype):
    values = {
        "seq": LoDTensor(_sample(dtype, (5, 2)), [[0, 2, 5]]),
        "nested": LoDTensor(_sample(dtype, (6,)), [[0, 1, 3], [0, 2, 3, 6]]),
        "nolod": LoDTensor(_sample(dtype, (3, 1))),
        "empty_seq": LoDTensor(_sample(dtype, (0, 4)), [[0, 0]]),
        "emb@GRAD": SelectedRows(np.array([3, 1, 3]), _sample(dtype, (3, 4)), height=10),
        "no_rows": SelectedRows(np.zeros(0, np.int64), _sample(dtype, (0, 4)), height=10),
    }
    _roundtrip(values)


def test_meta_many_vars_and_decoded_arrays_are_writable():
    values = {f"w{i}": np.full((i, 2), i, "float32") for i in range(20)}
    got = _roundtrip(values, {"trainer_id": 1, "step": 7, "names": ["a", "b"], "x": None})
    assert got.meta == {"trainer_id": 1, "step": 7, "names": ["a", "b"], "x": None}
    got.values["w3"][0, 0] = 5.0  # the receiver owns the arrays
    assert decode_frame(encode_frame({})).values == {}


def test_non_contiguous_and_big_endian_inputs_are_sent_as_values():
    a = np.arange(12, dtype=">f8").reshape(3, 4)[:, ::2]
    got = decode_frame(encode_frame({"a": a})).values["a"]
    np.testing.assert_array_equal(got, a)
    assert got.dtype == np.float64


def test_encode_rejects_unsupported_values():
    with pytest.raises(WireError, match="complex128"):
        encode_frame({"z": np.zeros(2, np.complex128)})
    with pytest.raises(WireError, match="object"):
        encode_frame({"o": np.array([object()])})
    with pytest.raises(WireError, match="not plain JSON"):
        encode_frame({}, meta={"f": float("nan")})
    with pytest.raises(WireError, match="one value row per row id"):
        encode_frame({"g": SelectedRows(np.array([1, 2]), np.ones((3, 2)), 5)})


# -- malformed frames --------------------------------------------------------------------------
def _frame(header: dict, payload: bytes = b"", magic: bytes = MAGIC) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<4sI", magic, len(raw)) + raw + payload


def _raw(header: bytes) -> bytes:
    return struct.pack("<4sI", MAGIC, len(header)) + header


def _dense(name="w", dtype="float32", shape=(2, 3)):
    return {"name": name, "kind": "dense", "dtype": dtype, "shape": list(shape)}


GOOD = np.ones((2, 3), "float32").tobytes()


@pytest.mark.parametrize("frame, why", [
    (b"", "shorter than"),
    (b"SPW", "shorter than"),
    (pickle.dumps({"w": np.ones(3)}), "not an spmd frame"),
    (b"\x80\x04junkjunk", "not an spmd frame"),
    (struct.pack("<4sI", MAGIC, MAX_HEADER_BYTES + 1), "exceeds the limit"),
    (struct.pack("<4sI", MAGIC, 100) + b"{}", "only 2 bytes follow"),
    (struct.pack("<4sI", MAGIC, 2) + b"\xff\xfe", "not UTF-8 JSON"),
    (struct.pack("<4sI", MAGIC, 5) + b"{'a':", "not UTF-8 JSON"),
    (struct.pack("<4sI", MAGIC, 3000) + b"[" * 3000, "not UTF-8 JSON"),
    (_frame([]), "exactly the keys"),
    (_frame({"meta": {}, "vars": [], "x": 1}), "exactly the keys"),
    (_frame({"meta": [], "vars": []}), "'meta' must be a JSON object"),
    (_frame({"meta": {"a": {"b": 1}}, "vars": []}), "scalar or a list"),
    (_frame({"meta": {"a": [[1]]}, "vars": []}), "scalar or a list"),
    (_frame({"meta": {}, "vars": {}}), "'vars' must be a list"),
    (_raw(b'{"meta":{"x":NaN},"vars":[]}'), "holds NaN, which is not a number"),
    (_raw(b'{"meta":{"x":-Infinity},"vars":[]}'), "not a number"),
    (_frame({"meta": {}, "vars": [_dense(dtype="complex64")]}, GOOD), "dtype 'complex64'"),
    (_frame({"meta": {}, "vars": [_dense(dtype="object")]}, GOOD), "dtype 'object'"),
    (_frame({"meta": {}, "vars": [_dense(dtype="bfloat16")]}, GOOD), "dtype 'bfloat16'"),
    (_frame({"meta": {}, "vars": [_dense(shape=(2, 3))]}, GOOD[:-1]), "truncated"),
    (_frame({"meta": {}, "vars": [_dense(shape=(3, 3))]}, GOOD), "truncated"),
    (_frame({"meta": {}, "vars": [_dense(shape=(2, 2))]}, GOOD), "bytes follow the last"),
    (_frame({"meta": {}, "vars": [_dense(shape=(1 << 40, 1 << 20))]}, GOOD), "truncated"),
    (_frame({"meta": {}, "vars": [_dense(shape=(-2, -3))]}, GOOD), "dim must be an integer"),
    (_frame({"meta": {}, "vars": [_dense(shape=(2.0, 3))]}, GOOD), "dim must be an integer"),
    (_frame({"meta": {}, "vars": [_dense(shape=(True, 3))]}, GOOD), "dim must be an integer"),
    (_frame({"meta": {}, "vars": [_dense(shape=[1] * 33)]}, GOOD), "at most 32 dims"),
    (_frame({"meta": {}, "vars": [dict(_dense(), nbytes=24)]}, GOOD), "expected"),
    (_frame({"meta": {}, "vars": [dict(_dense(), kind="tensor")]}, GOOD), "kind 'tensor'"),
    (_frame({"meta": {}, "vars": [_dense(name="")]}, GOOD), "has name ''"),
    (_frame({"meta": {}, "vars": [_dense(name=3)]}, GOOD), "has name 3"),
    (_frame({"meta": {}, "vars": [_dense(), _dense()]}, GOOD * 2), "appears twice"),
    (_frame({"meta": {}, "vars": ["w"]}, GOOD), "must be a JSON object"),
    (_frame({"meta": {}, "vars": [_dense(dtype="bool", shape=(2,))]}, b"\x01\x07"),
     "bytes other than 0 and 1"),
])
def test_malformed_frames_are_rejected(frame, why):
    with pytest.raises(WireError, match="malformed frame") as err:
        decode_frame(frame)
    assert why in str(err.value)


def _lod(counts, shape=(5, 1), levels=((0, 2, 5),)):
    header = {"meta": {}, "vars": [{"name": "x", "kind": "lod", "dtype": "int64",
                                    "shape": list(shape), "lod": counts}]}
    payload = np.zeros(shape, np.int64).tobytes() + b"".join(
        np.asarray(level, np.int64).tobytes() for level in levels)
    return _frame(header, payload)


def _rows(rows, height=10, shape=(2, 3)):
    header = {"meta": {}, "vars": [{"name": "g", "kind": "rows", "dtype": "float32",
                                    "shape": list(shape), "height": height}]}
    return _frame(header, np.asarray(rows, np.int64).tobytes() + np.zeros(shape, "f4").tobytes())


@pytest.mark.parametrize("frame, why", [
    (_lod([3]), None),  # the well-formed one, for contrast
    (_lod([4]), "truncated"),
    (_lod([2]), "must cover"),
    (_lod([3], levels=((0, 2, 5, 0),)), "bytes follow the last"),
    (_lod([0], levels=()), "lod level size must be an integer in [1"),
    (_lod("3"), "lod must list"),
    (_lod([3], levels=((0, 2, 4),)), "must cover"),
    (_lod([3], levels=((1, 2, 5),)), "must start at offset 0"),
    (_lod([3], levels=((0, 4, 2),)), "decreases"),
    (_lod([3], shape=()), "at least one dim"),
    (_rows([1, 9]), None),
    (_rows([1, 10]), "outside its table of 10 rows"),
    (_rows([-1, 2]), "outside its table"),
    (_rows([1]), "truncated"),
    (_rows([1, 2], height=-1), "height must be an integer"),
    (_rows([1, 2], height="10"), "height must be an integer"),
])
def test_malformed_lod_and_rows_are_rejected(frame, why):
    if why is None:
        decode_frame(frame)
        return
    with pytest.raises(WireError, match="malformed frame") as err:
        decode_frame(frame)
    assert why in str(err.value)


def test_size_limits_are_configurable():
    frame = encode_frame({"w": np.zeros(1000, "float32")}, {"note": "x" * 200})
    with pytest.raises(WireError, match="exceed the limit of 100"):
        decode_frame(frame, max_frame_bytes=100)
    with pytest.raises(WireError, match="header length .* exceeds the limit of 64"):
        decode_frame(frame, max_header_bytes=64)


def test_a_pickle_payload_is_never_unpickled(monkeypatch):
    called = []
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: called.append(a))

    class Boom:
        def __reduce__(self):
            return (called.append, ("executed",))

    with pytest.raises(WireError):
        decode_frame(pickle.dumps(Boom()))
    # a pickle smuggled into the header or the payload is only data
    frame = _frame({"meta": {"p": pickle.dumps(Boom()).hex()}, "vars": []})
    assert decode_frame(frame).meta["p"].startswith("80")
    assert called == []
