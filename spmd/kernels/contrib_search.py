"""Kernels: the search / text-matching contributed ops (see spmd/ops/contrib_search.py).

Every op loops over the batch's sequences on the host (their sizes come from the LoD) and
does each sequence's arithmetic as one array expression; the layouts of the flattened outputs
are fluid 1.8.5's, so a program reading Out or its LoD sees fluid's numbers in fluid's order.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..core.selected_rows import add_rows
from ..errors import InvalidArgumentError
from .registry import kernel
from .sequence import one_level


def _host(a) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a)


def _offsets(sizes) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]).astype(np.int64)


def _same_batch(op: str, **offsets) -> int:
    counts = {k: v.size - 1 for k, v in offsets.items()}
    if len(set(counts.values())) != 1:
        raise InvalidArgumentError(f"{op}: every LoD input must hold the same number of "
                                   f"sequences, got {counts}")
    return next(iter(counts.values()))


# -- match_matrix_tensor -----------------------------------------------------------------------
# Out of sequence b, channel t: X_b W[:, t, :] Y_b^T, [len_x, len_y] row-major; the sequences'
# blocks one after the other, each channel's block after the previous one ([total, 1]).

def _match_plan(ins, op: str):
    ox, oy = one_level(ins, "X", op), one_level(ins, "Y", op)
    _same_batch(op, X=ox, Y=oy)
    for slot, off in (("X", ox), ("Y", oy)):
        if int(off[-1]) != ins[slot].shape[0]:
            raise InvalidArgumentError(f"{op}: the LoD of {slot} covers {int(off[-1])} rows "
                                       f"but {slot} has {ins[slot].shape[0]}")
    return ox, oy


@kernel("match_matrix_tensor")
def match_matrix_tensor(xp, ins, attrs, want):
    x, y, w = ins["X"], ins["Y"], ins["W"]
    ox, oy = _match_plan(ins, "match_matrix_tensor")
    t, h = attrs["dim_t"], x.shape[1]
    tmp = x @ w.reshape(h, -1)                                   # [rows of X, dim_t * h]
    blocks = []
    for b in range(ox.size - 1):
        left = tmp[ox[b]:ox[b + 1]].reshape(-1, t, h)
        right = y[oy[b]:oy[b + 1]]
        blocks.append(xp.einsum("ith,jh->tij", left, right).reshape(-1))
    sizes = [t * (ox[b + 1] - ox[b]) * (oy[b + 1] - oy[b]) for b in range(ox.size - 1)]
    out = xp.concatenate(blocks) if blocks else xp.zeros((0,), x.dtype)
    return {"Out": out.reshape(-1, 1), "Out@LOD": make_lod([_offsets(sizes)]),
            "Tmp": tmp.reshape(-1, 1)}


@kernel("match_matrix_tensor_grad")
def match_matrix_tensor_grad(xp, ins, attrs, want):
    x, y, w = ins["X"], ins["Y"], ins["W"]
    ox, oy = _match_plan(ins, "match_matrix_tensor_grad")
    t, h = attrs["dim_t"], x.shape[1]
    w2 = w.reshape(h, -1)
    tmp = x @ w2
    dout = ins["Out@GRAD"].reshape(-1)
    dtmp, dy = xp.zeros_like(tmp), xp.zeros_like(y)
    at = 0
    for b in range(ox.size - 1):
        lx, ly = int(ox[b + 1] - ox[b]), int(oy[b + 1] - oy[b])
        g = dout[at:at + t * lx * ly].reshape(t, lx, ly)
        at += t * lx * ly
        left = tmp[ox[b]:ox[b + 1]].reshape(lx, t, h)
        right = y[oy[b]:oy[b + 1]]
        dtmp[ox[b]:ox[b + 1]] = xp.einsum("tij,jh->ith", g, right).reshape(lx, t * h)
        dy[oy[b]:oy[b + 1]] += xp.einsum("tij,ith->jh", g, left)
    return {"X@GRAD": dtmp @ w2.T, "Y@GRAD": dy, "W@GRAD": (x.T @ dtmp).reshape(w.shape)}


# -- sequence_topk_avg_pooling -----------------------------------------------------------------
# For every sequence, channel and row of its [channels, rows, cols] map: the mean of the row's
# k largest values for each k of topks (a row shorter than k adds nothing for the missing
# ones but is still divided by k, as fluid). Out: [rows, channels * len(topks)], the row LoD.

def _topk_plan(ins, attrs, op: str):
    x = ins["X"]
    ox = one_level(ins, "X", op)
    orow, ocol = one_level(ins, "ROW", op), one_level(ins, "COLUMN", op)
    _same_batch(op, X=ox, ROW=orow, COLUMN=ocol)
    c = attrs["channel_num"]
    for b in range(ox.size - 1):
        size, rows, cols = ox[b + 1] - ox[b], orow[b + 1] - orow[b], ocol[b + 1] - ocol[b]
        if size != c * rows * cols:
            raise InvalidArgumentError(
                f"{op}: sequence {b} of X holds {int(size)} values, channel_num * rows * cols "
                f"= {c} * {int(rows)} * {int(cols)} = {int(c * rows * cols)}")
    if int(ox[-1]) != x.shape[0] * int(np.prod(x.shape[1:])):
        raise InvalidArgumentError(f"{op}: the LoD of X covers {int(ox[-1])} values, X has "
                                   f"{x.size}")
    return ox, orow, ocol


def _topk_positions(values: np.ndarray, max_k: int) -> np.ndarray:
    """fluid's order: the largest first, the first of equal ones first; -1 past the row."""
    order = np.argsort(-values, axis=-1, kind="stable")[..., :max_k]
    pad = max_k - order.shape[-1]
    if pad > 0:
        order = np.concatenate([order, np.full(order.shape[:-1] + (pad,), -1, order.dtype)], -1)
    return order


