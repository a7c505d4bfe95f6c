"""Kernels: roi_perspective_transform and its gradient (the op is described in
spmd/ops/detection_perspective.py).

Each quadrilateral ROI (x0, y0, ..., x3, y3, clockwise from the top left) is warped onto a
transformed_height x transformed_width grid by the perspective transform that maps the grid's
corners to the quad's (fluid's closed form, its width normalized to the quad's aspect); an
output pixel samples the input bilinearly where its source lies inside the quad and the map,
and is 0 (Mask 0) elsewhere. fluid's comparisons allow 1e-4, and so do these.
"""
from __future__ import annotations

import math

import numpy as np

from .crf import host
from .detection_roi import roi_batch_ids
from .registry import kernel

EPS = 1e-4


def _ge(a, b):
    return a > b or abs(a - b) < EPS


def _le(a, b):
    return a < b or abs(a - b) < EPS


def in_quad(x: float, y: float, qx, qy) -> bool:
    """On an edge (within 1e-4), or inside by the crossing count of a ray to the right."""
    edges = [(qx[i], qy[i], qx[(i + 1) % 4], qy[(i + 1) % 4]) for i in range(4)]
    for xs, ys, xe, ye in edges:
        if abs(ys - ye) < EPS:
            if abs(y - ys) < EPS and abs(y - ye) < EPS and _ge(x, min(xs, xe)) and _le(
                    x, max(xs, xe)):
                return True
        else:
            cross = (y - ys) * (xe - xs) / (ye - ys) + xs
            if abs(cross - x) < EPS and _ge(y, min(ys, ye)) and _le(y, max(ys, ye)):
                return True
    crossings = 0
    for xs, ys, xe, ye in edges:
        if abs(ys - ye) < EPS or _le(y, min(ys, ye)) or y - max(ys, ye) > EPS:
            continue
        cross = (y - ys) * (xe - xs) / (ye - ys) + xs
        if abs(cross - x) < EPS:
            return True
        crossings += cross - x > EPS
    return crossings % 2 == 1


def transform_matrix(qx, qy, th: int, tw: int) -> np.ndarray:
    """fluid's 3 x 3 matrix (row-major, 9) from the output grid to the quad."""
    x0, x1, x2, x3 = qx
    y0, y1, y2, y3 = qy
    height = (math.hypot(x1 - x2, y1 - y2) + math.hypot(x3 - x0, y3 - y0)) / 2
    width = (math.hypot(x0 - x1, y0 - y1) + math.hypot(x2 - x3, y2 - y3)) / 2
    nh = max(2, th)
    nw = math.floor(width * (nh - 1) / height + 0.5) + 1  # C's round of a positive
    nw = max(2, min(nw, tw))
    dx1, dx2, dx3 = x1 - x2, x3 - x2, x0 - x1 + x2 - x3
    dy1, dy2, dy3 = y1 - y2, y3 - y2, y0 - y1 + y2 - y3
    den = dx1 * dy2 - dx2 * dy1 + 1e-5
    m = np.zeros(9)
    m[6] = (dx3 * dy2 - dx2 * dy3) / den / (nw - 1)
    m[7] = (dx1 * dy3 - dx3 * dy1) / den / (nh - 1)
    m[8] = 1
    m[3] = (y1 - y0 + m[6] * (nw - 1) * y1) / (nw - 1)
    m[4] = (y3 - y0 + m[7] * (nh - 1) * y3) / (nh - 1)
    m[5] = y0
    m[0] = (x1 - x0 + m[6] * (nw - 1) * x1) / (nw - 1)
    m[1] = (x3 - x0 + m[7] * (nh - 1) * x3) / (nh - 1)
    m[2] = x0
    return m


