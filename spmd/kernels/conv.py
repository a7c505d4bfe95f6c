"""Kernels: conv2d / depthwise_conv2d and pool2d on NCHW, by im2col over stride tricks.

Each kernel first moves the batch innermost (conv: [C, H, W, N]; pool: [H, W, N*C]), so that a
window offset selects long contiguous runs rather than a few pixels: a row of an 8x8 digit is 8
values, the same row across a batch is 8*N. A convolution is then one batched matmul (one batch
entry per group) against a strided view of the input laid out as columns; its backward is the two
transposed matmuls plus col2im, which accumulates the kh*kw shifted slices. Pooling reduces over
the kh*kw shifted slices. Python loops run over kernel offsets only, never over pixels.

The padding arithmetic is spmd/ops/conv.py's, shared with shape inference, so the shapes the
op declares are the shapes these kernels produce.
"""
from __future__ import annotations

from ..ops.conv import conv_geometry, conv_out_size, pool_geometry
from .registry import kernel


def _padded(xp, a, pads, fill):
    """A contiguous copy of `a` ([lead, H, W, tail]) with H and W padded by
    pads = ((top, bottom), (left, right)), the border set to `fill`."""
    (pt, pb), (pl, pr) = pads
    if not (pt or pb or pl or pr):
        return xp.ascontiguousarray(a)
    lead, h, w, tail = a.shape
    out = xp.full((lead, h + pt + pb, w + pl + pr, tail), fill, dtype=a.dtype)
    out[:, pt:pt + h, pl:pl + w] = a
    return out


def _offset(start: int, step: int, count: int) -> slice:
    """The `count` positions start, start + step, ... of one window offset."""
    return slice(start, start + step * (count - 1) + 1, step)


# ---------------------------------------------------------------------------------------------
# convolution


def _conv_setup(x, w, attrs):
    """(pads per dim, dilations, output (OH, OW)) for this input and filter."""
    k, strides = w.shape[2:], attrs["strides"]
    pads, dil = conv_geometry(attrs, x.shape[2:], k)
    out = tuple(conv_out_size(x.shape[2 + i], k[i], strides[i], pads[i], dil[i])
                for i in range(2))
    return pads, dil, out


def _im2col(xp, x, w_shape, attrs, pads, dil, out):
    """Columns [G, Cg*kh*kw, OH*OW*N]: column (y, x, n) of group g holds the receptive field
    of output pixel (y, x) of image n over that group's input channels."""
    n = x.shape[0]
    _, cg, kh, kw = w_shape
    g = attrs["groups"]
    sh, sw = attrs["strides"]
    xt = _padded(xp, x.transpose(1, 2, 3, 0), pads, 0)  # [C, Hp, Wp, N]
    s_c, s_h, s_w, s_n = xt.strides
    # [g, c, i, j, y, x, n] = xt[g*cg + c, y*sh + i*dh, x*sw + j*dw, n]
    win = xp.lib.stride_tricks.as_strided(
        xt, shape=(g, cg, kh, kw, out[0], out[1], n),
        strides=(s_c * cg, s_c, s_h * dil[0], s_w * dil[1], s_h * sh, s_w * sw, s_n))
    return win.reshape(g, cg * kh * kw, out[0] * out[1] * n)  # the one copy of the forward


