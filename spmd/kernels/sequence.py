"""Kernels: the sequence ops, on the rows of a LoD tensor (see spmd/ops/sequence.py).

A LoD level is an int64 array of offsets: sequence i holds rows offsets[i]:offsets[i+1], and a
sequence may be empty. Kernels work on the last level (the rows) and hand the levels above it
on to their outputs.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..core.selected_rows import add_rows
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


# -- shared helpers ----------------------------------------------------------------------------

def one_level(ins, slot: str, op: str) -> np.ndarray:
    """The offsets of input `slot`'s only LoD level; an error for none or several."""
    lod = input_lod(ins, slot, op)
    if len(lod) != 1:
        raise InvalidArgumentError(
            f"{op}: input {slot} carries {len(lod)} levels of LoD "
            f"{[level.tolist() for level in lod]}; the op takes one level, as fluid 1.8's")
    return lod[0]


def check_rows(x, offsets: np.ndarray, slot: str, op: str) -> None:
    """The LoD must end at the tensor's row count (a LoD fed for another tensor)."""
    if int(offsets[-1]) != x.shape[0]:
        raise InvalidArgumentError(
            f"{op}: the LoD of {slot} covers {int(offsets[-1])} rows but {slot} has "
            f"{x.shape[0]}; feed the LoD made for this tensor")


def gather_rows(xp, x, rows: np.ndarray):
    """x[rows] for host row indices."""
    return x[xp.asarray(rows)]


def scatter_rows(xp, like, rows: np.ndarray, values):
    """The gradient of gather_rows: zeros like `like`, values added at `rows`."""
    out = xp.zeros_like(like)
    if rows.size:
        add_rows(xp, out, xp.asarray(rows), values)
    return out


def _context_sources(offsets: np.ndarray, start: int, length: int):
    """For sequence_conv / row_conv: per context step j, the row each output row reads
    (row + start + j) and whether it lies inside the row's own sequence."""
    seg = segment_ids(offsets)
    rows = np.arange(seg.size)
    lo, hi = offsets[:-1][seg], offsets[1:][seg]
    for j in range(length):
        src = rows + start + j
        valid = (src >= lo) & (src < hi)
        yield j, np.where(valid, src, 0), valid


# -- sequence_conv: a context window per row, zero padded at sequence ends ---------------------

def _context_matrix(xp, x, offsets, start, length):
    n, d = x.shape
    col = xp.zeros((n, length * d), dtype=x.dtype)
    for j, src, valid in _context_sources(offsets, start, length):
        col[:, j * d:(j + 1) * d] = x[xp.asarray(src)] * xp.asarray(valid[:, None]).astype(
            x.dtype)
    return col


@kernel("sequence_conv")
def sequence_conv(xp, ins, attrs, want):
    x = ins["X"]
    offsets = one_level(ins, "X", "sequence_conv")
    check_rows(x, offsets, "X", "sequence_conv")
    col = _context_matrix(xp, x, offsets, attrs["contextStart"], attrs["contextLength"])
    return {"Out": col @ ins["Filter"]}


@kernel("sequence_conv_grad")
def sequence_conv_grad(xp, ins, attrs, want):
    x, w, dout = ins["X"], ins["Filter"], ins["Out@GRAD"]
    offsets = one_level(ins, "X", "sequence_conv_grad")
    start, length = attrs["contextStart"], attrs["contextLength"]
    res = {}
    if "Filter@GRAD" in want:
        res["Filter@GRAD"] = _context_matrix(xp, x, offsets, start, length).T @ dout
    if "X@GRAD" in want:
        d = x.shape[1]
        dcol = dout @ w.T
        dx = xp.zeros_like(x)
        for j, src, valid in _context_sources(offsets, start, length):
            keep = np.nonzero(valid)[0]
            if keep.size:
                add_rows(xp, dx, xp.asarray(src[keep]), dcol[xp.asarray(keep), j * d:(j + 1) * d])
        res["X@GRAD"] = dx
    return res


