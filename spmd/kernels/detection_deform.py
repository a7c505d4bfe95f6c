"""Kernels: deformable_psroi_pooling and its gradient (deformable R-FCN's pooling; the op is
described in spmd/ops/detection_deform.py).

Each bin of a ROI (corners rounded, end + 1, scaled, shifted by -0.5) is moved by its part's
learned offset (Trans, times trans_std and the ROI's size), then averages sample_per_part^2
bilinear samples of its input channel (position-sensitive: channel (c * gh + i) * gw + j of
the bin's group cell); samples outside the map are skipped. The gradient scatters each bin's
share back through the bilinear weights, and into Trans through the interpolant's slope.
"""
from __future__ import annotations

import numpy as np

from .crf import host
from .detection_roi import roi_batch_ids
from .registry import kernel


def _c_round(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


class _Samples:
    """Every sample of one ROI, indexed [output channel, ph, pw, ih, iw]."""

    def __init__(self, roi, trans, attrs, channels_trans: int, h: int, w: int):
        ph_n, pw_n = attrs["pooled_height"], attrs["pooled_width"]
        od, spp, scale = attrs["output_dim"], attrs["sample_per_part"], attrs["spatial_scale"]
        (gh_n, gw_n), (part_h, part_w) = attrs["group_size"], attrs["part_size"]
        x1, y1 = _c_round(roi[0]) * scale - 0.5, _c_round(roi[1]) * scale - 0.5
        x2, y2 = (_c_round(roi[2]) + 1) * scale - 0.5, (_c_round(roi[3]) + 1) * scale - 0.5
        self.rw, self.rh = max(x2 - x1, 0.1), max(y2 - y1, 0.1)
        bw, bh = self.rw / pw_n, self.rh / ph_n
        c = np.arange(od)[:, None, None]
        ph, pw = np.arange(ph_n)[None, :, None], np.arange(pw_n)[None, None, :]
        self.part = (np.floor(ph / ph_n * part_h).astype(int),
                     np.floor(pw / pw_n * part_w).astype(int))
        classes = 1 if attrs["no_trans"] else channels_trans // 2
        self.cls = c // (od // classes if not attrs["no_trans"] else od)
        if attrs["no_trans"]:
            tx = ty = np.zeros((od, ph_n, pw_n))
        else:
            tx = trans[2 * self.cls, self.part[0], self.part[1]] * attrs["trans_std"]
            ty = trans[2 * self.cls + 1, self.part[0], self.part[1]] * attrs["trans_std"]
        ws = pw * bw + x1 + tx * self.rw
        hs = ph * bh + y1 + ty * self.rh
        step = np.arange(spp)
        xs = ws[..., None, None] + step[None, None, None, None, :] * bw / spp
        ys = hs[..., None, None] + step[None, None, None, :, None] * bh / spp
        self.valid = ~((xs < -0.5) | (xs > w - 0.5) | (ys < -0.5) | (ys > h - 0.5))
        xs, ys = np.clip(xs, 0.0, w - 1.0), np.clip(ys, 0.0, h - 1.0)
        self.x0, self.y0 = np.floor(xs).astype(int), np.floor(ys).astype(int)
        self.x1, self.y1 = np.ceil(xs).astype(int), np.ceil(ys).astype(int)
        self.dx, self.dy = xs - self.x0, ys - self.y0
        gy = np.clip(np.floor(ph * gh_n / ph_n).astype(int), 0, gh_n - 1)
        gx = np.clip(np.floor(pw * gw_n / pw_n).astype(int), 0, gw_n - 1)
        chan = (c * gh_n + gy) * gw_n + gx
        self.chan = np.broadcast_to(chan[..., None, None], self.valid.shape)
        self.count = self.valid.sum(axis=(-1, -2))

    def corners(self):
        """((y, x, weight) of the four corners of every sample)."""
        dx, dy = self.dx, self.dy
        return ((self.y0, self.x0, (1 - dx) * (1 - dy)), (self.y1, self.x0, (1 - dx) * dy),
                (self.y0, self.x1, dx * (1 - dy)), (self.y1, self.x1, dx * dy))


def _setup(ins, attrs, op):
    x = host(ins["Input"]).astype(np.float64)
    rois = host(ins["ROIs"]).astype(np.float64)
    trans = host(ins["Trans"]).astype(np.float64)
    batch = roi_batch_ids(ins, x.shape[0], op)
    return x, rois, trans, batch


@kernel("deformable_psroi_pooling")
def deformable_psroi_pooling(xp, ins, attrs, want):
    x, rois, trans, batch = _setup(ins, attrs, "deformable_psroi_pooling")
    _, _, h, w = x.shape
    shape = (rois.shape[0], attrs["output_dim"], attrs["pooled_height"], attrs["pooled_width"])
    out, count = np.zeros(shape), np.zeros(shape)
    for r in range(rois.shape[0]):
        s = _Samples(rois[r], trans[r], attrs, trans.shape[1], h, w)
        img = x[batch[r]]
        val = sum(wgt * img[s.chan, y, xx] for y, xx, wgt in s.corners())
        total = np.where(s.valid, val, 0.0).sum(axis=(-1, -2))
        out[r] = np.where(s.count > 0, total / np.maximum(s.count, 1), 0.0)
        count[r] = s.count
    dtype = ins["Input"].dtype
    return {"Output": xp.asarray(out, dtype=dtype), "TopCount": xp.asarray(count, dtype=dtype)}


@kernel("deformable_psroi_pooling_grad")
def deformable_psroi_pooling_grad(xp, ins, attrs, want):
    x, rois, trans, batch = _setup(ins, attrs, "deformable_psroi_pooling_grad")
    _, _, h, w = x.shape
    dout = host(ins["Output@GRAD"]).astype(np.float64)
    dx, dtrans = np.zeros_like(x), np.zeros_like(trans)
    for r in range(rois.shape[0]):
        s = _Samples(rois[r], trans[r], attrs, trans.shape[1], h, w)
        share = np.where(s.valid, (dout[r] / np.maximum(s.count, 1))[..., None, None], 0.0)
        img = x[batch[r]]
        for y, xx, wgt in s.corners():
            np.add.at(dx[batch[r]], (s.chan, y, xx), share * wgt)
        if attrs["no_trans"]:
            continue
        u00, u01 = img[s.chan, s.y0, s.x0], img[s.chan, s.y1, s.x0]
        u10, u11 = img[s.chan, s.y0, s.x1], img[s.chan, s.y1, s.x1]
        # the interpolant's slope along x and y, times d(sample) / d(offset)
        gx = ((u11 - u01) * s.dy + (u10 - u00) * (1 - s.dy)) * share * attrs["trans_std"] * s.rw
        gy = ((u11 - u10) * s.dx + (u01 - u00) * (1 - s.dx)) * share * attrs["trans_std"] * s.rh
        cls = np.broadcast_to(s.cls, s.count.shape)
        ph_i, pw_i = (np.broadcast_to(p, s.count.shape) for p in s.part)
        np.add.at(dtrans[r], (2 * cls, ph_i, pw_i), gx.sum(axis=(-1, -2)))
        np.add.at(dtrans[r], (2 * cls + 1, ph_i, pw_i), gy.sum(axis=(-1, -2)))
    res = {"Input@GRAD": xp.asarray(dx, dtype=ins["Input"].dtype)}
    if "Trans@GRAD" in want:
        res["Trans@GRAD"] = xp.asarray(dtrans, dtype=ins["Trans"].dtype)
    return res
