"""Kernels: interpolation, pixel_shuffle, space_to_depth, shuffle_channel, temporal_shift and
unfold, each a weighted gather.

Every op here is linear in X: output element o is sum_t w_t[o] * X.flat[idx_t[o]] (idx -1 reads
zero: padding, a shifted-out frame). A plan (out shape, [(idx, w)]) is built from the shapes and
attributes; the forward gathers, the gradient scatters the same terms back with bincount, which
sums the contributions of every output element reading one input element.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..ops.vision import interp_out_size
from .registry import kernel

_PLANS = {}


def _plan(*types):
    def register(fn):
        for t in types:
            _PLANS[t] = fn
        return fn
    return register


def _gather(xp, x, terms, out_shape):
    flat = x.reshape(-1)
    y = xp.zeros(math.prod(out_shape), dtype=x.dtype)
    for idx, w in terms:
        w = xp.broadcast_to(xp.asarray(w, dtype=x.dtype), idx.shape).reshape(-1)
        idx = idx.reshape(-1)
        y += flat[xp.maximum(idx, 0)] * xp.where(idx >= 0, w, 0)
    return y.reshape(out_shape)


def _scatter(xp, x_shape, dy, terms):
    size = math.prod(x_shape)
    dx = xp.zeros(size, dtype=dy.dtype)
    g = dy.reshape(-1)
    for idx, w in terms:
        w = xp.broadcast_to(xp.asarray(w, dtype=dy.dtype), idx.shape).reshape(-1)
        idx = idx.reshape(-1)
        keep = idx >= 0
        dx += xp.bincount(idx[keep], weights=(g * w)[keep], minlength=size).astype(dy.dtype)
    return dx.reshape(x_shape)


# ---------------------------------------------------------------------------------------------
# interpolation


def _runtime_out_size(ins, attrs, in_sp):
    """fluid's precedence: SizeTensor, then OutSize, then the Scale tensor or attribute, then
    out_d/out_h/out_w."""
    if ins.get("SizeTensor"):
        return [int(t.reshape(-1).tolist()[0]) for t in ins["SizeTensor"]]  # host or device
    if ins.get("OutSize") is not None:
        return [int(v) for v in ins["OutSize"].reshape(-1).tolist()]
    if ins.get("Scale") is not None:
        scale = float(ins["Scale"].reshape(-1).tolist()[0])
        if scale > 0:
            return [int(s * scale) for s in in_sp]
    return interp_out_size(attrs, in_sp)


def _axis_terms(method, size, out, align_corners, align_mode):
    """Per output position along one axis: [(source index, weight)], fluid's rules."""
    if align_corners:
        ratio = (size - 1) / (out - 1) if out > 1 else 0.0
    else:
        ratio = size / out if out > 1 else 0.0
    k = np.arange(out)
    if method == "nearest":
        src = (ratio * k + 0.5).astype(np.int64) if align_corners else (ratio * k).astype(
            np.int64)
        return [(np.minimum(src, size - 1), np.ones(out))]
    half = align_mode == 0 and not align_corners
    real = np.maximum(ratio * (k + 0.5) - 0.5, 0) if half else ratio * k
    lo = np.maximum(real.astype(np.int64), 0)
    hi = np.minimum(lo + 1, size - 1)
    frac = real - lo
    return [(lo, 1.0 - frac), (hi, frac)]


@_plan("bilinear_interp", "nearest_interp", "trilinear_interp")
def _interp_plan(xp, shape, attrs, ins, op_type):
    n, c, sp = shape[0], shape[1], shape[2:]
    out = _runtime_out_size(ins, attrs, sp)
    method = "nearest" if op_type == "nearest_interp" else "linear"
    axes = [_axis_terms(method, sp[i], out[i], attrs["align_corners"], attrs["align_mode"])
            for i in range(len(sp))]
    base = (np.arange(n * c) * math.prod(sp)).reshape(-1, *[1] * len(sp))
    strides = [math.prod(sp[i + 1:]) for i in range(len(sp))]
    terms = []
    for combo in itertools.product(*axes):
        idx, w = base, np.ones(1)
        for i, (src, wt) in enumerate(combo):
            view = [-1 if j == i else 1 for j in range(len(sp))]
            idx = idx + (src * strides[i]).reshape(view)
            w = w * wt.reshape(view)
        terms.append((xp.asarray(idx), xp.asarray(w)))
    return (n, c, *out), terms


# ---------------------------------------------------------------------------------------------
# permutations


def _perm_terms(xp, shape, src):
    """One term reading X.flat[src] (src: an int array of the output's shape)."""
    return [(xp.asarray(src), 1.0)]