@kernel("sequence_topk_avg_pooling")
def sequence_topk_avg_pooling(xp, ins, attrs, want):
    ox, orow, ocol = _topk_plan(ins, attrs, "sequence_topk_avg_pooling")
    flat = ins["X"].reshape(-1)
    host = _host(flat)
    c, topks = attrs["channel_num"], list(attrs["topks"])
    max_k, ks = topks[-1], np.asarray(topks) - 1
    outs, positions = [], []
    for b in range(ox.size - 1):
        rows, cols = int(orow[b + 1] - orow[b]), int(ocol[b + 1] - ocol[b])
        maps = flat[ox[b]:ox[b + 1]].reshape(c, rows, cols)
        pos = _topk_positions(host[ox[b]:ox[b + 1]].reshape(c, rows, cols), max_k)
        picked = xp.take_along_axis(maps, xp.asarray(np.maximum(pos, 0)), axis=-1)
        picked = xp.where(xp.asarray(pos >= 0), picked, xp.zeros((), maps.dtype))
        means = xp.cumsum(picked, axis=-1)[..., ks] / xp.asarray(topks, dtype=maps.dtype)
        outs.append(means.transpose(1, 0, 2).reshape(rows, -1))    # [rows, channel, k]
        positions.append(pos.transpose(1, 0, 2).reshape(-1))
    dtype = ins["X"].dtype
    out = xp.concatenate(outs) if outs else xp.zeros((0, c * len(topks)), dtype)
    pos = np.concatenate(positions) if positions else np.zeros((0,), np.int64)
    return {"Out": out, "Out@LOD": make_lod([orow]), "pos": xp.asarray(pos.astype(np.int32))}


@kernel("sequence_topk_avg_pooling_grad")
def sequence_topk_avg_pooling_grad(xp, ins, attrs, want):
    ox, orow, ocol = _topk_plan(ins, attrs, "sequence_topk_avg_pooling_grad")
    x = ins["X"]
    host = _host(x.reshape(-1))
    c, topks = attrs["channel_num"], list(attrs["topks"])
    max_k = topks[-1]
    # weight of the j-th largest value: sum over the k's it is among of dOut[k] / k
    among = (np.arange(max_k)[:, None] < np.asarray(topks)[None, :]) / np.asarray(topks)
    dout = ins["Out@GRAD"]
    dx = xp.zeros((x.size,), x.dtype)
    for b in range(ox.size - 1):
        rows, cols = int(orow[b + 1] - orow[b]), int(ocol[b + 1] - ocol[b])
        if rows * cols == 0:
            continue
        pos = _topk_positions(host[ox[b]:ox[b + 1]].reshape(c, rows, cols), max_k)
        g = dout[orow[b]:orow[b + 1]].reshape(rows, c, len(topks)).transpose(1, 0, 2)
        weights = g @ xp.asarray(among.T.astype(x.dtype))            # [c, rows, max_k]
        base = ox[b] + (np.arange(c)[:, None, None] * rows + np.arange(rows)[None, :, None]) \
            * cols
        keep = pos >= 0
        target = (base + pos)[keep]
        add_rows(xp, dx, xp.asarray(target), weights[xp.asarray(keep)])
    return {"X@GRAD": dx.reshape(x.shape)}


# -- var_conv_2d -------------------------------------------------------------------------------
# A 'same' convolution (kernel centred, zero padded, kernel // 2 on each side) with strides of
# each sequence's [InputChannel, rows, cols] map; Out holds each sequence's [OutputChannel,
# out rows, out cols] map flattened, Col its im2col matrix [InputChannel * KH * KW, out pixels].

