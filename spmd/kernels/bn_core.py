"""batch_norm's arithmetic, shared by the batch_norm kernels (nn.py) and fused_batch_norm_act
(fused.py), so the fused op computes the unfused op's numbers by construction.

An input is seen as a view [outer, C, inner] (NCHW: [N, C, H*W]; NHWC and 2-D: [N*H*W, C, 1]),
and every full-size array is touched as few times as possible:

- per-channel sums are BLAS products with a vector of ones ([outer*C, inner] x [inner] per
  row, then the rows added per channel in float64; channel-last: [outer] x [outer, C]) and
  per-channel sums of products are batched dot products, never a full-size temporary;
- the per-channel coefficients are worked out in float64 on C values and rounded once to X's
  dtype;
- forward: Y = X - mean (one fresh array), var from dot(Y, Y), then Y *= inv_std * scale and
  Y += bias in place: 1 fresh array, 5 passes (was 3 temporaries, 8 passes);
- backward: dX = scale * inv_std * (dY - sum(dY) / m - xhat * sum(dY * xhat) / m) is, per
  channel, k * (dY + beta * X + gamma) with sum(dY * xhat) = inv_std * (dot(dY, X) -
  mean * sum(dY)): 1 fresh array, 6 passes (was 4 temporaries, 11 passes).

The values differ from a per-element float64 evaluation by float32 rounding: the sums in
another order (BLAS blocks instead of numpy's pairwise sums) and dot(dY, X) - mean * sum(dY)
instead of sum(dY * (X - mean)), whose cancellation costs about eps * |mean| / std relative:
as X - mean itself does when X is rounded to float32 (tests/unit/test_ops_batch_norm.py).
"""
from __future__ import annotations

import math

import numpy as np

from . import workspace

# an inner extent from which one dot product per [outer, C] row beats a product temporary
_ROW_DOT_MIN = 16
# channel_dot's products of short runs: this many values at a time (in the L2 cache)
_CHUNK_VALUES = 1 << 15
# channel-last rows: how many pixels' channels one row of the 2-D view holds at most
_TILE_VALUES = 4096


