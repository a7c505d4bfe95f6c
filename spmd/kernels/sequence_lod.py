"""Kernels: the sequence ops that move, cut, pad or relabel rows (see
spmd/ops/sequence_lod.py). Each works out on the host, from the LoD, which input row every
output row comes from; the data move is one gather, and its gradient one scatter-add."""
from __future__ import annotations

import numpy as np

from ..core.lod import check_lod, make_lod
from ..core.selected_rows import add_rows
from ..errors import InvalidArgumentError
from .registry import kernel
from .sequence import check_rows, gather_rows, one_level, scatter_rows, segment_ids
from .tensor import _check_ids


def _host(a) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a)


def _offsets(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated arange(start, start + length) for every pair."""
    total = int(lengths.sum())
    return np.repeat(starts - _offsets(lengths)[:-1], lengths) + np.arange(total)


# -- sequence_concat ---------------------------------------------------------------------------

def _concat_plan(ins, op: str):
    xs = ins["X"]
    lods = ins["X@LOD"]
    offs = []
    for i, (x, lod) in enumerate(zip(xs, lods)):
        off = one_level({"X@LOD": lod}, "X", f"{op} (X[{i}])")
        check_rows(x, off, f"X[{i}]", op)
        offs.append(off)
    n = offs[0].size - 1
    if any(o.size - 1 != n for o in offs):
        raise InvalidArgumentError(
            f"{op}: every X must have the same number of sequences, got "
            f"{[o.size - 1 for o in offs]}")
    base = _offsets([x.shape[0] for x in xs])[:-1]
    # output sequence i is X[0]'s sequence i, then X[1]'s, ...: order rows by (i, input)
    starts = np.stack([o[:-1] + b for o, b in zip(offs, base)], axis=1).reshape(-1)
    lengths = np.stack([np.diff(o) for o in offs], axis=1)
    src = _ranges(starts, lengths.reshape(-1))
    return src, base, _offsets(lengths.sum(axis=1))


@kernel("sequence_concat")
def sequence_concat(xp, ins, attrs, want):
    src, _, out_off = _concat_plan(ins, "sequence_concat")
    rows = xp.concatenate(ins["X"], axis=0)
    return {"Out": gather_rows(xp, rows, src), "Out@LOD": make_lod([out_off])}


@kernel("sequence_concat_grad")
def sequence_concat_grad(xp, ins, attrs, want):
    src, base, _ = _concat_plan(ins, "sequence_concat_grad")
    xs = ins["X"]
    whole = scatter_rows(xp, xp.concatenate(xs, axis=0), src, ins["Out@GRAD"])
    return {"X@GRAD": [whole[b:b + x.shape[0]] for b, x in zip(base, xs)]}


# -- sequence_slice ----------------------------------------------------------------------------

def _slice_plan(ins, op: str):
    x = ins["X"]
    off = one_level(ins, "X", op)
    check_rows(x, off, "X", op)
    n = off.size - 1
    offset, length = (_host(ins[s]).reshape(-1).astype(np.int64) for s in ("Offset", "Length"))
    if offset.size != n or length.size != n:
        raise InvalidArgumentError(
            f"{op}: Offset and Length need one entry per sequence of X ({n}), got "
            f"{offset.size} and {length.size}")
    seq_len = np.diff(off)
    bad = np.nonzero((offset < 0) | (length < 0) | (offset + length > seq_len))[0]
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(
            f"{op}: sequence {i} has {int(seq_len[i])} rows, so offset {int(offset[i])} and "
            f"length {int(length[i])} do not cut a part of it; need 0 <= offset, 0 <= length "
            f"and offset + length <= the sequence's length")
    return _ranges(off[:-1] + offset, length), _offsets(length)


@kernel("sequence_slice")
def sequence_slice(xp, ins, attrs, want):
    src, out_off = _slice_plan(ins, "sequence_slice")
    return {"Out": gather_rows(xp, ins["X"], src), "Out@LOD": make_lod([out_off])}


@kernel("sequence_slice_grad")
def sequence_slice_grad(xp, ins, attrs, want):
    src, _ = _slice_plan(ins, "sequence_slice_grad")
    return {"X@GRAD": scatter_rows(xp, ins["X"], src, ins["Out@GRAD"])}


# -- sequence_pad / sequence_unpad -------------------------------------------------------------

def _pad_plan(offsets: np.ndarray, padded: int, op: str):
    """Flat positions in [batch * padded] of every row, for sequences at `offsets`."""
    lengths = np.diff(offsets)
    longest = int(lengths.max()) if lengths.size else 0
    if padded == -1:
        padded = longest
    elif padded < longest:
        raise InvalidArgumentError(
            f"{op}: padded_length {padded} is shorter than the longest sequence ({longest} "
            f"rows); give maxlen=None or at least {longest}")
    pos = segment_ids(offsets) * padded + (np.arange(int(offsets[-1])) -
                                           np.repeat(offsets[:-1], lengths))
    return pos, lengths, padded


@kernel("sequence_pad")
def sequence_pad(xp, ins, attrs, want):
    x, pad = ins["X"], ins["PadValue"]
    off = one_level(ins, "X", "sequence_pad")
    check_rows(x, off, "X", "sequence_pad")
    pos, lengths, padded = _pad_plan(off, attrs["padded_length"], "sequence_pad")
    row = x.shape[1:]
    if pad.size != 1 and tuple(pad.shape) != tuple(row):
        raise InvalidArgumentError(
            f"sequence_pad: PadValue must be one number or shaped like a row of X "
            f"{list(row)}, got shape {list(pad.shape)}")
    batch = lengths.size
    out = xp.empty((batch * padded,) + tuple(row), dtype=x.dtype)
    out[...] = pad.reshape(row if pad.size != 1 else ()).astype(x.dtype)
    out[xp.asarray(pos)] = x
    return {"Out": out.reshape((batch, padded) + tuple(row)), "Out@LOD": None,
            "Length": xp.asarray(lengths.astype(np.int64)), "Length@LOD": None}


@kernel("sequence_pad_grad")
def sequence_pad_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    off = one_level(ins, "X", "sequence_pad_grad")
    pos, _, _ = _pad_plan(off, attrs["padded_length"], "sequence_pad_grad")
    flat = dout.reshape((-1,) + tuple(x.shape[1:]))
    return {"X@GRAD": flat[xp.asarray(pos)]}


def _unpad_plan(ins, op: str):
    x = ins["X"]
    lengths = _host(ins["Length"]).reshape(-1).astype(np.int64)
    batch, padded = x.shape[:2]
    if lengths.size != batch:
        raise InvalidArgumentError(
            f"{op}: Length has {lengths.size} entries but X holds {batch} padded sequences")
    if (lengths < 0).any() or (lengths > padded).any():
        raise InvalidArgumentError(
            f"{op}: Length {lengths.tolist()} must lie in [0, {padded}] (X's padded length)")
    off = _offsets(lengths)
    pos, _, _ = _pad_plan(off, padded, op)
    return pos, off


def _unpadded_rows(x):
    return x.reshape((x.shape[0] * x.shape[1],) + (tuple(x.shape[2:]) or (1,)))


@kernel("sequence_unpad")
def sequence_unpad(xp, ins, attrs, want):
    pos, off = _unpad_plan(ins, "sequence_unpad")
    return {"Out": gather_rows(xp, _unpadded_rows(ins["X"]), pos), "Out@LOD": make_lod([off])}


@kernel("sequence_unpad_grad")
def sequence_unpad_grad(xp, ins, attrs, want):
    x = ins["X"]
    pos, _ = _unpad_plan(ins, "sequence_unpad_grad")
    rows = scatter_rows(xp, _unpadded_rows(x), pos, ins["Out@GRAD"])
    return {"X@GRAD": rows.reshape(x.shape)}


# -- sequence_mask -----------------------------------------------------------------------------

@kernel("sequence_mask")
def sequence_mask(xp, ins, attrs, want):
    x = ins["X"]
    maxlen = attrs["maxlen"]
    if ins.get("MaxLenTensor") is not None:
        maxlen = int(_host(ins["MaxLenTensor"]).reshape(-1)[0])
        if maxlen <= 0:
            raise InvalidArgumentError(
                f"sequence_mask: MaxLenTensor holds {maxlen}; it must be positive")
    elif maxlen == -1:
        maxlen = int(x.max()) if x.size else 0
    mask = xp.arange(maxlen) < x[..., None]
    return {"Y": mask.astype(attrs["out_dtype"])}


# -- sequence_reshape --------------------------------------------------------------------------

def _reshape_lod(ins, new_dim: int, op: str):
    x = ins["X"]
    off = one_level(ins, "X", op)
    check_rows(x, off, "X", op)
    width = x.shape[1]
    scaled = off * width
    bad = np.nonzero(scaled % new_dim)[0]
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(
            f"{op}: the sequences before offset {int(off[i])} hold {int(scaled[i])} values, "
            f"not a multiple of new_dim {new_dim}; every sequence's length * {width} must "
            f"divide by new_dim")
    return scaled // new_dim


@kernel("sequence_reshape")
def sequence_reshape(xp, ins, attrs, want):
    off = _reshape_lod(ins, attrs["new_dim"], "sequence_reshape")
    return {"Out": ins["X"].reshape(-1, attrs["new_dim"]), "Out@LOD": make_lod([off])}


@kernel("sequence_reshape_grad")
def sequence_reshape_grad(xp, ins, attrs, want):
    return {"X@GRAD": ins["Out@GRAD"].reshape(ins["X"].shape)}


# -- sequence_reverse --------------------------------------------------------------------------

def _reversed_rows(ins, op: str) -> np.ndarray:
    off = one_level(ins, "X", op)
    check_rows(ins["X"], off, "X", op)
    seg = segment_ids(off)
    return off[:-1][seg] + off[1:][seg] - 1 - np.arange(seg.size)


@kernel("sequence_reverse")
def sequence_reverse(xp, ins, attrs, want):
    return {"Y": gather_rows(xp, ins["X"], _reversed_rows(ins, "sequence_reverse"))}


@kernel("sequence_reverse_grad")
def sequence_reverse_grad(xp, ins, attrs, want):
    return {"X@GRAD": gather_rows(xp, ins["Y@GRAD"],
                                  _reversed_rows(ins, "sequence_reverse_grad"))}


# -- sequence_enumerate ------------------------------------------------------------------------

@kernel("sequence_enumerate")
def sequence_enumerate(xp, ins, attrs, want):
    x = ins["X"]
    off = one_level(ins, "X", "sequence_enumerate")
    check_rows(x, off, "X", "sequence_enumerate")
    seg = segment_ids(off)
    rows = np.arange(seg.size)[:, None] + np.arange(attrs["win_size"])
    inside = rows < off[1:][seg][:, None]
    flat = x.reshape(-1)
    picked = flat[xp.asarray(np.where(inside, rows, 0))] if seg.size else \
        xp.zeros((0, attrs["win_size"]), dtype=x.dtype)
    pad = xp.asarray(attrs["pad_value"], dtype=x.dtype)
    return {"Out": xp.where(xp.asarray(inside), picked, pad)}


# -- sequence_scatter --------------------------------------------------------------------------

def _scatter_plan(xp, ins, op: str):
    """(row, column) of X's flattened rows that every update adds to."""
    x, ids = ins["X"], ins["Ids"]
    off = one_level(ins, "Ids", op)
    upd_off = one_level(ins, "Updates", op)
    if not np.array_equal(off, upd_off):
        raise InvalidArgumentError(
            f"{op}: Ids and Updates must carry the same LoD, got {off.tolist()} and "
            f"{upd_off.tolist()}")
    check_rows(ids, off, "Ids", op)
    if off.size - 1 != x.shape[0]:
        raise InvalidArgumentError(
            f"{op}: Ids holds {off.size - 1} sequences but X has {x.shape[0]} rows; sequence "
            f"i updates row i")
    width = int(np.prod(x.shape[1:]))
    cols = ids.reshape(-1).astype(xp.int64)
    _check_ids(xp, cols, width, f"{op}: Ids (columns of a row of X)")
    return xp.asarray(segment_ids(off)), cols, width


@kernel("sequence_scatter")
def sequence_scatter(xp, ins, attrs, want):
    x = ins["X"]
    rows, cols, width = _scatter_plan(xp, ins, "sequence_scatter")
    out = x.reshape(-1).copy()
    if cols.size:  # repeated ids in a sequence add up, as fluid's loop does
        add_rows(xp, out, rows * width + cols, ins["Updates"].reshape(-1).astype(x.dtype))
    return {"Out": out.reshape(x.shape)}


@kernel("sequence_scatter_grad")
def sequence_scatter_grad(xp, ins, attrs, want):
    dout = ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = dout
    if "Updates@GRAD" in want:
        x = {"X": dout, **{k: ins[k] for k in ("Ids", "Ids@LOD", "Updates@LOD")}}
        rows, cols, width = _scatter_plan(xp, x, "sequence_scatter_grad")
        picked = dout.reshape(dout.shape[0], width)[rows, cols]
        res["Updates@GRAD"] = picked.reshape(ins["Updates"].shape)
    return res


# -- lod_reset (and lod_append) ----------------------------------------------------------------

@kernel("lod_reset")
def lod_reset(xp, ins, attrs, want):
    x = ins["X"]
    y = ins.get("Y")
    if y is not None and ins.get("Y@LOD") is not None:
        lod = ins["Y@LOD"]
    else:
        level = _host(y).reshape(-1).astype(np.int64) if y is not None else \
            np.asarray(attrs["target_lod"], dtype=np.int64)
        if attrs["append"] and ins.get("X@LOD") is not None:
            lod = make_lod([*ins["X@LOD"], level])
        else:
            lod = make_lod([level])
    check_lod(lod, x.shape[0] if x.ndim else 1, "lod_reset: the new LoD")
    return {"Out": x, "Out@LOD": lod}


@kernel("lod_reset_grad")
def lod_reset_grad(xp, ins, attrs, want):
    return {"X@GRAD": ins["Out@GRAD"]}