@kernel("conv2d", "depthwise_conv2d")
def conv2d(xp, ins, attrs, want):
    x, w = ins["Input"], ins["Filter"]
    n, m, g = x.shape[0], w.shape[0], attrs["groups"]
    pads, dil, (oh, ow) = _conv_setup(x, w, attrs)
    cols = _im2col(xp, x, w.shape, attrs, pads, dil, (oh, ow))
    y = xp.matmul(w.reshape(g, m // g, -1), cols)  # [G, M/G, OH*OW*N] = [M, OH, OW, N]
    return {"Output": xp.ascontiguousarray(y.reshape(m, oh, ow, n).transpose(3, 0, 1, 2))}


def _col2im(xp, dcols, x_shape, attrs, pads, dil):
    """Adjoint of _im2col: each column entry is added back onto the input pixel it was read
    from; returns NCHW."""
    g, cg, kh, kw, oh, ow, n = dcols.shape
    (pt, pb), (pl, pr) = pads
    h, w = x_shape[2:]
    sh, sw = attrs["strides"]
    dxt = xp.zeros((g, cg, h + pt + pb, w + pl + pr, n), dtype=dcols.dtype)
    for i in range(kh):
        rows = _offset(i * dil[0], sh, oh)
        for j in range(kw):
            dxt[:, :, rows, _offset(j * dil[1], sw, ow)] += dcols[:, :, i, j]
    dx = dxt[:, :, pt:pt + h, pl:pl + w].reshape(g * cg, h, w, n).transpose(3, 0, 1, 2)
    return xp.ascontiguousarray(dx)


@kernel("conv2d_grad", "depthwise_conv2d_grad")
def conv2d_grad(xp, ins, attrs, want):
    x, w, dy = ins["Input"], ins["Filter"], ins["Output@GRAD"]
    n, (m, cg, kh, kw), g = x.shape[0], w.shape, attrs["groups"]
    pads, dil, (oh, ow) = _conv_setup(x, w, attrs)
    dy_t = xp.ascontiguousarray(dy.transpose(1, 2, 3, 0)).reshape(g, m // g, oh * ow * n)
    res = {}
    if "Filter@GRAD" in want:
        cols = _im2col(xp, x, w.shape, attrs, pads, dil, (oh, ow))
        res["Filter@GRAD"] = xp.matmul(dy_t, cols.transpose(0, 2, 1)).reshape(w.shape)
    if "Input@GRAD" in want:
        dcols = xp.matmul(w.reshape(g, m // g, -1).transpose(0, 2, 1), dy_t)
        res["Input@GRAD"] = _col2im(xp, dcols.reshape(g, cg, kh, kw, oh, ow, n), x.shape,
                                    attrs, pads, dil)
    return res


# ---------------------------------------------------------------------------------------------
# pooling


def _pool_setup(x, attrs):
    """(ksize, strides, pads, out). The padding after each dim is what the windows reach, so a
    ceil_mode window past the declared padding still fits; padding never counts as a value
    (fluid clips each window to the image)."""
    ksize, strides, pads = pool_geometry(attrs, x.shape[2:])
    out, fit = [], []
    for i in range(2):
        size = x.shape[2 + i]
        extra = strides[i] - 1 if attrs["ceil_mode"] else 0
        o = (size - ksize[i] + sum(pads[i]) + extra) // strides[i] + 1
        out.append(o)
        before = pads[i][0]
        fit.append((before, max((o - 1) * strides[i] + ksize[i] - before - size, 0)))
    return ksize, strides, fit, out


def _to_hwm(xp, x, pads, fill):
    """NCHW -> padded [Hp, Wp, N*C]."""
    n, c, h, w = x.shape
    return _padded(xp, x.reshape(1, n * c, h, w).transpose(0, 2, 3, 1), pads, fill)[0]


def _from_hwm(xp, a, n: int, c: int):
    """[H, W, N*C] -> NCHW."""
    h, w = a.shape[:2]
    return xp.ascontiguousarray(a.reshape(h * w, n * c).T).reshape(n, c, h, w)


def _window_slices(xt, ksize, strides, out):
    """The kh*kw slices of xt ([Hp, Wp, M]), one per window offset, each [OH, OW, M], in
    row-major offset order."""
    return [xt[_offset(i, strides[0], out[0]), _offset(j, strides[1], out[1])]
            for i in range(ksize[0]) for j in range(ksize[1])]


def _avg_divisor(xp, x, attrs, ksize, strides, pads, out):
    """Per output pixel ([OH, OW, 1]), what its window sum is divided by: the in-image pixels
    the window covers (exclusive=True) or the whole window."""
    if not attrs["exclusive"]:
        return x.dtype.type(ksize[0] * ksize[1])
    counts = []
    for i in range(2):
        start = xp.arange(out[i]) * strides[i] - pads[i][0]
        counts.append(xp.minimum(start + ksize[i], x.shape[2 + i]) - xp.maximum(start, 0))
    count = counts[0][:, None, None] * counts[1][None, :, None]
    # a window lying wholly in the padding averages to 0 instead of 0/0
    return xp.maximum(count, 1).astype(x.dtype)


def _is_global(x, ksize, pads, out) -> bool:
    return list(out) == [1, 1] and list(ksize) == list(x.shape[2:]) and pads == [(0, 0)] * 2


@kernel("pool2d")
def pool2d(xp, ins, attrs, want):
    x = ins["X"]
    n, c = x.shape[:2]
    ksize, strides, pads, out = _pool_setup(x, attrs)
    is_max = attrs["pooling_type"] == "max"
    if _is_global(x, ksize, pads, out):  # one reduction instead of H*W slices
        return {"Out": x.max(axis=(2, 3), keepdims=True) if is_max
                else x.mean(axis=(2, 3), keepdims=True)}
    xt = _to_hwm(xp, x, pads, -xp.inf if is_max else 0)
    slices = _window_slices(xt, ksize, strides, out)
    acc = slices[0].copy()
    for s in slices[1:]:
        if is_max:
            xp.maximum(acc, s, out=acc)
        else:
            acc += s
    if not is_max:
        acc /= _avg_divisor(xp, x, attrs, ksize, strides, pads, out)
    return {"Out": _from_hwm(xp, acc, n, c)}


def _global_max_grad(xp, x, dy):
    """Global max pooling: the first maximum of each image plane gets the gradient."""
    n, c, h, w = x.shape
    arg = x.reshape(n * c, h * w).argmax(axis=1)
    dx = xp.zeros((n * c, h * w), dtype=dy.dtype)
    dx[xp.arange(n * c), arg] = dy.reshape(-1)
    return dx.reshape(x.shape)


@kernel("pool2d_grad")
def pool2d_grad(xp, ins, attrs, want):
    x, dy = ins["X"], ins["Out@GRAD"]
    n, c, h, w = x.shape
    ksize, strides, pads, out = _pool_setup(x, attrs)
    is_max = attrs["pooling_type"] == "max"
    if _is_global(x, ksize, pads, out):
        if is_max:
            return {"X@GRAD": _global_max_grad(xp, x, dy)}
        return {"X@GRAD": xp.broadcast_to(dy / dy.dtype.type(h * w), x.shape).copy()}
    dyt = dy.reshape(n * c, out[0] * out[1]).T.reshape(out[0], out[1], n * c)
    xt = _to_hwm(xp, x, pads, -xp.inf if is_max else 0)
    dxt = xp.zeros(xt.shape, dtype=dy.dtype)
    dxt_slices = _window_slices(dxt, ksize, strides, out)
    if is_max:
        slices = _window_slices(xt, ksize, strides, out)
        best = slices[0].copy()
        for s in slices[1:]:
            xp.maximum(best, s, out=best)
        # the first maximum of each window (row-major) gets the gradient, as in fluid
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
    ph, pw = pads[0][0], pads[1][0]
    return {"X@GRAD": _from_hwm(xp, dxt[ph:ph + h, pw:pw + w], n, c)}
