"""Kernels: the sequence ops, on the rows of a LoD tensor (see spmd/ops/sequence.py).

A LoD level is an int64 array of offsets: sequence i holds rows offsets[i]:offsets[i+1], and a
sequence may be empty. Kernels work on the last level (the rows) and hand the levels above it
on to their outputs.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel


def input_lod(ins, slot: str, op: str):
    """The LoD of input `slot`, or an error saying how to give the op one."""
    lod = ins.get(slot + "@LOD")
    if lod is None:
        raise InvalidArgumentError(
            f"{op}: input {slot} carries no LoD; feed it as a LoDTensor "
            f"(fluid.create_lod_tensor(data, [[len(s) for s in sequences]], place)) to a "
            f"variable declared with lod_level=1, or compute it from one")
    return lod


def segment_ids(offsets: np.ndarray) -> np.ndarray:
    """The sequence each row belongs to: [0, 2, 5] -> [0, 0, 1, 1, 1]."""
    return np.repeat(np.arange(offsets.size - 1), np.diff(offsets))


def segment_sum(xp, x, offsets: np.ndarray):
    """Per-sequence sums of the rows of `x` (zeros for an empty sequence)."""
    n = offsets.size - 1
    out = xp.zeros((n,) + x.shape[1:], dtype=x.dtype)
    lengths = np.diff(offsets)
    full = np.nonzero(lengths)[0]
    if full.size:
        # reduceat over the non-empty starts: an empty sequence between two has no rows, so
        # each sum still ends at its own sequence's end
        out[xp.asarray(full)] = xp.add.reduceat(x, xp.asarray(offsets[full]), axis=0)
    return out


def _pool_scale(xp, pooltype: str, lengths: np.ndarray, dtype):
    """The factor AVERAGE and SQRT pooling multiply a sequence's sum by (1 for empty)."""
    safe = np.maximum(lengths, 1).astype(np.float64)
    scale = 1.0 / safe if pooltype == "AVERAGE" else 1.0 / np.sqrt(safe)
    return xp.asarray(scale.astype(dtype))


@kernel("sequence_pool")
def sequence_pool(xp, ins, attrs, want):
    x = ins["X"]
    lod = input_lod(ins, "X", "sequence_pool")
    offsets = lod[-1]
    lengths = np.diff(offsets)
    n = lengths.size
    pooltype = attrs["pooltype"]
    tail = (1,) * (x.ndim - 1)
    empty = xp.asarray(lengths == 0).reshape((n,) + tail)
    index = None
    if pooltype in ("SUM", "AVERAGE", "SQRT"):
        out = segment_sum(xp, x, offsets)
        if pooltype != "SUM":
            out = out * _pool_scale(xp, pooltype, lengths, x.dtype).reshape((n,) + tail)
    elif pooltype in ("FIRST", "LAST"):
        rows = offsets[:-1] if pooltype == "FIRST" else offsets[1:] - 1
        out = x[xp.asarray(np.where(lengths > 0, rows, 0))]
    else:  # MAX: the row index of each maximum, as fluid's MaxIndex (int32)
        index = np.zeros((n,) + x.shape[1:], dtype=np.int32)
        out = xp.zeros((n,) + x.shape[1:], dtype=x.dtype)
        for i in np.nonzero(lengths)[0]:
            part = x[offsets[i]:offsets[i + 1]]
            arg = part.argmax(axis=0)
            index[i] = arg + offsets[i]
            out[i] = xp.take_along_axis(part, arg[None], axis=0)[0]
        index = xp.asarray(index)
    out = xp.where(empty, xp.asarray(attrs["pad_value"], dtype=x.dtype), out)
    res = {"Out": out, "Out@LOD": lod[:-1] or None}
    if "MaxIndex" in want:
        res["MaxIndex"] = index if index is not None else xp.zeros(out.shape, np.int32)
    return res


@kernel("sequence_pool_grad")
def sequence_pool_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    offsets = input_lod(ins, "X", "sequence_pool_grad")[-1]
    lengths = np.diff(offsets)
    pooltype = attrs["pooltype"]
    n = lengths.size
    tail = (1,) * (x.ndim - 1)
    seg = xp.asarray(segment_ids(offsets))
    if pooltype in ("SUM", "AVERAGE", "SQRT"):
        g = dout
        if pooltype != "SUM":
            g = g * _pool_scale(xp, pooltype, lengths, x.dtype).reshape((n,) + tail)
        dx = g[seg]
    elif pooltype in ("FIRST", "LAST"):
        dx = xp.zeros_like(x)
        full = np.nonzero(lengths)[0]
        rows = offsets[:-1][full] if pooltype == "FIRST" else offsets[1:][full] - 1
        dx[xp.asarray(rows)] = dout[xp.asarray(full)]
    else:
        dx = xp.zeros_like(x)
        index = ins["MaxIndex"]
        flat_dx = dx.reshape(x.shape[0], -1)
        flat_index = index.reshape(n, -1)
        flat_dout = dout.reshape(n, -1)
        cols = xp.arange(flat_dx.shape[1])
        for i in np.nonzero(lengths)[0]:
            flat_dx[flat_index[i], cols] += flat_dout[i]
    return {"X@GRAD": dx.astype(x.dtype, copy=False)}
