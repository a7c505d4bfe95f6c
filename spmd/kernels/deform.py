"""Kernels: deformable_conv (v2, with Mask) and deformable_conv_v1, with gradients.

The deformed columns [N, C, K, P] (K kernel taps, P output pixels) are bilinear reads of the
input at the shifted tap positions, four corners each, zero outside the image; the output is
then one batched matmul per group, as an ordinary convolution's im2col. The backward scatters
the column gradient back onto the four corners (bincount) and differentiates the bilinear
weights for the offsets.
"""
from __future__ import annotations

from ..ops.conv import conv_out_size
from .registry import kernel


def _positions(xp, x, w, offset, attrs):
    """Sampling rows/cols [N, dg, K, P] of every tap of every output pixel."""
    n, (kh, kw) = x.shape[0], w.shape[2:]
    s, p, d = attrs["strides"], attrs["paddings"], attrs["dilations"]
    dg = attrs["deformable_groups"]
    out = [conv_out_size(x.shape[2 + i], w.shape[2 + i], s[i], (p[i], p[i]), d[i])
           for i in range(2)]
    oy = xp.arange(out[0]).reshape(-1, 1) * s[0] - p[0]
    ox = xp.arange(out[1]).reshape(1, -1) * s[1] - p[1]
    ti = (xp.arange(kh) * d[0]).repeat(kw).reshape(-1, 1, 1)
    tj = xp.tile(xp.arange(kw) * d[1], kh).reshape(-1, 1, 1)
    off = offset.reshape(n, dg, kh * kw, 2, *out)
    rows = (oy + ti).astype(x.dtype)[None, None] + off[:, :, :, 0]
    cols = (ox + tj).astype(x.dtype)[None, None] + off[:, :, :, 1]
    return rows.reshape(n, dg, kh * kw, -1), cols.reshape(n, dg, kh * kw, -1), out


def _corners(xp, x, rows, cols):
    """Per corner: (flat index into H*W, bilinear weight (0 outside), d weight/d row,
    d weight/d col), each [N, dg, K, P]."""
    h, w = x.shape[2:]
    r0, c0 = xp.floor(rows), xp.floor(cols)
    fr, fc = rows - r0, cols - c0
    res = []
    for dr in (0, 1):
        for dc in (0, 1):
            r, c = r0 + dr, c0 + dc
            inside = ((r >= 0) & (r < h) & (c >= 0) & (c < w)).astype(x.dtype)
            wr, wc = (fr if dr else 1 - fr), (fc if dc else 1 - fc)
            idx = (xp.clip(r, 0, h - 1) * w + xp.clip(c, 0, w - 1)).astype("int64")
            res.append((idx, wr * wc * inside, (1 if dr else -1) * wc * inside,
                        (1 if dc else -1) * wr * inside))
    return res


def _gather(xp, x, idx, dg):
    """x [N, C, H, W] read at idx [N, dg, K, P] per deformable group: [N, dg, Cg, K, P]."""
    n, c = x.shape[:2]
    xg = x.reshape(n, dg, c // dg, -1)
    flat = idx.reshape(n, dg, 1, -1)
    vals = xp.take_along_axis(xg, xp.broadcast_to(flat, (n, dg, c // dg, flat.shape[-1])), 3)
    return vals.reshape(n, dg, c // dg, *idx.shape[2:])


def _columns(xp, ins, attrs):
    x, w, offset = ins["Input"], ins["Filter"], ins["Offset"]
    dg = attrs["deformable_groups"]
    rows, cols, out = _positions(xp, x, w, offset, attrs)
    corners = _corners(xp, x, rows, cols)
    vals = sum(_gather(xp, x, idx, dg) * wt[:, :, None] for idx, wt, _, _ in corners)
    return vals, corners, out  # vals [N, dg, Cg, K, P], before the mask


def _mask(ins, vals):
    m = ins.get("Mask")
    if m is None:
        return None
    n, dg, _, k, p = vals.shape
    return m.reshape(n, dg, 1, k, p)


@kernel("deformable_conv", "deformable_conv_v1")
def deformable_conv(xp, ins, attrs, want):
    x, w = ins["Input"], ins["Filter"]
    n, m, g = x.shape[0], w.shape[0], attrs["groups"]
    vals, _, out = _columns(xp, ins, attrs)
    mask = _mask(ins, vals)
    cols = (vals * mask if mask is not None else vals).reshape(n, g, -1, vals.shape[-1])
    y = xp.matmul(w.reshape(1, g, m // g, -1), cols)  # [N, G, M/G, P]
    return {"Output": y.reshape(n, m, *out)}


@kernel("deformable_conv_grad", "deformable_conv_v1_grad")
def deformable_conv_grad(xp, ins, attrs, want):
    x, w, dy = ins["Input"], ins["Filter"], ins["Output@GRAD"]
    n, m, g, dg = x.shape[0], w.shape[0], attrs["groups"], attrs["deformable_groups"]
    vals, corners, _ = _columns(xp, ins, attrs)
    mask = _mask(ins, vals)
    cols = vals * mask if mask is not None else vals
    p = vals.shape[-1]
    dyg = dy.reshape(n, g, m // g, p)
    res = {}
    if "Filter@GRAD" in want:
        dw = xp.matmul(dyg, cols.reshape(n, g, -1, p).transpose(0, 1, 3, 2)).sum(axis=0)
        res["Filter@GRAD"] = dw.reshape(w.shape)
    dcols = xp.matmul(w.reshape(1, g, m // g, -1).transpose(0, 1, 3, 2), dyg)
    dcols = dcols.reshape(vals.shape)
    if mask is not None and "Mask@GRAD" in want:
        res["Mask@GRAD"] = (dcols * vals).sum(axis=2).reshape(ins["Mask"].shape)
    dvals = dcols * mask if mask is not None else dcols
    if "Input@GRAD" in want:
        res["Input@GRAD"] = _scatter_input(xp, x, dvals, corners, dg)
    if "Offset@GRAD" in want:
        d_rows = d_cols = 0
        for idx, _, wr_d, wc_d in corners:
            read = (_gather(xp, x, idx, dg) * dvals).sum(axis=2)
            d_rows = d_rows + read * wr_d
            d_cols = d_cols + read * wc_d
        doff = xp.stack([d_rows, d_cols], axis=3)  # [N, dg, K, 2, P]
        res["Offset@GRAD"] = doff.reshape(ins["Offset"].shape)
    return res


def _scatter_input(xp, x, dvals, corners, dg):
    n, c = x.shape[:2]
    hw = x.shape[2] * x.shape[3]
    cg = c // dg
    base = (xp.arange(n * dg * cg) * hw).reshape(n, dg, cg, 1, 1)
    dx = xp.zeros(x.size, dtype=x.dtype)
    for idx, wt, _, _ in corners:
        flat = (base + idx[:, :, None]).reshape(-1)
        contrib = (dvals * wt[:, :, None]).reshape(-1)
        dx += xp.bincount(flat, weights=contrib, minlength=x.size).astype(x.dtype)
    return dx.reshape(x.shape)
