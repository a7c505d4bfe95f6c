"""Kernels: pool2d, pool3d and max_pool{2,3}d_with_index on channel-first inputs.

Fixed windows that tile the map (stride == window, no padding: the common 2x2/2 pooling) are
read as a strided view [N, C, out0, k0, out1, k1, ...] and reduced over the window offsets;
for max pooling on numpy with oneDNN installed, the view is first copied apart into one
contiguous plane per offset by oneDNN's reorder (conv_dnnl.strided_copy), as numpy's ufuncs run
element by element over interleaved views but vectorised over planes (the gradient planes go
back the same way), with the same operations in the same order. Other fixed windows: the input
is laid out [*spatial, N*C] and reduced over the shifted slices, one per window offset (Python
loops over offsets only).
Adaptive windows differ in size from cell to cell, so each output cell is reduced on its own
(output maps are small: that is what adaptive pooling is for). Max pooling sends the gradient
to the first maximum of each window in row-major order, as fluid does; padding never counts
as a value.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..ops.conv import pool_out_size
from ..ops.pool import pool_geometry
from .conv import offset_slice
from .registry import kernel


def _pool_setup(x, attrs):
    """(ksize, strides, pads, out). The padding after each dim is what the windows reach, so a
    ceil_mode window past the declared padding still fits."""
    nd = x.ndim - 2
    ksize, strides, pads = pool_geometry(attrs, x.shape[2:])
    out, fit = [], []
    for i in range(nd):
        size = x.shape[2 + i]
        o = pool_out_size(size, ksize[i], strides[i], pads[i], attrs.get("ceil_mode", False))
        out.append(o)
        before = pads[i][0]
        fit.append((before, max((o - 1) * strides[i] + ksize[i] - before - size, 0)))
    return ksize, strides, fit, out


def _to_sm(xp, x, pads, fill):
    """[N, C, *sp] -> padded [*sp', N*C]."""
    nd = x.ndim - 2
    flat = x.reshape(x.shape[0] * x.shape[1], -1).T.reshape(*x.shape[2:], -1)
    if not any(p for pair in pads for p in pair):
        return xp.ascontiguousarray(flat)
    out = xp.full([x.shape[2 + i] + sum(pads[i]) for i in range(nd)] + [flat.shape[-1]], fill,
                  dtype=x.dtype)
    out[tuple(slice(pads[i][0], pads[i][0] + x.shape[2 + i]) for i in range(nd))] = flat
    return out


def _from_sm(xp, a, n: int, c: int):
    """[*sp, N*C] -> NC*."""
    sp = a.shape[:-1]
    return xp.ascontiguousarray(a.reshape(-1, n * c).T).reshape(n, c, *sp)


def _tiles(xp, a, ksize, strides, pads, out):
    """a [N, C, *sp] as a strided view [N, C, out0, k0, out1, k1, ...] of its windows, when
    they tile it (no padding; stride == window, or one window per dim); else None."""
    if any(p for pair in pads for p in pair) or any(
            s != k and o != 1 for k, s, o in zip(ksize, strides, out)):
        return None
    shape, st = list(a.shape[:2]), list(a.strides[:2])
    for i, (k, s, o) in enumerate(zip(ksize, strides, out)):
        shape += [o, k]
        st += [a.strides[2 + i] * s, a.strides[2 + i]]
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=st)


def _tile_offsets(view):
    """One [N, C, *out] view per window offset of a _tiles view, in row-major offset order."""
    nd = (view.ndim - 2) // 2
    ksize = view.shape[3::2]
    for off in itertools.product(*[range(k) for k in ksize]):
        idx = [slice(None), slice(None)]
        for i in range(nd):
            idx += [slice(None), off[i]]
        yield tuple(idx)


def _tiled_pool(xp, view, is_max):
    """pool_nd over a _tiles view: the offsets reduced in row-major order, as _window_slices
    would (the same sums, bit for bit)."""
    offsets = list(_tile_offsets(view))
    if is_max and len(offsets) > 1:
        # the first two offsets straight into a new array: a pass less than copying the first
        # (np.maximum makes no NaN of its own, so the operands alone give the bits; the sum
        # keeps the copy: inf + -inf there is a NaN whose sign bit numpy's loops set apart
        # for contiguous and strided operands, tests/unit/test_pool_tiled_bits.py)
        acc = xp.maximum(view[offsets[0]], view[offsets[1]])
        rest = offsets[2:]
    else:
        acc, rest = view[offsets[0]].copy(), offsets[1:]
    for at in rest:
        if is_max:
            xp.maximum(acc, view[at], out=acc)
        else:
            acc += view[at]
    return acc


