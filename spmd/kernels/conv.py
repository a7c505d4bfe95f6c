"""Kernels: 2-D/3-D convolutions and their transposes on channel-first inputs, by im2col over
stride tricks.

2-D convolutions and transposes run in conv_gemm.py (a layout chosen per shape, columns made a
cache-sized chunk of images at a time, workspaces reused across steps); the code below is the
N-d path that 3-D convolutions take.

Each kernel first moves the batch innermost ([C, *spatial, N]), so that a window offset selects
long contiguous runs rather than a few pixels. A convolution is then one batched matmul (one
batch entry per group) against a strided view of the input laid out as columns; its backward is
the two transposed matmuls plus col2im, which accumulates the shifted slices, one per kernel
offset. A transposed convolution is the adjoint: its forward is the conv's input gradient and
its input gradient is a conv. Python loops run over kernel offsets only, never over pixels.

The padding arithmetic is spmd/ops/conv.py's, shared with shape inference, so the shapes the
op declares are the shapes these kernels produce. Pooling kernels are in pool.py.
"""
from __future__ import annotations

import itertools
import math

from ..ops.conv import conv_geometry, conv_out_size, transpose_output_shape
from . import conv_gemm
from .registry import kernel


def offset_slice(start: int, step: int, count: int) -> slice:
    """The `count` positions start, start + step, ... of one window offset."""
    return slice(start, start + step * (count - 1) + 1, step)


def channel_first_batch_last(xp, x, pads=None, size=None, fill=0):
    """[N, C, *sp] -> contiguous [C, *sp', N], spatial dim i padded by pads[i] = (before,
    after) with `fill`, or placed at offset pads[i][0] in a buffer of spatial `size`."""
    nd = x.ndim - 2
    xt = x.transpose(1, *range(2, nd + 2), 0)
    if pads is None or (size is None and not any(p for pair in pads for p in pair)):
        return xp.ascontiguousarray(xt)
    sp = x.shape[2:]
    if size is None:
        size = [sp[i] + pads[i][0] + pads[i][1] for i in range(nd)]
    out = xp.full((x.shape[1], *size, x.shape[0]), fill, dtype=x.dtype)
    out[(slice(None), *[slice(pads[i][0], pads[i][0] + sp[i]) for i in range(nd)])] = xt
    return out


def batch_first(xp, a):
    """[C, *sp, N] -> contiguous [N, C, *sp]."""
    return xp.ascontiguousarray(a.transpose(a.ndim - 1, *range(a.ndim - 1)))


def im2col(xp, xt, groups: int, k, strides, dil, out):
    """Columns [G, Cg*prod(k), prod(out)*N] of xt ([C, *sp, N], already padded): column
    (pixel, n) of group g holds the receptive field of that output pixel of image n."""
    nd = len(k)
    c, n = xt.shape[0], xt.shape[-1]
    cg = c // groups
    st = xt.strides
    win = xp.lib.stride_tricks.as_strided(
        xt, shape=(groups, cg, *k, *out, n),
        strides=(st[0] * cg, st[0], *[st[1 + i] * dil[i] for i in range(nd)],
                 *[st[1 + i] * strides[i] for i in range(nd)], st[-1]))
    return win.reshape(groups, cg * math.prod(k), math.prod(out) * n)  # one copy


def col2im(xp, dcols, size, strides, dil):
    """Adjoint of im2col: dcols [G, Cg, *k, *out, N] summed back into a [C, *size, N] buffer."""
    g, cg, n = dcols.shape[0], dcols.shape[1], dcols.shape[-1]
    nd = (dcols.ndim - 3) // 2
    k, out = dcols.shape[2:2 + nd], dcols.shape[2 + nd:2 + 2 * nd]
    buf = xp.zeros((g, cg, *size, n), dtype=dcols.dtype)
    for off in itertools.product(*[range(ki) for ki in k]):
        where = tuple(offset_slice(off[i] * dil[i], strides[i], out[i]) for i in range(nd))
        buf[(slice(None), slice(None), *where)] += dcols[(slice(None), slice(None), *off)]
    return buf.reshape(g * cg, *size, n)


