"""Kernels: ROI pooling (roi_align, roi_pool, psroi_pool, prroi_pool) and their gradients (the
ops are described in spmd/ops/detection_roi.py).

roi_align and prroi_pool are linear in X with weights that factor into a row part and a column
part: roi_align averages bilinear samples on a product grid (a sample is dropped when its row or
its column falls outside the map, so the weight is still a product), prroi_pool integrates the
bilinear interpolant over each bin (the integral of a product of hats). So each ROI's bin
[PH, PW] is `rows [PH, H] @ X[b] [C, H, W] @ cols [PW, W]^T`, and the gradient the transposed
product. roi_pool and psroi_pool take a max / mean over integer bins. The ROIs are few (host
loops over them); the work per ROI is array code.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from .crf import host
from .registry import kernel
from .sequence import segment_ids


def roi_batch_ids(ins, n_images: int, op: str) -> np.ndarray:
    """The image of each ROI: from RoisLod (offsets) or BatchRoINums (counts) when given, else
    from the ROIs' LoD, as fluid's kernels read them."""
    rois = ins["ROIs"]
    if ins.get("RoisLod") is not None:
        offsets = host(ins["RoisLod"]).reshape(-1).astype(np.int64)
    elif ins.get("BatchRoINums") is not None:
        offsets = np.concatenate([[0], np.cumsum(host(ins["BatchRoINums"]).reshape(-1))])
    elif ins.get("ROIs@LOD") is not None:
        offsets = np.asarray(ins["ROIs@LOD"][-1], dtype=np.int64)
    else:
        raise InvalidArgumentError(
            f"{op}: ROIs carry no LoD, so which image each ROI belongs to is unknown; feed the "
            f"ROIs as a LoDTensor with one sequence per image (fluid.create_lod_tensor(rois, "
            f"[[rois per image]], place)) to a variable with lod_level=1")
    if offsets.size - 1 != n_images or offsets[-1] != rois.shape[0]:
        raise InvalidArgumentError(
            f"{op}: the ROIs' LoD {offsets.tolist()} must give one sequence per image of X "
            f"({n_images} images) and cover all {rois.shape[0]} ROIs")
    return segment_ids(offsets)


# --- roi_align -----------------------------------------------------------------------------

def _align_axis(start: float, extent: float, pooled: int, grid: int, size: int) -> np.ndarray:
    """[pooled, size] weights: each bin's `grid` bilinear samples along one axis, averaged."""
    bin_size = extent / pooled
    pos = (start + np.arange(pooled)[:, None] * bin_size
           + (np.arange(grid)[None, :] + 0.5) * bin_size / grid)
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    frac = np.where(edge, 0.0, pos - low)
    weights = np.zeros((pooled, size))
    rows = np.repeat(np.arange(pooled)[:, None], grid, axis=1)
    np.add.at(weights, (rows, low), (1.0 - frac) * valid / grid)
    np.add.at(weights, (rows, high), frac * valid / grid)
    return weights


def _align_weights(roi, attrs, h: int, w: int):
    scale, ph, pw = attrs["spatial_scale"], attrs["pooled_height"], attrs["pooled_width"]
    x1, y1, x2, y2 = (float(v) * scale for v in roi)
    rh, rw = max(y2 - y1, 1.0), max(x2 - x1, 1.0)
    ratio = attrs["sampling_ratio"]
    gh = ratio if ratio > 0 else math.ceil(rh / ph)
    gw = ratio if ratio > 0 else math.ceil(rw / pw)
    return _align_axis(y1, rh, ph, gh, h), _align_axis(x1, rw, pw, gw, w)


@kernel("roi_align")
def roi_align(xp, ins, attrs, want):
    x = ins["X"]
    n, c, h, w = x.shape
    rois = host(ins["ROIs"])
    batch = roi_batch_ids(ins, n, "roi_align")
    out = xp.zeros((rois.shape[0], c, attrs["pooled_height"], attrs["pooled_width"]), x.dtype)
    for r in range(rois.shape[0]):
        rows, cols = (xp.asarray(a, dtype=x.dtype) for a in _align_weights(rois[r], attrs, h, w))
        out[r] = xp.einsum("ph,chw,qw->cpq", rows, x[batch[r]], cols)
    return {"Out": out}