def _conv_plan(ins, attrs, op: str):
    ox = one_level(ins, "X", op)
    orow, ocol = one_level(ins, "ROW", op), one_level(ins, "COLUMN", op)
    _same_batch(op, X=ox, ROW=orow, COLUMN=ocol)
    cin, kh, kw = attrs["InputChannel"], attrs["KernelH"], attrs["KernelW"]
    sh, sw = attrs["StrideH"], attrs["StrideW"]
    plans = []
    for b in range(ox.size - 1):
        h, w = int(orow[b + 1] - orow[b]), int(ocol[b + 1] - ocol[b])
        if ox[b + 1] - ox[b] != cin * h * w:
            raise InvalidArgumentError(
                f"{op}: sequence {b} of X holds {int(ox[b + 1] - ox[b])} values, InputChannel "
                f"* rows * cols = {cin} * {h} * {w} = {cin * h * w}")
        oh = (h - 1) // sh + 1 if h else 0
        ow = (w - 1) // sw + 1 if w else 0
        if oh * ow == 0:
            plans.append((b, 0, None, None))
            continue
        # source (within the sequence) of every im2col entry [cin * kh * kw, oh * ow]
        ys = (np.arange(oh) * sh)[None, :, None] + np.arange(kh)[:, None, None] - kh // 2
        xs = (np.arange(ow) * sw)[None, None, :] + np.arange(kw)[:, None, None] - kw // 2
        iy = np.broadcast_to(ys[:, None, :, :], (kh, kw, oh, ow))
        ix = np.broadcast_to(xs[None, :, None, :].reshape(1, kw, 1, ow), (kh, kw, oh, ow))
        inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        src = np.where(inside, iy * w + ix, 0)
        src = (np.arange(cin)[:, None, None, None, None] * h * w + src[None]).reshape(
            cin * kh * kw, oh * ow) + int(ox[b])
        mask = np.broadcast_to(inside[None], (cin, kh, kw, oh, ow)).reshape(src.shape)
        plans.append((b, oh * ow, src, mask))
    return plans


@kernel("var_conv_2d")
def var_conv_2d(xp, ins, attrs, want):
    plans = _conv_plan(ins, attrs, "var_conv_2d")
    flat, w = ins["X"].reshape(-1), ins["W"]
    cout, rows = attrs["OutputChannel"], w.shape[1]
    outs, cols, out_sizes, col_sizes = [], [], [], []
    for _, pixels, src, mask in plans:
        out_sizes.append(cout * pixels)
        col_sizes.append(rows * pixels)
        if not pixels:
            continue
        col = xp.where(xp.asarray(mask), flat[xp.asarray(src)], xp.zeros((), flat.dtype))
        cols.append(col.reshape(-1))
        outs.append((w @ col).reshape(-1))
    empty = xp.zeros((0,), flat.dtype)
    return {"Out": (xp.concatenate(outs) if outs else empty).reshape(-1, 1),
            "Out@LOD": make_lod([_offsets(out_sizes)]),
            "Col": (xp.concatenate(cols) if cols else empty).reshape(-1, 1),
            "Col@LOD": make_lod([_offsets(col_sizes)])}


@kernel("var_conv_2d_grad")
def var_conv_2d_grad(xp, ins, attrs, want):
    plans = _conv_plan(ins, attrs, "var_conv_2d_grad")
    x, w = ins["X"], ins["W"]
    flat, dout = x.reshape(-1), ins["Out@GRAD"].reshape(-1)
    cout = attrs["OutputChannel"]
    dx, dw = xp.zeros((x.size,), x.dtype), xp.zeros_like(w)
    at = 0
    for _, pixels, src, mask in plans:
        if not pixels:
            continue
        g = dout[at:at + cout * pixels].reshape(cout, pixels)
        at += cout * pixels
        m = xp.asarray(mask)
        col = xp.where(m, flat[xp.asarray(src)], xp.zeros((), flat.dtype))
        dw += g @ col.T
        dcol = w.T @ g
        add_rows(xp, dx, xp.asarray(src[mask]), dcol[m])
    return {"X@GRAD": dx.reshape(x.shape), "W@GRAD": dw}


# -- pyramid_hash (search_pyramid_hash) --------------------------------------------------------
# Every n-gram (2 <= n <= pyramid_layer) of a sequence's ids, as float32 bytes, is hashed with
# XXH32: chunk j (j = 0, rand_len, ... < num_emb) of its embedding is W[h_j : h_j + rand_len]
# with h_j = XXH32(bytes, seed=j) % space_len. Training drops an n-gram when glibc's rand_r
# (seeded by `seed` each run) / RAND_MAX < drop_out_percent; inference scales the output by
# drop_out_percent, as fluid 1.8.5 does. A sequence with no n-gram left gives one zero row.