def _corners(sx: float, sy: float, h: int, w: int):
    """fluid's bilinear corners [(row, col, weight)] of a source point inside the map."""
    sx, sy = (0.0 if _ge(0, sx) else sx), (0.0 if _ge(0, sy) else sy)
    x0, y0 = math.floor(sx), math.floor(sy)
    if _ge(x0, w - 1):
        x0 = x1 = w - 1
        sx = float(x0)
    else:
        x1 = x0 + 1
    if _ge(y0, h - 1):
        y0 = y1 = h - 1
        sy = float(y0)
    else:
        y1 = y0 + 1
    fx, fy = sx - x0, sy - y0
    return ((y0, x0, (1 - fx) * (1 - fy)), (y1, x0, (1 - fx) * fy), (y1, x1, fx * fy),
            (y0, x1, fx * (1 - fy)))


def _samples(rois, attrs, h: int, w: int):
    """Per ROI: its matrix and [(out row, out col, corners)] of the pixels that sample."""
    th, tw, scale = attrs["transformed_height"], attrs["transformed_width"], attrs[
        "spatial_scale"]
    for roi in rois:
        qx, qy = roi[0::2] * scale, roi[1::2] * scale
        m = transform_matrix(qx, qy, th, tw)
        hits = []
        for oh in range(th):
            for ow in range(tw):
                d = m[6] * ow + m[7] * oh + m[8]
                sx, sy = (m[0] * ow + m[1] * oh + m[2]) / d, (m[3] * ow + m[4] * oh + m[5]) / d
                if not in_quad(sx, sy, qx, qy):
                    continue
                if _ge(-0.5, sx) or _ge(sx, w - 0.5) or _ge(-0.5, sy) or _ge(sy, h - 0.5):
                    continue
                hits.append((oh, ow, _corners(sx, sy, h, w)))
        yield m, hits


@kernel("roi_perspective_transform")
def roi_perspective_transform(xp, ins, attrs, want):
    x = host(ins["X"]).astype(np.float64)
    n, c, h, w = x.shape
    rois = host(ins["ROIs"]).astype(np.float64).reshape(-1, 8)
    batch = roi_batch_ids(ins, n, "roi_perspective_transform")
    th, tw = attrs["transformed_height"], attrs["transformed_width"]
    out = np.zeros((len(rois), c, th, tw))
    mask = np.zeros((len(rois), 1, th, tw), dtype=np.int32)
    matrices = np.zeros((len(rois), 9))
    idx = np.full((len(rois), c, th, tw, 4), -1, dtype=np.int32)
    wgt = np.zeros((len(rois), c, th, tw, 4))
    for r, (m, hits) in enumerate(_samples(rois, attrs, h, w)):
        matrices[r] = m
        for oh, ow, corners in hits:
            mask[r, 0, oh, ow] = 1
            for k, (yy, xx, wk) in enumerate(corners):
                out[r, :, oh, ow] += wk * x[batch[r], :, yy, xx]
                # Out2In: the flat input element each output reads, and its weight
                idx[r, :, oh, ow, k] = ((batch[r] * c + np.arange(c)) * h + yy) * w + xx
                wgt[r, :, oh, ow, k] = wk
    dtype = ins["X"].dtype
    return {"Out": xp.asarray(out, dtype=dtype), "Mask": xp.asarray(mask),
            "TransformMatrix": xp.asarray(matrices, dtype=dtype),
            "Out2InIdx": xp.asarray(idx.reshape(-1, 4)),
            "Out2InWeights": xp.asarray(wgt.reshape(-1, 4), dtype=dtype)}


@kernel("roi_perspective_transform_grad")
def roi_perspective_transform_grad(xp, ins, attrs, want):
    x = ins["X"]
    n, c, h, w = x.shape
    rois = host(ins["ROIs"]).astype(np.float64).reshape(-1, 8)
    batch = roi_batch_ids(ins, n, "roi_perspective_transform_grad")
    dout = host(ins["Out@GRAD"]).astype(np.float64)
    dx = np.zeros((n, c, h, w))
    for r, (_, hits) in enumerate(_samples(rois, attrs, h, w)):
        for oh, ow, corners in hits:
            for yy, xx, wk in corners:
                dx[batch[r], :, yy, xx] += wk * dout[r, :, oh, ow]
    return {"X@GRAD": xp.asarray(dx, dtype=x.dtype)}
