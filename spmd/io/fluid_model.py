"""Reading models that PaddlePaddle 1.8 itself saved (save_inference_model, save_params):
its `__model__` (a serialized ProgramDesc, framework.proto's protobuf) as an spmd Program, and
its variable files (a LoDTensor each, or one file of them with params_filename) as arrays.

Both formats are read here without protobuf, from the wire format: a protobuf message is a
sequence of (field number, wire type, value) records, and framework.proto's field numbers are
fixed (ProgramDesc.blocks = 1; BlockDesc idx 1, parent_idx 2, vars 3, ops 4; VarDesc name 1,
type 2, persistable 3; OpDesc inputs 1, outputs 2, type 3, attrs 4; ...). A variable file is
fluid's SerializeToStream of a LoDTensor: uint32 version, uint64 count of LoD levels and each
level (uint64 bytes, then uint64 offsets), uint32 tensor version, int32 size of a TensorDesc
message (data type, dims), then the raw data, little-endian. Nothing is unpickled or executed.

The program keeps fluid's op types, inputs, outputs and the attributes spmd's op definitions
declare; fluid's bookkeeping attributes (op_role, op_callstack, op_namescope, ...) are dropped.
"""
from __future__ import annotations

import struct

import numpy as np

from ..errors import InvalidArgumentError
from .reading import is_file_below

# framework.proto's VarType.Type: data types, then variable kinds
_DTYPES = {0: "bool", 1: "int16", 2: "int32", 3: "int64", 4: "float16", 5: "float32",
           6: "float64", 20: "uint8", 21: "int8"}
_KINDS = {7: "LOD_TENSOR", 8: "SELECTED_ROWS", 9: "FEED_MINIBATCH", 10: "FETCH_LIST",
          11: "STEP_SCOPES", 12: "LOD_RANK_TABLE", 13: "LOD_TENSOR_ARRAY", 14: "PLACE_LIST",
          15: "READER", 17: "RAW"}
# OpDesc.Attr's AttrType -> the field holding its value, and whether it repeats
_ATTR_FIELDS = {0: (3, False), 1: (4, False), 2: (5, False), 3: (6, True), 4: (7, True),
                5: (8, True), 6: (10, False), 7: (11, True), 8: (12, False), 9: (13, False),
                10: (14, True), 11: (15, True)}


class FluidFormatError(InvalidArgumentError):
    """The bytes are not what fluid 1.8 writes there."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise FluidFormatError("a protobuf varint runs past the end of the message")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of each record of a message: an int for varints, the
    bytes of a length-delimited field, raw bytes for fixed 32 / 64-bit ones."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        else:
            raise FluidFormatError(f"protobuf wire type {wire} is not one fluid writes")
        yield number, wire, value


def _signed(value: int, bits: int = 64) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _ints(wire: int, value) -> list[int]:
    """A repeated integer field's record: one varint, or a packed run of them."""
    if wire == 0:
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(_signed(v))
    return out


def _tensor_desc(buf: bytes) -> tuple[str, list[int]]:
    dtype, dims = "float32", []
    for number, wire, value in _fields(buf):
        if number == 1:
            dtype = _DTYPES.get(value)
            if dtype is None:
                raise FluidFormatError(f"tensor data type {value} is not one spmd holds")
        elif number == 2:
            dims += _ints(wire, value)
    return dtype, dims


def _var_desc(buf: bytes) -> dict:
    var = {"name": "", "kind": "LOD_TENSOR", "dtype": "float32", "shape": [], "lod_level": 0,
           "persistable": False}
    for number, _wire, value in _fields(buf):
        if number == 1:
            var["name"] = value.decode()
        elif number == 3:
            var["persistable"] = bool(value)
        elif number == 2:
            for n, _w, v in _fields(value):
                if n == 1:
                    var["kind"] = _KINDS.get(v, _DTYPES.get(v, str(v)))
                elif n in (3, 4):  # lod_tensor, tensor_array: a tensor desc and a lod_level
                    for m, _x, u in _fields(v):
                        if m == 1:
                            var["dtype"], var["shape"] = _tensor_desc(u)
                        elif m == 2:
                            var["lod_level"] = u
                elif n == 2:  # selected_rows: a tensor desc
                    var["dtype"], var["shape"] = _tensor_desc(v)
    return var