# -- row_conv: lookahead convolution over each sequence's future rows --------------------------

def _row_conv_layout(ins, op: str):
    """X as rows [T, D] and its sequence offsets: the LoD, or [B, T, D] cut per batch."""
    x = ins["X"]
    lod = ins.get("X@LOD")
    if lod is None:
        if x.ndim != 3:
            raise InvalidArgumentError(
                f"{op}: X without LoD must be 3-D [batch, time, width], got shape "
                f"{list(x.shape)}; feed a LoDTensor for sequences of rows")
        b, t = x.shape[:2]
        return x.reshape(b * t, x.shape[2]), np.arange(b + 1, dtype=np.int64) * t
    offsets = one_level(ins, "X", op)
    check_rows(x, offsets, "X", op)
    return x, offsets


@kernel("row_conv")
def row_conv(xp, ins, attrs, want):
    x, offsets = _row_conv_layout(ins, "row_conv")
    w = ins["Filter"]
    out = xp.zeros_like(x)
    for j, src, valid in _context_sources(offsets, 0, w.shape[0]):
        out += x[xp.asarray(src)] * xp.asarray(valid[:, None]).astype(x.dtype) * w[j]
    return {"Out": out.reshape(ins["X"].shape)}


@kernel("row_conv_grad")
def row_conv_grad(xp, ins, attrs, want):
    x, offsets = _row_conv_layout(ins, "row_conv_grad")
    w = ins["Filter"]
    dout = ins["Out@GRAD"].reshape(x.shape)
    dx, dw = xp.zeros_like(x), xp.zeros_like(w)
    for j, src, valid in _context_sources(offsets, 0, w.shape[0]):
        keep = np.nonzero(valid)[0]
        if not keep.size:
            continue
        rows, srcs = xp.asarray(keep), xp.asarray(src[keep])
        add_rows(xp, dx, srcs, dout[rows] * w[j])
        dw[j] = (dout[rows] * x[srcs]).sum(axis=0)
    res = {"X@GRAD": dx.reshape(ins["X"].shape), "Filter@GRAD": dw}
    return {k: v for k, v in res.items() if k in want}


# -- sequence_softmax: softmax over the rows of each sequence (last level) ----------------------

def _segment_max(xp, x, offsets):
    """Per-sequence maxima of a flat `x` (0 for an empty sequence)."""
    n = offsets.size - 1
    full = np.nonzero(np.diff(offsets))[0]
    if xp is np:
        out = np.zeros((n,), dtype=x.dtype)
        if full.size:
            out[full] = np.maximum.reduceat(x, offsets[full])
        return out
    import cupyx  # cupy's ufuncs have no reduceat for maximum

    out = xp.full((n,), -xp.inf, dtype=x.dtype)
    cupyx.scatter_max(out, xp.asarray(segment_ids(offsets)), x)
    return xp.where(xp.isinf(out), 0, out).astype(x.dtype)


@kernel("sequence_softmax")
def sequence_softmax(xp, ins, attrs, want):
    x = ins["X"]
    offsets = input_lod(ins, "X", "sequence_softmax")[-1]
    check_rows(x, offsets, "X", "sequence_softmax")
    if x.size != x.shape[0]:
        raise InvalidArgumentError(
            f"sequence_softmax: X must hold one score per row ([rows] or [rows, 1]), got "
            f"shape {list(x.shape)}; fluid: 'The width of each timestep in Input(X) of "
            f"SequenceSoftmaxOp should be 1'")
    flat = x.reshape(-1)
    seg = xp.asarray(segment_ids(offsets))
    e = xp.exp(flat - _segment_max(xp, flat, offsets)[seg])
    out = e / segment_sum(xp, e, offsets)[seg]
    return {"Out": out.reshape(x.shape)}