@kernel("roi_align_grad")
def roi_align_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    n, c, h, w = x.shape
    rois = host(ins["ROIs"])
    batch = roi_batch_ids(ins, n, "roi_align_grad")
    dx = xp.zeros(x.shape, x.dtype)
    for r in range(rois.shape[0]):
        rows, cols = (xp.asarray(a, dtype=x.dtype) for a in _align_weights(rois[r], attrs, h, w))
        dx[batch[r]] += xp.einsum("ph,cpq,qw->chw", rows, dout[r], cols)
    return {"X@GRAD": dx}


# --- roi_pool ------------------------------------------------------------------------------

def _round(v: float) -> int:
    """C's round (halves away from zero), as fluid's kernel rounds ROI corners."""
    return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)


def _pool_bins(roi, attrs, h: int, w: int):
    """[(ph, pw, h0, h1, w0, w1)] of the integer bins of one ROI (roi_pool's rule)."""
    scale, ph, pw = attrs["spatial_scale"], attrs["pooled_height"], attrs["pooled_width"]
    x1, y1, x2, y2 = (_round(float(v) * scale) for v in roi)
    bh, bw = max(y2 - y1 + 1, 1) / ph, max(x2 - x1 + 1, 1) / pw
    bins = []
    for i in range(ph):
        h0 = min(max(math.floor(i * bh) + y1, 0), h)
        h1 = min(max(math.ceil((i + 1) * bh) + y1, 0), h)
        for j in range(pw):
            w0 = min(max(math.floor(j * bw) + x1, 0), w)
            w1 = min(max(math.ceil((j + 1) * bw) + x1, 0), w)
            bins.append((i, j, h0, h1, w0, w1))
    return bins