def _attr(buf: bytes):
    name, kind, records = "", 0, []
    for number, wire, value in _fields(buf):
        if number == 1:
            name = value.decode()
        elif number == 2:
            kind = value
        else:
            records.append((number, wire, value))
    field, repeated = _ATTR_FIELDS.get(kind, (None, False))
    values = []
    for number, wire, value in records:
        if number != field:
            continue
        if kind in (1, 4):  # floats: fixed 32-bit, or packed
            values += [v for (v,) in struct.iter_unpack("<f", value)]
        elif kind in (2, 5):
            values.append(value.decode("utf-8", errors="replace"))
        elif kind in (6, 7):
            values += [bool(v) for v in _ints(wire, value)]
        else:
            values += _ints(wire, value)  # an int32 is sign-extended to 64 bits on the wire
    if repeated:
        return name, kind, values
    return name, kind, (values[-1] if values else None)


def _op_desc(buf: bytes) -> dict:
    op = {"type": "", "inputs": {}, "outputs": {}, "attrs": {}, "block_attrs": {}}
    for number, _wire, value in _fields(buf):
        if number == 3:
            op["type"] = value.decode()
        elif number in (1, 2):
            slot, args = "", []
            for n, _w, v in _fields(value):
                if n == 1:
                    slot = v.decode()
                elif n == 2:
                    args.append(v.decode())
            op["inputs" if number == 1 else "outputs"][slot] = args
        elif number == 4:
            name, kind, attr = _attr(value)
            (op["block_attrs"] if kind in (8, 10) else op["attrs"])[name] = attr
    return op


def parse_program(buf: bytes) -> list[dict]:
    """The blocks of a serialized fluid ProgramDesc: idx, parent_idx, vars, ops."""
    blocks = []
    for number, _wire, value in _fields(bytes(buf)):
        if number != 1:
            continue
        block = {"idx": 0, "parent_idx": -1, "vars": [], "ops": []}
        for n, _w, v in _fields(value):
            if n == 1:
                block["idx"] = _signed(v)
            elif n == 2:
                block["parent_idx"] = _signed(v)
            elif n == 3:
                block["vars"].append(_var_desc(v))
            elif n == 4:
                block["ops"].append(_op_desc(v))
        blocks.append(block)
    if not blocks:
        raise FluidFormatError("the bytes hold no program block (not a fluid ProgramDesc)")
    return sorted(blocks, key=lambda b: b["idx"])


def looks_like_fluid_program(buf: bytes) -> bool:
    """Whether `buf` parses as a fluid ProgramDesc with a global block."""
    try:
        return bool(parse_program(buf))
    except (FluidFormatError, UnicodeDecodeError, struct.error, IndexError, ValueError):
        return False


def program_from_fluid(buf: bytes):
    """An spmd Program of a fluid 1.8 `__model__`'s bytes (see the module docstring)."""
    from ..core.program import Program

    blocks = parse_program(buf)
    program = Program()
    for desc in blocks[1:]:
        program._create_block(desc["parent_idx"])
    program._current_block_idx = 0
    for desc in blocks:
        block = program.block(desc["idx"])
        for var in desc["vars"]:
            block.create_var(name=var["name"], shape=var["shape"], dtype=var["dtype"],
                             lod_level=var["lod_level"], persistable=var["persistable"],
                             type=var["kind"])
    for desc in blocks:
        block = program.block(desc["idx"])
        for op in desc["ops"]:
            known = _declared_attrs(op["type"])
            attrs = {k: v for k, v in op["attrs"].items() if k in known and v is not None}
            attrs.update({k: v for k, v in op["block_attrs"].items() if k in known})
            block.append_op(op["type"], {k: v for k, v in op["inputs"].items() if v},
                            {k: v for k, v in op["outputs"].items() if v}, attrs)
    program._bump()
    return program