@_plan("pixel_shuffle")
def _pixel_shuffle_plan(xp, shape, attrs, ins, op_type):
    n, c, h, w = shape
    r = attrs["upscale_factor"]
    src = np.arange(math.prod(shape)).reshape(n, c // (r * r), r, r, h, w)
    src = src.transpose(0, 1, 4, 2, 5, 3).reshape(n, c // (r * r), h * r, w * r)
    return src.shape, _perm_terms(xp, shape, src)


@_plan("shuffle_channel")
def _shuffle_channel_plan(xp, shape, attrs, ins, op_type):
    n, c, h, w = shape
    g = attrs["group"]
    src = np.arange(math.prod(shape)).reshape(n, g, c // g, h, w).transpose(0, 2, 1, 3, 4)
    return shape, _perm_terms(xp, shape, src.reshape(shape))


@_plan("space_to_depth")
def _space_to_depth_plan(xp, shape, attrs, ins, op_type):
    """fluid's (darknet reorg) order: input element (b, k, j, i) lands at flat position
    w2 + W*bs*(h2 + H*bs*(c2 + C/bs^2*b)), c2 = k mod C/bs^2, block offset k div C/bs^2."""
    n, c, h, w = shape
    bs = attrs["blocksize"]
    oc = c // (bs * bs)
    b, k, j, i = np.meshgrid(np.arange(n), np.arange(c), np.arange(h), np.arange(w),
                             indexing="ij")
    c2, off = k % oc, k // oc
    dest = (i * bs + off % bs) + w * bs * ((j * bs + off // bs) + h * bs * (c2 + oc * b))
    src = np.empty(math.prod(shape), np.int64)
    src[dest.reshape(-1)] = np.arange(math.prod(shape))
    out = (n, c * bs * bs, h // bs, w // bs)
    return out, _perm_terms(xp, shape, src.reshape(out))


@_plan("temporal_shift")
def _temporal_shift_plan(xp, shape, attrs, ins, op_type):
    """Frames of each segment of seg_num: the first C*ratio channels read the previous frame,
    the next C*ratio the next frame, the rest their own; past the segment's ends reads zero."""
    nt, c, h, w = shape
    t = attrs["seg_num"]
    c1 = int(c * attrs["shift_ratio"])
    c2 = int(c * 2 * attrs["shift_ratio"])
    src = np.arange(math.prod(shape)).reshape(nt // t, t, c, h, w)
    shift = np.zeros(c, np.int64)
    shift[:c1], shift[c1:c2] = -1, 1
    frame = np.arange(t).reshape(1, t, 1, 1, 1) + shift.reshape(1, 1, c, 1, 1)
    moved = src + shift.reshape(1, 1, c, 1, 1) * c * h * w
    src = np.where((frame >= 0) & (frame < t), moved, -1)
    return shape, _perm_terms(xp, shape, src.reshape(shape))


@_plan("unfold")
def _unfold_plan(xp, shape, attrs, ins, op_type):
    n, c, h, w = shape
    (kh, kw), (sh, sw) = attrs["kernel_sizes"], attrs["strides"]
    pt, pl, pb, pr = attrs["paddings"]
    dh, dw = attrs["dilations"]
    oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    bi, ci, i, j, y, x = np.meshgrid(np.arange(n), np.arange(c), np.arange(kh), np.arange(kw),
                                     np.arange(oh), np.arange(ow), indexing="ij")
    row, col = y * sh + i * dh - pt, x * sw + j * dw - pl
    inside = (row >= 0) & (row < h) & (col >= 0) & (col < w)
    src = np.where(inside, ((bi * c + ci) * h + row) * w + col, -1)
    out = (n, c * kh * kw, oh * ow)
    return out, _perm_terms(xp, shape, src.reshape(out))


_OUT_SLOT = {"unfold": "Y"}


def _channel_first(xp, a, attrs, to_first: bool):
    """Interpolation takes NHWC (data_layout); the plans index channel-first arrays."""
    if attrs.get("data_layout") != "NHWC":
        return a
    return xp.moveaxis(a, -1, 1) if to_first else xp.ascontiguousarray(xp.moveaxis(a, 1, -1))


def _register(op_type):
    slot = _OUT_SLOT.get(op_type, "Out")

    def forward(xp, ins, attrs, want):
        x = xp.ascontiguousarray(_channel_first(xp, ins["X"], attrs, True))
        out_shape, terms = _PLANS[op_type](xp, x.shape, attrs, ins, op_type)
        return {slot: _channel_first(xp, _gather(xp, x, terms, out_shape), attrs, False)}

    def backward(xp, ins, attrs, want):
        x = _channel_first(xp, ins["X"], attrs, True)
        dy = xp.ascontiguousarray(_channel_first(xp, ins[slot + "@GRAD"], attrs, True))
        _, terms = _PLANS[op_type](xp, x.shape, attrs, ins, op_type)
        return {"X@GRAD": _channel_first(xp, _scatter(xp, x.shape, dy, terms), attrs, False)}

    kernel(op_type)(forward)
    kernel(op_type + "_grad")(backward)


for _op in list(_PLANS):
    _register(_op)
