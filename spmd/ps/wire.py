"""The parameter server's frame format: a small JSON header plus the raw bytes of the arrays.

No pickle, ever: a frame is data only, and decoding one runs no code of its sender. Every
number in the header is checked against the bytes that follow before an array is made.

Frame layout (all integers little-endian)::

    offset  size  field
    0       4     magic b"SPW1"
    4       4     uint32 H: the header's length in bytes (at most max_header_bytes, 1 MiB)
    8       H     the header: UTF-8 JSON object {"meta": {...}, "vars": [var, ...]}
    8 + H   ...   the payload: every var's parts, in the order "vars" lists them, nothing else

``meta`` holds the call's scalars (trainer id, step, names; JSON numbers, strings, booleans,
null and lists of them, no nesting deeper than one list). Each ``var`` is one of::

    {"name": "w", "kind": "dense", "dtype": "float32", "shape": [4, 3]}
        parts: data (prod(shape) * itemsize bytes)
    {"name": "x", "kind": "lod", "dtype": "int64", "shape": [5, 1], "lod": [3]}
        parts: data, then each LoD level as int64 offsets (lod[i] offsets each)
    {"name": "emb@GRAD", "kind": "rows", "dtype": "float32", "shape": [3, 8], "height": 100}
        parts: rows (shape[0] int64 row ids, each in [0, height)), then the values (data)

``dtype`` is one of spmd.core.dtypes.SUPPORTED (bool, int8/16/32/64, uint8, float16/32/64);
data is C-ordered. The payload's length must equal the sum of the parts exactly: a truncated
frame, a lying shape or trailing bytes are all rejected, as are unknown keys, a LoD that does
not describe the rows (fluid's rules, spmd.core.lod) and row ids outside the table.

>>> frame = encode_frame({"w": np.ones((2, 3), "float32")}, meta={"trainer_id": 0})
>>> got = decode_frame(frame)
>>> got.meta, got.values["w"].shape
({'trainer_id': 0}, (2, 3))
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from math import prod

import numpy as np

from ..core.dtypes import SUPPORTED
from ..core.lod import LoDTensor, lod_as_lists, lod_problem, make_lod
from ..core.selected_rows import SelectedRows
from ..errors import InvalidArgumentError

__all__ = ["MAGIC", "MAX_FRAME_BYTES", "MAX_HEADER_BYTES", "Frame", "WireError",
           "decode_frame", "encode_frame"]

MAGIC = b"SPW1"
_PREFIX = struct.Struct("<4sI")
MAX_HEADER_BYTES = 1 << 20
MAX_FRAME_BYTES = 1 << 30  # also the gRPC message limit spmd.ps.rpc sets
MAX_VARS = 1 << 16
MAX_NDIM = 32
MAX_LOD_LEVELS = 16
MAX_NAME_CHARS = 1024
_MAX_DIM = 1 << 62
_KINDS = {"dense": {"name", "kind", "dtype", "shape"},
          "lod": {"name", "kind", "dtype", "shape", "lod"},
          "rows": {"name", "kind", "dtype", "shape", "height"}}
_I64 = np.dtype("<i8")


class WireError(InvalidArgumentError):
    """A frame that is not a valid spmd frame, or a value that cannot be put in one."""


@dataclass
class Frame:
    """A decoded frame: the call's scalars and its values by name (np.ndarray, LoDTensor or
    SelectedRows, numpy arrays that the receiver owns and may write)."""

    meta: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)


# -- encode ------------------------------------------------------------------------------------
def _host(array) -> np.ndarray:
    if hasattr(array, "get") and not isinstance(array, np.ndarray):  # cupy
        array = array.get()
    return np.asarray(array)


def _le(array: np.ndarray, name: str) -> np.ndarray:
    if array.dtype.name not in SUPPORTED:
        raise WireError(f"variable {name!r}: dtype {array.dtype} cannot be sent to a pserver; "
                        f"expected one of {sorted(SUPPORTED)} (cast it first)")
    return np.asarray(array, dtype=array.dtype.newbyteorder("<"), order="C")


def _describe(name: str, value) -> tuple[dict, list]:
    if isinstance(value, SelectedRows):
        data = _le(_host(value.value), name)
        rows = np.ascontiguousarray(_host(value.rows).reshape(-1), dtype=_I64)
        if data.ndim < 1 or rows.size != data.shape[0]:
            raise WireError(f"variable {name!r}: SelectedRows has {rows.size} rows but values "
                            f"of shape {list(data.shape)}; expected one value row per row id")
        return ({"name": name, "kind": "rows", "dtype": data.dtype.name,
                 "shape": list(data.shape), "height": int(value.height)}, [rows, data])
    if isinstance(value, LoDTensor):
        if value.array is None:
            raise WireError(f"variable {name!r}: the LoDTensor holds no data")
        data = _le(_host(value.array), name)
        lod = value.lod_value or ()
        if lod and data.ndim < 1:
            raise WireError(f"variable {name!r}: a 0-d array cannot have a LoD")
        levels = [np.ascontiguousarray(level, dtype=_I64) for level in lod]
        return ({"name": name, "kind": "lod", "dtype": data.dtype.name,
                 "shape": list(data.shape), "lod": [int(lv.size) for lv in levels]},
                [data, *levels])
    data = _le(_host(value), name)
    return ({"name": name, "kind": "dense", "dtype": data.dtype.name,
             "shape": list(data.shape)}, [data])


def encode_frame(values=None, meta: dict | None = None) -> bytes:
    """One frame holding `values` ({name: ndarray | LoDTensor | SelectedRows}, numpy or cupy
    arrays) and the JSON-able scalars `meta`."""
    descs, parts = [], []
    for name, value in (values or {}).items():
        if not isinstance(name, str) or not name:
            raise WireError(f"variable names must be non-empty strings, got {name!r}")
        desc, arrays = _describe(name, value)
        descs.append(desc)
        parts.extend(arrays)
    try:
        header = json.dumps({"meta": meta or {}, "vars": descs}, separators=(",", ":"),
                            allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise WireError(f"frame meta {meta!r} is not plain JSON data: {exc}") from None
    if len(header) > MAX_HEADER_BYTES:
        raise WireError(f"frame header of {len(header)} bytes exceeds {MAX_HEADER_BYTES}; "
                        f"send fewer variables per call")
    return b"".join([_PREFIX.pack(MAGIC, len(header)), header]
                    + [memoryview(p.reshape(-1).view(np.uint8)) for p in parts])


# -- decode ------------------------------------------------------------------------------------
def _fail(why: str):
    raise WireError(f"malformed frame: {why}")


def _reject_constant(token):
    _fail(f"the header holds {token}, which is not a number")


def _check_meta(meta) -> dict:
    if not isinstance(meta, dict):
        _fail(f"'meta' must be a JSON object, got {type(meta).__name__}")
    scalar = (str, int, float, bool, type(None))
    for key, val in meta.items():
        ok = isinstance(val, scalar) or (isinstance(val, list)
                                         and all(isinstance(v, scalar) for v in val))
        if not ok:
            _fail(f"meta[{key!r}] must be a scalar or a list of scalars")
    return meta


def _int(value, what: str, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        _fail(f"{what} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _check_var(desc, index: int) -> tuple[str, str, np.dtype, tuple]:
    if not isinstance(desc, dict):
        _fail(f"vars[{index}] must be a JSON object")
    kind = desc.get("kind")
    if kind not in _KINDS:
        _fail(f"vars[{index}] has kind {kind!r}; expected one of {sorted(_KINDS)}")
    if set(desc) != _KINDS[kind]:
        _fail(f"vars[{index}] ({kind}) has keys {sorted(desc)}; expected {sorted(_KINDS[kind])}")
    name = desc["name"]
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
        _fail(f"vars[{index}] has name {name!r}; expected a string of 1-{MAX_NAME_CHARS} chars")
    if desc["dtype"] not in SUPPORTED:
        _fail(f"variable {name!r} has dtype {desc['dtype']!r}; expected one of "
              f"{sorted(SUPPORTED)}")
    shape = desc["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        _fail(f"variable {name!r} has shape {shape!r}; expected a list of at most {MAX_NDIM} "
              f"dims")
    shape = tuple(_int(d, f"variable {name!r} dim", 0, _MAX_DIM) for d in shape)
    if kind != "dense" and not shape:
        _fail(f"variable {name!r} ({kind}) must have at least one dim (its rows)")
    return name, kind, np.dtype(desc["dtype"]).newbyteorder("<"), shape


class _Reader:
    def __init__(self, buf: memoryview, start: int):
        self.buf, self.pos = buf, start

    def take(self, nbytes: int, dtype: np.dtype, shape: tuple, what: str) -> np.ndarray:
        left = len(self.buf) - self.pos
        if nbytes > left:
            _fail(f"{what} needs {nbytes} bytes but only {left} remain (truncated frame or a "
                  f"shape that does not match the data)")
        count = nbytes // dtype.itemsize
        array = np.frombuffer(self.buf, dtype, count, self.pos).reshape(shape)
        self.pos += nbytes
        return array.astype(dtype.newbyteorder("="), copy=True)


def decode_frame(frame, *, max_frame_bytes: int = MAX_FRAME_BYTES,
                 max_header_bytes: int = MAX_HEADER_BYTES) -> Frame:
    """The Frame in `frame` (bytes-like); raises WireError saying what is wrong with it."""
    buf = memoryview(frame).cast("B")
    if len(buf) > max_frame_bytes:
        _fail(f"{len(buf)} bytes exceed the limit of {max_frame_bytes}")
    if len(buf) < _PREFIX.size:
        _fail(f"{len(buf)} bytes are shorter than the {_PREFIX.size}-byte prefix")
    magic, hlen = _PREFIX.unpack_from(buf)
    if magic != MAGIC:
        _fail(f"it starts with {bytes(magic)!r}, not {MAGIC!r} (not an spmd frame; pickles "
              f"and other formats are never decoded)")
    if hlen > max_header_bytes:
        _fail(f"header length {hlen} exceeds the limit of {max_header_bytes}")
    if hlen > len(buf) - _PREFIX.size:
        _fail(f"header length {hlen} but only {len(buf) - _PREFIX.size} bytes follow")
    try:
        header = json.loads(bytes(buf[_PREFIX.size:_PREFIX.size + hlen]).decode("utf-8"),
                            parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        if isinstance(exc, WireError):
            raise
        _fail(f"the header is not UTF-8 JSON: {exc}")
    if not isinstance(header, dict) or set(header) != {"meta", "vars"}:
        _fail("the header must be a JSON object with exactly the keys 'meta' and 'vars'")
    meta, descs = _check_meta(header["meta"]), header["vars"]
    if not isinstance(descs, list) or len(descs) > MAX_VARS:
        _fail(f"'vars' must be a list of at most {MAX_VARS} variables")
    reader, values = _Reader(buf, _PREFIX.size + hlen), {}
    for index, desc in enumerate(descs):
        name, kind, dtype, shape = _check_var(desc, index)
        if name in values:
            _fail(f"variable {name!r} appears twice")
        nbytes = prod(shape) * dtype.itemsize
        if kind == "rows":
            height = _int(desc["height"], f"variable {name!r} height", 0, _MAX_DIM)
            rows = reader.take(shape[0] * 8, _I64, (shape[0],), f"variable {name!r} rows")
            data = reader.take(nbytes, dtype, shape, f"variable {name!r} values")
            if rows.size and (rows.min() < 0 or rows.max() >= height):
                _fail(f"variable {name!r} has row ids in [{rows.min()}, {rows.max()}] outside "
                      f"its table of {height} rows")
            values[name] = SelectedRows(rows, data, height)
            continue
        data = reader.take(nbytes, dtype, shape, f"variable {name!r} data")
        if dtype.kind == "b" and data.size and data.view(np.uint8).max() > 1:
            _fail(f"variable {name!r} is bool but holds bytes other than 0 and 1")
        if kind == "dense":
            values[name] = data
            continue
        counts = desc["lod"]
        if not isinstance(counts, list) or len(counts) > MAX_LOD_LEVELS:
            _fail(f"variable {name!r} lod must list at most {MAX_LOD_LEVELS} level sizes")
        levels = [reader.take(_int(n, f"variable {name!r} lod level size", 1, _MAX_DIM) * 8,
                              _I64, (n,), f"variable {name!r} lod level {i}")
                  for i, n in enumerate(counts)]
        lod = make_lod(levels)
        problem = lod and lod_problem(lod, shape[0])
        if problem:
            _fail(f"variable {name!r} has LoD {lod_as_lists(lod)} for {shape[0]} rows: "
                  f"{problem}")
        values[name] = LoDTensor(data, lod)
    if reader.pos != len(buf):
        _fail(f"{len(buf) - reader.pos} bytes follow the last variable (sizes in the header "
              f"do not match the payload)")
    return Frame(meta, values)