def _declared_attrs(op_type: str) -> set:
    """The attributes spmd's definition of `op_type` declares (none for an unknown op, which
    append_op then refuses, naming it)."""
    from ..ops.registry import OP_DEFS

    try:
        return set(OP_DEFS[op_type].attrs)
    except KeyError:
        return set()


def read_lod_tensor(buf: bytes, pos: int = 0, where: str = "") -> tuple[np.ndarray, list, int]:
    """(array, LoD as offsets per level, the position after it) of one fluid LoDTensor."""
    def take(fmt):
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(buf):
            raise FluidFormatError(f"{where}: the tensor file ends early")
        (value,) = struct.unpack_from(fmt, buf, pos)
        pos += size
        return value

    if take("<I") != 0:
        raise FluidFormatError(f"{where}: not a fluid LoDTensor file (version is not 0)")
    lod = []
    for _ in range(take("<Q")):
        size = take("<Q")
        if pos + size > len(buf):
            raise FluidFormatError(f"{where}: the tensor file ends early (in its LoD)")
        lod.append(np.frombuffer(buf, "<u8", size // 8, pos).astype(int).tolist())
        pos += size
    if take("<I") != 0:
        raise FluidFormatError(f"{where}: unknown tensor version")
    desc_size = take("<i")
    if desc_size < 0 or pos + desc_size > len(buf):
        raise FluidFormatError(f"{where}: the tensor file ends early (in its description)")
    dtype, dims = _tensor_desc(buf[pos:pos + desc_size])
    pos += desc_size
    count = int(np.prod(dims)) if dims else 1
    if pos + count * np.dtype(dtype).itemsize > len(buf):
        raise FluidFormatError(f"{where}: the tensor file ends early: {dtype}{dims} needs "
                               f"{count * np.dtype(dtype).itemsize} bytes of data, "
                               f"{len(buf) - pos} are left")
    array = np.frombuffer(buf, np.dtype(dtype).newbyteorder("<"), count, pos).reshape(dims)
    pos += array.nbytes
    return array.astype(dtype).copy(), lod, pos


def read_fluid_vars(dirname: str, names: list[str], filename: str | None = None) -> dict:
    """{name: array} of fluid's variable files in `dirname`: one file per variable, or
    `filename` holding them all in sorted name order (fluid's save_combine)."""
    import os

    if filename is None:
        out = {}
        for name in names:
            if not is_file_below(name):  # the names come from the model's file: never above
                raise FluidFormatError(f"'{dirname}': the model names a variable {name!r} "
                                       f"that is not a file below its directory")
            path = os.path.join(dirname, name)  # 'GRUCell/w': the file w of GRUCell, as fluid
            with open(path, "rb") as f:
                out[name] = read_lod_tensor(f.read(), where=path)[0]
        return out
    path = os.path.join(dirname, filename)
    with open(path, "rb") as f:
        return read_combined(f.read(), names, path)


def read_combined(buf: bytes, names: list[str], where: str) -> dict:
    """{name: array} of one buffer of fluid tensors, written in sorted name order."""
    out, pos = {}, 0
    for name in sorted(names):
        out[name], _lod, pos = read_lod_tensor(buf, pos, where=f"{where} ({name})")
    if pos != len(buf):
        raise FluidFormatError(f"{where}: {len(buf) - pos} bytes left after the {len(names)} "
                               f"variables the program names; the file is another model's")
    return out


def is_fluid_model(buf: bytes) -> bool:
    """Whether a model file's bytes are fluid's protobuf ProgramDesc (spmd's are JSON)."""
    return bool(buf) and not buf.lstrip()[:1] == b"{" and looks_like_fluid_program(buf)