@kernel("roi_pool")
def roi_pool(xp, ins, attrs, want):
    x = ins["X"]
    n, c, h, w = x.shape
    rois = host(ins["ROIs"])
    batch = roi_batch_ids(ins, n, "roi_pool")
    shape = (rois.shape[0], c, attrs["pooled_height"], attrs["pooled_width"])
    out, arg = xp.zeros(shape, x.dtype), xp.full(shape, -1, dtype=np.int64)
    for r in range(rois.shape[0]):
        for i, j, h0, h1, w0, w1 in _pool_bins(rois[r], attrs, h, w):
            if h1 <= h0 or w1 <= w0:
                continue  # an empty bin pools to 0, argmax -1
            patch = x[batch[r], :, h0:h1, w0:w1].reshape(c, -1)
            k = patch.argmax(axis=1)  # the first of equal maxima, as fluid's strict '>'
            out[r, :, i, j] = patch[xp.arange(c), k]
            arg[r, :, i, j] = (h0 + k // (w1 - w0)) * w + w0 + k % (w1 - w0)
    return {"Out": out, "Argmax": arg}


@kernel("roi_pool_grad")
def roi_pool_grad(xp, ins, attrs, want):
    x = ins["X"]
    dout, arg = host(ins["Out@GRAD"]), host(ins["Argmax"])
    n, c, h, w = x.shape
    batch = roi_batch_ids(ins, n, "roi_pool_grad")
    dx = np.zeros((n, c, h * w), dout.dtype)
    img = np.broadcast_to(batch[:, None, None, None], arg.shape)
    chan = np.broadcast_to(np.arange(arg.shape[1])[None, :, None, None], arg.shape)
    hit = arg >= 0  # each bin's gradient goes to the pixel its max came from
    np.add.at(dx, (img[hit], chan[hit], arg[hit]), dout[hit])
    return {"X@GRAD": xp.asarray(dx.reshape(x.shape))}


# --- psroi_pool ----------------------------------------------------------------------------

def _ps_bins(roi, attrs, h: int, w: int):
    """[(ph, pw, h0, h1, w0, w1)]: psroi_pool's bins (rounded corners, end + 1, then scaled)."""
    scale, ph, pw = attrs["spatial_scale"], attrs["pooled_height"], attrs["pooled_width"]
    x1, y1 = _round(float(roi[0])) * scale, _round(float(roi[1])) * scale
    x2, y2 = (_round(float(roi[2])) + 1.0) * scale, (_round(float(roi[3])) + 1.0) * scale
    bh, bw = max(y2 - y1, 0.1) / ph, max(x2 - x1, 0.1) / pw
    bins = []
    for i in range(ph):
        h0 = min(max(math.floor(bh * i + y1), 0), h)
        h1 = min(max(math.ceil(bh * (i + 1) + y1), 0), h)
        for j in range(pw):
            w0 = min(max(math.floor(bw * j + x1), 0), w)
            w1 = min(max(math.ceil(bw * (j + 1) + x1), 0), w)
            bins.append((i, j, h0, h1, w0, w1))
    return bins


def _ps_channels(attrs, i: int, j: int) -> np.ndarray:
    """The input channel of each output channel at bin (i, j): position-sensitive maps."""
    ph, pw = attrs["pooled_height"], attrs["pooled_width"]
    return (np.arange(attrs["output_channels"]) * ph + i) * pw + j


@kernel("psroi_pool")
def psroi_pool(xp, ins, attrs, want):
    x = ins["X"]
    n, _, h, w = x.shape
    rois = host(ins["ROIs"])
    batch = roi_batch_ids(ins, n, "psroi_pool")
    out = xp.zeros((rois.shape[0], attrs["output_channels"], attrs["pooled_height"],
                    attrs["pooled_width"]), x.dtype)
    for r in range(rois.shape[0]):
        for i, j, h0, h1, w0, w1 in _ps_bins(rois[r], attrs, h, w):
            if h1 > h0 and w1 > w0:
                patch = x[batch[r], xp.asarray(_ps_channels(attrs, i, j)), h0:h1, w0:w1]
                out[r, :, i, j] = patch.sum(axis=(1, 2)) / ((h1 - h0) * (w1 - w0))
    return {"Out": out}


@kernel("psroi_pool_grad")
def psroi_pool_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    n, _, h, w = x.shape
    rois = host(ins["ROIs"])
    batch = roi_batch_ids(ins, n, "psroi_pool_grad")
    dx = xp.zeros(x.shape, x.dtype)
    for r in range(rois.shape[0]):
        for i, j, h0, h1, w0, w1 in _ps_bins(rois[r], attrs, h, w):
            if h1 > h0 and w1 > w0:
                share = dout[r, :, i, j] / ((h1 - h0) * (w1 - w0))
                chans = xp.asarray(_ps_channels(attrs, i, j))
                dx[batch[r], chans, h0:h1, w0:w1] += share[:, None, None]
    return {"X@GRAD": dx}


# --- prroi_pool ----------------------------------------------------------------------------

def _hat_cdf(u):
    """The integral of the hat max(0, 1 - |t|) from -inf to u."""
    u = np.clip(u, -1.0, 1.0)
    return np.where(u < 0, 0.5 * (u + 1.0) ** 2, 1.0 - 0.5 * (1.0 - u) ** 2)


def _hat(u):
    return np.maximum(0.0, 1.0 - np.abs(u))


def _pr_axis(start: float, bin_size: float, pooled: int, size: int):
    """Per bin along one axis: its ends [pooled] (lo, hi) and the integral of each pixel's
    hat over the bin, [pooled, size]."""
    lo = start + np.arange(pooled) * bin_size
    hi = lo + bin_size
    k = np.arange(size)[None, :]
    return lo, hi, _hat_cdf(hi[:, None] - k) - _hat_cdf(lo[:, None] - k)


def _pr_geometry(roi, attrs, h: int, w: int):
    scale, ph, pw = attrs["spatial_scale"], attrs["pooled_height"], attrs["pooled_width"]
    x1, y1, x2, y2 = (float(v) * scale for v in roi)
    bh, bw = max(y2 - y1, 0.0) / ph, max(x2 - x1, 0.0) / pw
    return bh, bw, _pr_axis(y1, bh, ph, h), _pr_axis(x1, bw, pw, w)


@kernel("prroi_pool")
def prroi_pool(xp, ins, attrs, want):
    x = ins["X"]
    n, c, h, w = x.shape
    rois = host(ins["ROIs"])
    batch = roi_batch_ids(ins, n, "prroi_pool")
    out = xp.zeros((rois.shape[0], c, attrs["pooled_height"], attrs["pooled_width"]), x.dtype)
    for r in range(rois.shape[0]):
        bh, bw, (_, _, rows), (_, _, cols) = _pr_geometry(rois[r], attrs, h, w)
        if bh * bw > 0:
            rows, cols = (xp.asarray(a / s, dtype=x.dtype) for a, s in ((rows, bh), (cols, bw)))
            out[r] = xp.einsum("ph,chw,qw->cpq", rows, x[batch[r]], cols)
    return {"Out": out}


@kernel("prroi_pool_grad")
def prroi_pool_grad(xp, ins, attrs, want):
    """X@GRAD: the transposed product. ROIs@GRAD: out = N / (bh * bw) with N the integral
    over the bin, whose ends move with the ROI's corners; d N / d end is the interpolant's
    integral along the edge (a hat at that end), d bh / d corner is +-scale / pooled."""
    x, dout = ins["X"], ins["Out@GRAD"]
    n, c, h, w = x.shape
    rois = host(ins["ROIs"])
    batch = roi_batch_ids(ins, n, "prroi_pool_grad")
    scale, ph, pw = attrs["spatial_scale"], attrs["pooled_height"], attrs["pooled_width"]
    dx = xp.zeros(x.shape, x.dtype)
    droi = np.zeros(rois.shape, dtype=np.float64)
    k_h, k_w = np.arange(h)[None, :], np.arange(w)[None, :]
    for r in range(rois.shape[0]):
        bh, bw, (ylo, yhi, rows), (xlo, xhi, cols) = _pr_geometry(rois[r], attrs, h, w)
        if bh * bw <= 0:
            continue
        area = bh * bw
        img = host(x[batch[r]]).astype(np.float64)
        g = host(dout[r]).astype(np.float64)
        dx[batch[r]] += xp.asarray(np.einsum("ph,cpq,qw->chw", rows, g, cols) / area,
                                   dtype=x.dtype)
        out = np.einsum("ph,chw,qw->cpq", rows, img, cols) / area
        # integrals along the bins' edges: at the low / high row end, and column end
        e_ylo = np.einsum("ph,chw,qw->cpq", _hat(ylo[:, None] - k_h), img, cols)
        e_yhi = np.einsum("ph,chw,qw->cpq", _hat(yhi[:, None] - k_h), img, cols)
        e_xlo = np.einsum("ph,chw,qw->cpq", rows, img, _hat(xlo[:, None] - k_w))
        e_xhi = np.einsum("ph,chw,qw->cpq", rows, img, _hat(xhi[:, None] - k_w))
        p = (np.arange(ph) / ph)[None, :, None]
        q = (np.arange(pw) / pw)[None, None, :]
        # ends: lo = c1 + p (c2 - c1), hi = c1 + (p + 1/P)(c2 - c1), times the scale
        d_y1 = (e_yhi * (1 - p - 1 / ph) - e_ylo * (1 - p)) * scale / area + out * scale / ph / bh
        d_y2 = (e_yhi * (p + 1 / ph) - e_ylo * p) * scale / area - out * scale / ph / bh
        d_x1 = (e_xhi * (1 - q - 1 / pw) - e_xlo * (1 - q)) * scale / area + out * scale / pw / bw
        d_x2 = (e_xhi * (q + 1 / pw) - e_xlo * q) * scale / area - out * scale / pw / bw
        droi[r] = [np.sum(g * d) for d in (d_x1, d_y1, d_x2, d_y2)]
    res = {"X@GRAD": dx}
    if "ROIs@GRAD" in want:
        res["ROIs@GRAD"] = xp.asarray(droi, dtype=ins["ROIs"].dtype)
    return res