_M32 = 0xFFFFFFFF
_X1, _X2, _X3, _X4, _X5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_RAND_MAX = 2147483647


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of `data` (Yann Collet's 32-bit xxHash)."""
    n, i, seed = len(data), 0, seed & _M32
    if n >= 16:
        v = [(seed + _X1 + _X2) & _M32, (seed + _X2) & _M32, seed, (seed - _X1) & _M32]
        while i + 16 <= n:
            for k in range(4):
                lane = int.from_bytes(data[i + 4 * k:i + 4 * k + 4], "little")
                v[k] = (_rotl32((v[k] + lane * _X2) & _M32, 13) * _X1) & _M32
            i += 16
        h = (_rotl32(v[0], 1) + _rotl32(v[1], 7) + _rotl32(v[2], 12) + _rotl32(v[3], 18))
        h &= _M32
    else:
        h = (seed + _X5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i:i + 4], "little") * _X3) & _M32
        h = (_rotl32(h, 17) * _X4) & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _X5) & _M32
        h = (_rotl32(h, 11) * _X1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _X2) & _M32
    h ^= h >> 13
    h = (h * _X3) & _M32
    return h ^ (h >> 16)


def _rand_r(state: list) -> int:
    """glibc's rand_r on a one-element [seed] state."""
    nxt = state[0]
    nxt = (nxt * 1103515245 + 12345) & _M32
    result = (nxt // 65536) % 2048
    nxt = (nxt * 1103515245 + 12345) & _M32
    result = (result << 10) ^ ((nxt // 65536) % 1024)
    nxt = (nxt * 1103515245 + 12345) & _M32
    result = (result << 10) ^ ((nxt // 65536) % 1024)
    state[0] = nxt
    return result


@kernel("pyramid_hash")
def pyramid_hash(xp, ins, attrs, want):
    # fluid's kernel reads X as a flat id vector, its first rows-many values, where the LoD
    # counts rows: an [n, 1] X is n ids; of a wider X only the first n flat values are read
    x = _host(ins["X"])
    rows = x.shape[0]
    ids = x.reshape(-1)[:rows]
    off = one_level(ins, "X", "pyramid_hash")
    if int(off[-1]) != rows:
        raise InvalidArgumentError(f"pyramid_hash: the LoD of X covers {int(off[-1])} rows, X "
                                   f"has {rows} (shape {list(x.shape)}); its LoD must cover "
                                   f"every row")
    if attrs["use_filter"] and (attrs["white_list_len"] > 0 or attrs["black_list_len"] > 0):
        raise InvalidArgumentError(
            "pyramid_hash: use_filter with white / black lists needs fluid's bloom filters "
            "(its C bloomfilter struct in the WhiteList / BlackList parameters), which spmd "
            "does not read; pass use_filter=False")
    w = ins["W"]
    table = _host(w).reshape(-1)
    num_emb, rand_len, space = attrs["num_emb"], attrs["rand_len"], attrs["space_len"]
    layers, training = attrs["pyramid_layer"], attrs["is_training"] != 0
    rate, state = np.float32(attrs["drop_out_percent"]), [attrs["seed"] & _M32]
    as_float = ids.astype(np.float32)
    rows, out_sizes, kept_sizes, drop = [], [], [], []
    for b in range(off.size - 1):
        seq = as_float[off[b]:off[b + 1]]
        kept = 0
        for n in range(2, min(layers, seq.size) + 1):
            for start in range(seq.size - n + 1):
                keep = 1
                if training:
                    keep = 0 if np.float32(_rand_r(state)) / np.float32(_RAND_MAX) < rate else 1
                drop.append(keep)
                if not keep:
                    continue
                data = seq[start:start + n].tobytes()
                rows.append(np.concatenate([
                    table[xxh32(data, j) % space:][:rand_len] for j in range(0, num_emb,
                                                                              rand_len)]))
                kept += 1
        if kept == 0:
            rows.append(np.zeros(num_emb, table.dtype))
        out_sizes.append(max(kept, 1))
        kept_sizes.append(kept)
    out = np.stack(rows).astype(table.dtype) if rows else np.zeros((0, num_emb), table.dtype)
    if not training:
        out = out * np.asarray(rate, table.dtype)
    return {"Out": xp.asarray(out), "Out@LOD": make_lod([_offsets(out_sizes)]),
            "DropPos": xp.asarray(np.asarray(drop, np.int32).reshape(-1, 1)),
            "DropPos@LOD": make_lod([_offsets(kept_sizes)]),
            "X_Temp_Out": xp.asarray(_temp_out(as_float, x.shape, table.dtype))}


def _temp_out(ids, shape, dtype):
    """X_Temp_Out: X's shape, its first rows-many entries the ids read as floats; fluid leaves
    the rest of the buffer unwritten, spmd zeros it."""
    buf = np.zeros(int(np.prod(shape)), dtype)
    buf[:ids.size] = ids
    return buf.reshape(shape)