def _tiled_grad(xp, x, dy, view, is_max, divisor):
    """pool_nd_grad over a _tiles view of x: each window's gradient to its first maximum
    (row-major), or dy / divisor to every pixel of it; zeros outside the windows."""
    covered = all(o * k == size for o, k, size in zip(view.shape[2::2], view.shape[3::2],
                                                    x.shape[2:]))
    dx = (xp.empty if covered else xp.zeros)(x.shape, dtype=dy.dtype)
    dview = _tiles(xp, dx, view.shape[3::2], view.shape[3::2], [(0, 0)] * (x.ndim - 2),
                   view.shape[2::2])
    if not is_max:
        share = dy / divisor
        for at in _tile_offsets(view):
            xp.copyto(dview[at], share)
        return dx
    if xp is np and _planes_grad(x, dy, view, dview):
        return dx
    best = _tiled_pool(xp, view, True)
    offsets = list(_tile_offsets(view))
    taken = xp.equal(view[offsets[0]], best)
    xp.multiply(dy, taken, out=dview[offsets[0]])
    hit = xp.empty_like(taken)  # one mask buffer for all the other offsets
    for i, at in enumerate(offsets[1:], 2):
        xp.equal(view[at], best, out=hit)
        xp.greater(hit, taken, out=hit)  # hit and not taken before
        if i < len(offsets):
            taken |= hit
        xp.multiply(dy, hit, out=dview[at])
    return dx


def _planes_grad(x, dy, view, dview) -> bool:
    """_tiled_grad's max-pool gradient into dview, with the window pixels first copied apart
    into one contiguous [N, C, *out] plane per offset and the gradient planes copied back,
    each by conv_dnnl.strided_copy (oneDNN's reorder): numpy's ufuncs over the interleaved
    views run element by element, over the planes vectorised. The same masks (equality with
    the window maximum, the first hit in row-major order) and the same products, so the same
    bits. False, nothing written, where oneDNN does not take the copy."""
    from . import conv_dnnl

    planes = _window_planes(view)
    if planes is None:
        return False
    flat = planes.reshape(-1, *dy.shape)
    best = _max_of(flat)  # it only meets == below: its sign of zero does not count
    if len(flat) == 1:
        best = best.copy()  # flat[0] turns gradient below
    taken = np.equal(flat[0], best)
    np.multiply(dy, taken, out=flat[0])  # each plane turns gradient once its mask is made
    hit = np.empty_like(taken)
    for i in range(1, len(flat)):
        np.equal(flat[i], best, out=hit)
        np.greater(hit, taken, out=hit)  # hit and not taken before
        if i + 1 < len(flat):
            taken |= hit
        np.multiply(dy, hit, out=flat[i])
    return conv_dnnl.strided_copy(dview.transpose(_planes_order(view)), planes)


def _planes_order(view):
    """The axes of a _tiles view with the window offsets first: [k0, k1, ..., N, C, *out]."""
    nd = (view.ndim - 2) // 2
    return [3 + 2 * i for i in range(nd)] + [0, 1] + [2 + 2 * i for i in range(nd)]


def _window_planes(view):
    """The _tiles view's pixels as contiguous [*k, N, C, *out] planes, one per window offset,
    copied by oneDNN's reorder (conv_dnnl.strided_copy); None where it does not take them."""
    from . import conv_dnnl

    k, out = view.shape[3::2], view.shape[2::2]
    planes = np.empty((*k, *view.shape[:2], *out), dtype=view.dtype)
    return planes if conv_dnnl.strided_copy(planes, view.transpose(_planes_order(view))) \
        else None