@kernel("sequence_softmax_grad")
def sequence_softmax_grad(xp, ins, attrs, want):
    out, dout = ins["Out"].reshape(-1), ins["Out@GRAD"].reshape(-1)
    offsets = input_lod(ins, "X", "sequence_softmax_grad")[-1]
    seg = xp.asarray(segment_ids(offsets))
    dx = out * (dout - segment_sum(xp, dout * out, offsets)[seg])
    return {"X@GRAD": dx.reshape(ins["X"].shape)}


# -- sequence_expand / sequence_expand_as: repeat rows or sequences ----------------------------

def _expand_plan(ins, ref_level: int, op: str):
    """(source row of every output row, the output's LoD) for sequence_expand."""
    x, x_lod = ins["X"], ins.get("X@LOD")
    y_lod = input_lod(ins, "Y", op)
    ref = len(y_lod) - 1 if ref_level == -1 else ref_level
    if not 0 <= ref < len(y_lod):
        raise InvalidArgumentError(
            f"{op}: ref_level {ref_level} is not a level of Y's LoD "
            f"{[level.tolist() for level in y_lod]}")
    ref_offsets = y_lod[ref]
    rows = x.shape[0]
    if ref_offsets.size <= 1:
        return np.arange(rows), x_lod
    repeats = np.diff(ref_offsets)
    if x_lod is not None and len(x_lod) > 1:
        raise InvalidArgumentError(
            f"{op}: X carries {len(x_lod)} levels of LoD; sequence_expand takes X with at "
            f"most one")
    if x_lod is None:
        if rows != repeats.size:
            raise InvalidArgumentError(
                f"{op}: X has {rows} rows but level {ref} of Y's LoD has {repeats.size} "
                f"sequences; X (without LoD) needs one row per sequence of Y")
        return np.repeat(np.arange(rows), repeats), None
    x_off = x_lod[0]
    check_rows(x, x_off, "X", op)
    if x_off.size != ref_offsets.size:
        raise InvalidArgumentError(
            f"{op}: X has {x_off.size - 1} sequences but level {ref} of Y's LoD has "
            f"{ref_offsets.size - 1}; they must match")
    seq = np.repeat(np.arange(repeats.size), repeats)  # x sequence of every output sequence
    lengths = np.diff(x_off)[seq]
    starts = x_off[:-1][seq]
    out_off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    src = np.repeat(starts - out_off[:-1], lengths) + np.arange(int(out_off[-1]))
    return src, make_lod([out_off])


@kernel("sequence_expand")
def sequence_expand(xp, ins, attrs, want):
    src, lod = _expand_plan(ins, attrs["ref_level"], "sequence_expand")
    return {"Out": gather_rows(xp, ins["X"], src), "Out@LOD": lod}


@kernel("sequence_expand_grad")
def sequence_expand_grad(xp, ins, attrs, want):
    src, _ = _expand_plan(ins, attrs["ref_level"], "sequence_expand_grad")
    return {"X@GRAD": scatter_rows(xp, ins["X"], src, ins["Out@GRAD"])}


def _expand_as_rows(ins, op: str) -> np.ndarray:
    offsets = one_level(ins, "Y", op)
    rows = ins["X"].shape[0]
    if rows != offsets.size - 1:
        raise InvalidArgumentError(
            f"{op}: X has {rows} rows but Y has {offsets.size - 1} sequences; X needs one "
            f"row per sequence of Y")
    return segment_ids(offsets)


@kernel("sequence_expand_as")
def sequence_expand_as(xp, ins, attrs, want):
    src = _expand_as_rows(ins, "sequence_expand_as")
    return {"Out": gather_rows(xp, ins["X"], src), "Out@LOD": ins["Y@LOD"]}


@kernel("sequence_expand_as_grad")
def sequence_expand_as_grad(xp, ins, attrs, want):
    src = _expand_as_rows(ins, "sequence_expand_as_grad")
    return {"X@GRAD": scatter_rows(xp, ins["X"], src, ins["Out@GRAD"])}