def conv_setup(x, w, attrs):
    """(pads per dim, dilations, output spatial size) for this input and filter. The padding
    after each dim is what the last window reaches (zeros), as fluid's im2col reads zeros
    there when a kernel is larger than the padded input."""
    k, strides = w.shape[2:], attrs["strides"]
    pads, dil = conv_geometry(attrs, x.shape[2:], k)
    out = tuple(conv_out_size(x.shape[2 + i], k[i], strides[i], pads[i], dil[i])
                for i in range(len(k)))
    reach = [(out[i] - 1) * strides[i] + dil[i] * (k[i] - 1) + 1 for i in range(len(k))]
    pads = [(p[0], max(p[1], reach[i] - p[0] - x.shape[2 + i])) for i, p in enumerate(pads)]
    return pads, dil, out


def _geometry_2d(x, w, attrs):
    """conv_gemm's Geometry of a 2-D convolution, or None where the N-d path below is faster:
    many groups on small maps (depthwise convolutions late in a network), where one product
    per group over the whole batch beats conv_gemm's per-image products."""
    if x.ndim != 4:
        return None
    pads, dil, out = conv_setup(x, w, attrs)
    geo = conv_gemm.geometry(x.shape, w.shape, attrs["groups"], attrs["strides"], dil, pads,
                             out)
    return geo if conv_gemm.per_image_ok(geo) else None