def _planes_max(view):
    """_tiled_pool's max over the window planes: the same maxima in the same order over
    contiguous operands (np.maximum picks between equal operands, +0 and -0 or two NaNs, by
    position alone, contiguous or strided: tests/unit/test_pool_tiled_bits.py); None where the
    planes are not made."""
    planes = _window_planes(view)
    if planes is None:
        return None
    return _max_of(planes.reshape(-1, *planes.shape[(view.ndim - 2) // 2:]))


def _max_of(flat):
    """The maximum over [offsets, N, C, *out] planes, taken in offset order (the first plane
    itself when there is one)."""
    if len(flat) == 1:
        return flat[0]
    acc = np.maximum(flat[0], flat[1])
    for p in flat[2:]:
        np.maximum(acc, p, out=acc)
    return acc


def _window_slices(xt, ksize, strides, out):
    """One [*out, M] slice of xt per window offset, in row-major offset order."""
    return [xt[tuple(offset_slice(off[i], strides[i], out[i]) for i in range(len(out)))]
            for off in itertools.product(*[range(k) for k in ksize])]


def _avg_divisor(xp, x, attrs, ksize, strides, pads, out):
    """Per output pixel ([*out, 1]), what its window sum is divided by: the in-image pixels
    the window covers (exclusive=True) or the whole window."""
    if not attrs["exclusive"]:
        return x.dtype.type(math.prod(ksize))
    count = xp.ones([1] * len(out) + [1], dtype=x.dtype)
    for i in range(len(out)):
        start = xp.arange(out[i]) * strides[i] - pads[i][0]
        c = xp.minimum(start + ksize[i], x.shape[2 + i]) - xp.maximum(start, 0)
        count = count * c.reshape([-1 if j == i else 1 for j in range(len(out))] + [1])
    # a window lying wholly in the padding averages to 0 instead of 0/0
    return xp.maximum(count, 1).astype(x.dtype)


def adaptive_windows(in_sp, out_sp):
    """Per output cell (index tuple), the slices of its adaptive window."""
    ranges = [[slice(i * s // o, -(-(i + 1) * s // o)) for i in range(o)]
              for s, o in zip(in_sp, out_sp)]
    return zip(itertools.product(*[range(o) for o in out_sp]), itertools.product(*ranges))


def _first_max_mask(xp, win, axis_size):
    """One-hot [M, axis_size] of the first maximum along the last axis of win [M, axis_size]."""
    arg = win.argmax(axis=1)
    hot = xp.zeros(win.shape, dtype=bool)
    hot[xp.arange(win.shape[0]), arg] = True
    return hot, arg


def _adaptive(xp, x, attrs, is_max, dy=None):
    """Forward (dy None: (out, flat argmax index per cell)) or backward (dx) of adaptive or
    global pooling, one cell at a time."""
    n, c, sp = x.shape[0], x.shape[1], x.shape[2:]
    out_sp = [1] * len(sp) if attrs["global_pooling"] else list(attrs["ksize"])
    y = xp.zeros((n, c, *out_sp), dtype=x.dtype)
    idx = xp.zeros((n, c, *out_sp), dtype="int32")
    dx = xp.zeros(x.shape, dtype=x.dtype) if dy is not None else None
    plane = xp.arange(math.prod(sp)).reshape(sp)
    for cell, win in adaptive_windows(sp, out_sp):
        block = x[(slice(None), slice(None), *win)].reshape(n * c, -1)
        at = (slice(None), slice(None), *cell)
        if is_max:
            hot, arg = _first_max_mask(xp, block, block.shape[1])
            if dy is None:
                y[at] = block.max(axis=1).reshape(n, c)
                idx[at] = plane[win].reshape(-1)[arg].reshape(n, c)
            else:
                grad = hot * dy[at].reshape(-1, 1)
                dx[(slice(None), slice(None), *win)] += grad.reshape(n, c, *plane[win].shape)
        elif dy is None:
            y[at] = block.mean(axis=1).reshape(n, c)
        else:
            share = dy[at].reshape(n, c, *[1] * len(sp)) / block.shape[1]
            dx[(slice(None), slice(None), *win)] += share
    return (y, idx) if dy is None else dx


def _use_cells(attrs) -> bool:
    return bool(attrs["adaptive"] or attrs["global_pooling"])


@kernel("pool2d", "pool3d")
def pool_nd(xp, ins, attrs, want):
    x = ins["X"]
    n, c = x.shape[:2]
    is_max = attrs["pooling_type"] == "max"
    if _use_cells(attrs):
        return {"Out": _adaptive(xp, x, attrs, is_max)[0]}
    ksize, strides, pads, out = _pool_setup(x, attrs)
    view = _tiles(xp, x, ksize, strides, pads, out)
    if view is not None:
        acc = _planes_max(view) if is_max and xp is np else None
        if acc is None:
            acc = _tiled_pool(xp, view, is_max)
        if is_max:
            xp.maximum(acc, np.finfo(acc.dtype).min, out=acc)
        else:
            acc /= x.dtype.type(math.prod(ksize))
        return {"Out": acc}
    xt = _to_sm(xp, x, pads, -xp.inf if is_max else 0)
    slices = _window_slices(xt, ksize, strides, out)
    acc = slices[0].copy()
    for s in slices[1:]:
        if is_max:
            xp.maximum(acc, s, out=acc)
        else:
            acc += s
    if is_max:
        # fluid starts each max at the lowest finite value: a window wholly in the padding
        # (ceil_mode) or over -inf only gives that, not -inf
        xp.maximum(acc, np.finfo(acc.dtype).min, out=acc)
    else:
        acc /= _avg_divisor(xp, x, attrs, ksize, strides, pads, out)
    return {"Out": _from_sm(xp, acc, n, c)}


def _fixed_grad(xp, x, dy, attrs, is_max):
    n, c, sp = x.shape[0], x.shape[1], x.shape[2:]
    ksize, strides, pads, out = _pool_setup(x, attrs)
    view = _tiles(xp, x, ksize, strides, pads, out)
    if view is not None:
        return _tiled_grad(xp, x, dy, view, is_max, x.dtype.type(math.prod(ksize)))
    dyt = dy.reshape(n * c, -1).T.reshape(*out, n * c)
    xt = _to_sm(xp, x, pads, -xp.inf if is_max else 0)
    dxt = xp.zeros(xt.shape, dtype=dy.dtype)
    dxt_slices = _window_slices(dxt, ksize, strides, out)
    if is_max:
        slices = _window_slices(xt, ksize, strides, out)
        best = slices[0].copy()
        for s in slices[1:]:
            xp.maximum(best, s, out=best)
        taken = xp.zeros(best.shape, dtype=bool)
        for s, d in zip(slices, dxt_slices):
            hit = s == best
            hit &= ~taken
            taken |= hit
            d += dyt * hit
    else:
        share = dyt / _avg_divisor(xp, x, attrs, ksize, strides, pads, out)
        for d in dxt_slices:
            d += share
    crop = tuple(slice(pads[i][0], pads[i][0] + sp[i]) for i in range(len(sp)))
    return _from_sm(xp, dxt[crop], n, c)


@kernel("pool2d_grad", "pool3d_grad")
def pool_nd_grad(xp, ins, attrs, want):
    x, dy = ins["X"], ins["Out@GRAD"]
    is_max = attrs["pooling_type"] == "max"
    if _use_cells(attrs):
        return {"X@GRAD": _adaptive(xp, x, attrs, is_max, dy)}
    return {"X@GRAD": _fixed_grad(xp, x, dy, attrs, is_max)}


def _index_attrs(attrs) -> dict:
    """max_pool*_with_index reads its attributes as a max pool2d/pool3d would."""
    return {**attrs, "pooling_type": "max", "ceil_mode": False, "exclusive": True,
            "padding_algorithm": "EXPLICIT"}


@kernel("max_pool2d_with_index", "max_pool3d_with_index")
def max_pool_with_index(xp, ins, attrs, want):
    x = ins["X"]
    attrs = _index_attrs(attrs)
    if _use_cells(attrs):
        y, idx = _adaptive(xp, x, attrs, True)
        return {"Out": y, "Mask": idx}
    n, c, sp = x.shape[0], x.shape[1], x.shape[2:]
    ksize, strides, pads, out = _pool_setup(x, attrs)
    y = pool_nd(xp, ins, attrs, want)["Out"]
    # the in-image flat index of each window's first maximum
    plane = xp.full([sp[i] + sum(pads[i]) for i in range(len(sp))], -1, dtype="int64")
    plane[tuple(slice(p[0], p[0] + s) for p, s in zip(pads, sp))] = xp.arange(
        math.prod(sp)).reshape(sp)
    xt = _to_sm(xp, x, pads, -xp.inf)
    idx = xp.full((*out, n * c), -1, dtype="int64")
    yt = y.reshape(n * c, -1).T.reshape(*out, n * c)
    for s, p in zip(_window_slices(xt, ksize, strides, out),
                    _window_slices(plane[..., None], ksize, strides, out)):
        hit = (s == yt) & (idx < 0)
        idx = xp.where(hit, p, idx)
    return {"Out": y, "Mask": _from_sm(xp, idx, n, c).astype("int32")}


@kernel("max_pool2d_with_index_grad", "max_pool3d_with_index_grad")
def max_pool_with_index_grad(xp, ins, attrs, want):
    x, mask, dy = ins["X"], ins["Mask"], ins["Out@GRAD"]
    n, c = x.shape[:2]
    plane = math.prod(x.shape[2:])
    # windows may overlap: bincount sums every cell's gradient into its argmax pixel
    rows = xp.repeat(xp.arange(n * c), math.prod(dy.shape[2:]))
    flat = rows * plane + mask.reshape(-1).astype(rows.dtype)
    dx = xp.bincount(flat, weights=dy.reshape(-1), minlength=n * c * plane)
    return {"X@GRAD": dx.astype(dy.dtype).reshape(x.shape)}