class Channels:
    """X's channels: X as [outer, C, inner] (NCHW: [N, C, H*W]; NHWC and 2-D: [N*H*W, C, 1]),
    and a 2-D view [rows, period] of any array of X's shape in which a per-channel vector is
    one row (`row`): per-channel operands then broadcast over whole contiguous rows, numpy's
    fast loop (a [1, C, 1, 1] operand takes a slower one: 0.12 against 0.07 ms for one add
    over [32, 16, 32, 32] float32). With few images the row costs more than it saves, and the
    operand stays [1, C, 1]."""

    def __init__(self, x, layout: str):
        if layout == "NCHW" or x.ndim < 3:
            self.outer, self.c, self.inner = x.shape[0], x.shape[1], math.prod(x.shape[2:])
        else:
            self.outer, self.c, self.inner = math.prod(x.shape[:-1]), x.shape[-1], 1
        self.shape3 = (self.outer, self.c, self.inner)
        self.count = self.outer * self.inner  # values per channel
        self.tile = 1  # pixels (channel-last) per row
        if self.inner == 1 and x.size >= _TILE_VALUES * 4:  # small: not worth the tiling
            self.tile = next(t for t in (256, 64, 16, 4, 1)
                             if self.outer % t == 0 and t * self.c <= _TILE_VALUES or t == 1)
        self.rows = self.inner == 1 or self.outer >= 4
        self.shape2 = ((self.outer // self.tile, self.tile * self.c * self.inner) if self.rows
                       else self.shape3)

    def view3(self, a):
        return a.reshape(self.shape3)

    def view2(self, a):
        """a (X's shape) as the 2-D rows (or [outer, C, inner]) that `row` operands fit."""
        return a.reshape(self.shape2)

    def row(self, xp, v, dtype):
        """The per-channel vector v (C values) in `dtype`, laid out to broadcast over view2."""
        v = v.astype(dtype)
        if not self.rows:
            return v.reshape(1, self.c, 1)
        if self.inner > 1:
            return xp.repeat(v, self.inner)
        return xp.tile(v, self.tile) if self.tile > 1 else v


def _ones(xp, n: int, dtype):
    return workspace.get(xp, ("bn_core:ones",), (n,), dtype, fill=1)


def channel_sum(xp, a3):
    """float64 [C]: a3 [outer, C, inner] summed over outer and inner."""
    outer, c, inner = a3.shape
    if inner == 1:
        return xp.matmul(_ones(xp, outer, a3.dtype), a3.reshape(outer, c)).astype(np.float64)
    rows = xp.matmul(a3.reshape(outer * c, inner), _ones(xp, inner, a3.dtype))
    return rows.reshape(outer, c).sum(axis=0, dtype=np.float64)


def channel_dot(xp, a3, b3):
    """float64 [C]: sum over outer and inner of a3 * b3 (both [outer, C, inner]). Long inner
    runs: one dot product per [outer, C] row; else the products a cache-sized chunk of
    `outer` at a time in a workspace, each chunk summed by a product with ones."""
    outer, c, inner = a3.shape
    if inner >= _ROW_DOT_MIN:
        rows = xp.matmul(a3.reshape(outer * c, 1, inner), b3.reshape(outer * c, inner, 1))
        return rows.reshape(outer, c).sum(axis=0, dtype=np.float64)
    width = c * inner
    a2, b2 = a3.reshape(outer, width), b3.reshape(outer, width)
    step = max(1, _CHUNK_VALUES // max(width, 1))
    if step >= outer:
        total = xp.matmul(_ones(xp, outer, a2.dtype), a2 * b2).astype(np.float64)
    else:
        buf = workspace.get(xp, ("bn_core:products",), (step, width), a2.dtype)
        total = xp.zeros(width, dtype=np.float64)
        for r in range(0, outer, step):
            part = buf[:min(step, outer - r)]
            xp.multiply(a2[r:r + step], b2[r:r + step], out=part)
            total += xp.matmul(_ones(xp, part.shape[0], a2.dtype), part)
    return total.reshape(c, inner).sum(axis=1)


def normalize(xp, x, mean, scale_inv_std, bias, layout: str):
    """Y = (X - mean) * (inv_std * scale) + bias, a fresh array; the per-channel operands are
    rounded to X's dtype first."""
    ch = Channels(x, layout)
    y = xp.subtract(ch.view2(x), ch.row(xp, mean, x.dtype))
    y *= ch.row(xp, scale_inv_std, x.dtype)
    y += ch.row(xp, bias, x.dtype)
    return y.reshape(x.shape)


def train_forward(xp, x, scale, bias, eps: float, layout: str):
    """Batch statistics: (Y, mean, var, inv_std), mean and var float64 [C] (biased variance),
    inv_std in X's dtype; Y a fresh array."""
    ch = Channels(x, layout)
    mean = channel_sum(xp, ch.view3(x)) / ch.count
    y = xp.subtract(ch.view2(x), ch.row(xp, mean, x.dtype))
    var = channel_dot(xp, ch.view3(y), ch.view3(y)) / ch.count
    inv_std = 1.0 / xp.sqrt(var + eps)
    y *= ch.row(xp, inv_std * scale, x.dtype)
    y += ch.row(xp, bias, x.dtype)
    return y.reshape(x.shape), mean, var, inv_std.astype(x.dtype)


def backward(xp, x, dy, scale, mean, inv_std, want, through_stats: bool, layout: str) -> dict:
    """X@GRAD, Scale@GRAD and Bias@GRAD (those in `want`) of Y = xhat * scale + bias with
    xhat = (X - mean) * inv_std; through_stats: mean and inv_std are X's batch statistics,
    so X's gradient flows through them too. Fresh arrays; dy is only read."""
    ch = Channels(x, layout)
    m, dt = ch.count, x.dtype
    mean64, inv64 = mean.astype(np.float64), inv_std.astype(np.float64)
    k = scale * inv64
    res = {}
    through_stats = through_stats and "X@GRAD" in want
    if through_stats or want & {"Bias@GRAD", "Scale@GRAD"}:
        dbias = channel_sum(xp, ch.view3(dy))
        dscale = inv64 * (channel_dot(xp, ch.view3(dy), ch.view3(x)) - mean64 * dbias)
        if "Scale@GRAD" in want:
            res["Scale@GRAD"] = dscale.astype(scale.dtype)
        if "Bias@GRAD" in want:
            res["Bias@GRAD"] = dbias.astype(scale.dtype)
    if "X@GRAD" in want:
        if through_stats:
            beta = -inv64 * dscale / m
            dx = xp.multiply(ch.view2(x), ch.row(xp, beta, dt))
            dx += ch.row(xp, -beta * mean64 - dbias / m, dt)
            dx += ch.view2(dy)
            dx *= ch.row(xp, k, dt)
        else:
            dx = xp.multiply(ch.view2(dy), ch.row(xp, k, dt))
        res["X@GRAD"] = dx.reshape(x.shape)
    return res