@kernel("conv2d", "depthwise_conv2d", "conv3d")
def conv_nd(xp, ins, attrs, want):
    x, w = ins["Input"], ins["Filter"]
    geo = _geometry_2d(x, w, attrs)
    if geo is not None:
        return {"Output": conv_gemm.forward(xp, x, w, geo)}
    n, m, g = x.shape[0], w.shape[0], attrs["groups"]
    pads, dil, out = conv_setup(x, w, attrs)
    cols = im2col(xp, channel_first_batch_last(xp, x, pads), g, w.shape[2:], attrs["strides"],
                  dil, out)
    y = xp.matmul(w.reshape(g, m // g, -1), cols)  # [G, M/G, prod(out)*N] = [M, *out, N]
    return {"Output": batch_first(xp, y.reshape(m, *out, n))}


@kernel("conv2d_grad", "depthwise_conv2d_grad", "conv3d_grad")
def conv_nd_grad(xp, ins, attrs, want):
    x, w, dy = ins["Input"], ins["Filter"], ins["Output@GRAD"]
    geo = _geometry_2d(x, w, attrs)
    if geo is not None:
        res = {}
        if "Filter@GRAD" in want:
            res["Filter@GRAD"] = conv_gemm.filter_grad(xp, x, dy, geo)
        if "Input@GRAD" in want:
            res["Input@GRAD"] = conv_gemm.input_grad(xp, dy, w, geo)
        return res
    n, m, cg, k, g = x.shape[0], w.shape[0], w.shape[1], w.shape[2:], attrs["groups"]
    nd = len(k)
    pads, dil, out = conv_setup(x, w, attrs)
    dy_t = channel_first_batch_last(xp, dy).reshape(g, m // g, -1)
    res = {}
    if "Filter@GRAD" in want:
        cols = im2col(xp, channel_first_batch_last(xp, x, pads), g, k, attrs["strides"], dil,
                      out)
        res["Filter@GRAD"] = xp.matmul(dy_t, cols.transpose(0, 2, 1)).reshape(w.shape)
    if "Input@GRAD" in want:
        dcols = xp.matmul(w.reshape(g, m // g, -1).transpose(0, 2, 1), dy_t)
        sp = x.shape[2:]
        size = [sp[i] + pads[i][0] + pads[i][1] for i in range(nd)]
        buf = col2im(xp, dcols.reshape(g, cg, *k, *out, n), size, attrs["strides"], dil)
        crop = tuple(slice(pads[i][0], pads[i][0] + sp[i]) for i in range(nd))
        res["Input@GRAD"] = batch_first(xp, buf[(slice(None), *crop)])
    return res


def _transpose_setup(x, w, attrs):
    """(pads, dilations, output spatial size, full buffer size). The transposed conv scatters
    input pixel i to buffer positions i*stride + j*dilation; the output is the buffer from
    pads_before on (output_size may reach past the scattered extent: zeros there)."""
    sp, k = x.shape[2:], w.shape[2:]
    pads, dil = conv_geometry(attrs, sp, k)
    out = transpose_output_shape(attrs, sp, k)
    size = [max((sp[i] - 1) * attrs["strides"][i] + dil[i] * (k[i] - 1) + 1, pads[i][0] + out[i])
            for i in range(len(k))]
    return pads, dil, out, size


def _transpose_geometry_2d(x, w, attrs):
    """The 2-D convolution whose input gradient is this transposed convolution: its input is
    the transpose's output (padded to the scatter buffer), its output the transpose's input;
    None as in _geometry_2d."""
    if x.ndim != 4:
        return None
    pads, dil, out, size = _transpose_setup(x, w, attrs)
    n, c, mg = x.shape[0], w.shape[0], w.shape[1]
    g = attrs["groups"]
    bottom = [size[i] - pads[i][0] - out[i] for i in range(2)]
    geo = conv_gemm.Geometry(n, mg * g, out[0], out[1], c, w.shape[2], w.shape[3], g,
                             tuple(attrs["strides"]), tuple(dil),
                             (pads[0][0], bottom[0], pads[1][0], bottom[1]), x.shape[2],
                             x.shape[3])
    return geo if conv_gemm.per_image_ok(geo) else None


@kernel("conv2d_transpose", "depthwise_conv2d_transpose", "conv3d_transpose")
def conv_transpose_nd(xp, ins, attrs, want):
    x, w = ins["Input"], ins["Filter"]
    geo = _transpose_geometry_2d(x, w, attrs)
    if geo is not None:
        return {"Output": conv_gemm.input_grad(xp, x, w, geo)}
    n, c, mg, k, g = x.shape[0], w.shape[0], w.shape[1], w.shape[2:], attrs["groups"]
    pads, dil, out, size = _transpose_setup(x, w, attrs)
    xt = channel_first_batch_last(xp, x).reshape(g, c // g, -1)
    cols = xp.matmul(w.reshape(g, c // g, -1).transpose(0, 2, 1), xt)
    buf = col2im(xp, cols.reshape(g, mg, *k, *x.shape[2:], n), size, attrs["strides"], dil)
    crop = tuple(slice(pads[i][0], pads[i][0] + out[i]) for i in range(len(k)))
    return {"Output": batch_first(xp, buf[(slice(None), *crop)])}


@kernel("conv2d_transpose_grad", "depthwise_conv2d_transpose_grad", "conv3d_transpose_grad")
def conv_transpose_nd_grad(xp, ins, attrs, want):
    x, w, dy = ins["Input"], ins["Filter"], ins["Output@GRAD"]
    geo = _transpose_geometry_2d(x, w, attrs)
    if geo is not None:
        res = {}
        if "Input@GRAD" in want:
            res["Input@GRAD"] = conv_gemm.forward(xp, dy, w, geo)
        if "Filter@GRAD" in want:
            res["Filter@GRAD"] = conv_gemm.filter_grad(xp, dy, x, geo)
        return res
    n, c, k, g = x.shape[0], w.shape[0], w.shape[2:], attrs["groups"]
    pads, dil, out, size = _transpose_setup(x, w, attrs)
    # the output gradient placed back in the scatter buffer, read by windows like a conv input
    dyt = channel_first_batch_last(xp, dy, [(p[0], 0) for p in pads], size)
    cols = im2col(xp, dyt, g, k, attrs["strides"], dil, x.shape[2:])  # [G, Mg*prod(k), P*N]
    res = {}
    if "Input@GRAD" in want:
        dx = xp.matmul(w.reshape(g, c // g, -1), cols)
        res["Input@GRAD"] = batch_first(xp, dx.reshape(c, *x.shape[2:], n))
    if "Filter@GRAD" in want:
        xt = channel_first_batch_last(xp, x).reshape(g, c // g, -1)
        res["Filter@GRAD"] = xp.matmul(xt, cols.transpose(0, 2, 1)).reshape(w.shape)
    return res
