"""Kernels: yolo_box, yolov3_loss (and its gradient), anchor_generator, box_decoder_and_assign
and polygon_box_transform (the ops are described in spmd/ops/detection_yolo.py).

YOLOv3's head X is [N, A * (5 + classes), H, W]: per anchor, (tx, ty, tw, th, objectness,
class logits) on an H x W grid. yolov3_loss matches each ground-truth box to the anchor (of
all anchors) whose shape fits it best; when that anchor is among `anchor_mask`, the box's
cell there is a positive: location (sigmoid cross entropy on tx, ty, L1 on tw, th, weighted by
(2 - w * h) * score), class and objectness losses. A prediction that overlaps some ground truth
by more than ignore_thresh has no objectness loss; every other cell is a negative. The loss is
computed on the host in float64 (the grid is small), as fluid computes it on the CPU.
"""
from __future__ import annotations

import numpy as np

from .crf import host
from .registry import kernel


def _sigmoid(v):
    return 0.5 * (1.0 + np.tanh(0.5 * v))  # 1 / (1 + e^-v) without overflowing


def _sce(v, label):
    """Sigmoid cross entropy of logit v against a (soft) label, in its stable form."""
    return np.maximum(v, 0.0) - v * label + np.log1p(np.exp(-np.abs(v)))


@np.errstate(over="ignore", invalid="ignore")
def _iou_centre(ax, ay, aw, ah, bx, by, bw, bh):
    """IoU of boxes given as centre and size (broadcasting), as fluid's CalcBoxIoU (an
    untrained head's exp(tw) may overflow to inf: its IoU is then nan, matching nothing)."""
    iw = np.minimum(ax + aw / 2, bx + bw / 2) - np.maximum(ax - aw / 2, bx - bw / 2)
    ih = np.minimum(ay + ah / 2, by + bh / 2) - np.maximum(ay - ah / 2, by - bh / 2)
    inter = np.where((iw < 0) | (ih < 0), 0.0, iw * ih)
    return inter / (aw * ah + bw * bh - inter)


def _head(x, anchors_used: int):
    n, _, h, w = x.shape
    return host(x).astype(np.float64).reshape(n, anchors_used, -1, h, w)


@kernel("yolo_box")
@np.errstate(over="ignore", invalid="ignore")
def yolo_box(xp, ins, attrs, want):
    anchors = np.asarray(attrs["anchors"], dtype=np.float64).reshape(-1, 2)
    classes, dtype = attrs["class_num"], ins["X"].dtype
    t = _head(ins["X"], anchors.shape[0])
    n, an, _, h, w = t.shape
    size = host(ins["ImgSize"]).astype(np.float64).reshape(n, 2)
    img_h, img_w = size[:, 0, None, None, None], size[:, 1, None, None, None]
    scale = attrs["scale_x_y"]
    bias = -0.5 * (scale - 1.0)
    input_size = attrs["downsample_ratio"] * h
    conf = _sigmoid(t[:, :, 4])
    keep = conf >= attrs["conf_thresh"]
    col, row = np.arange(w)[None, None, None, :], np.arange(h)[None, None, :, None]
    cx = (col + _sigmoid(t[:, :, 0]) * scale + bias) * img_w / h
    cy = (row + _sigmoid(t[:, :, 1]) * scale + bias) * img_h / h
    bw = np.exp(t[:, :, 2]) * anchors[None, :, 0, None, None] * img_w / input_size
    bh = np.exp(t[:, :, 3]) * anchors[None, :, 1, None, None] * img_h / input_size
    boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=-1)
    if attrs["clip_bbox"]:
        boxes[..., 0:2] = np.maximum(boxes[..., 0:2], 0.0)
        boxes[..., 2] = np.minimum(boxes[..., 2], img_w - 1)
        boxes[..., 3] = np.minimum(boxes[..., 3], img_h - 1)
    scores = conf[:, :, None] * _sigmoid(t[:, :, 5:5 + classes])  # [n, an, C, h, w]
    boxes = np.where(keep[..., None], boxes, 0.0).reshape(n, an * h * w, 4)
    scores = np.where(keep[:, :, None], scores, 0.0).transpose(0, 1, 3, 4, 2)
    return {"Boxes": xp.asarray(boxes, dtype=dtype),
            "Scores": xp.asarray(scores.reshape(n, an * h * w, classes), dtype=dtype)}


class _Yolo:
    """The parts of yolov3_loss its gradient needs again: the positives and the masks."""

    def __init__(self, ins, attrs):
        self.anchors = np.asarray(attrs["anchors"], dtype=np.float64).reshape(-1, 2)
        self.mask = list(attrs["anchor_mask"])
        self.classes = attrs["class_num"]
        self.t = _head(ins["X"], len(self.mask))
        n, m, _, h, w = self.t.shape
        self.input_size = attrs["downsample_ratio"] * h
        self.box = host(ins["GTBox"]).astype(np.float64).reshape(n, -1, 4)
        self.label = host(ins["GTLabel"]).astype(np.int64).reshape(n, -1)
        b = self.box.shape[1]
        score = ins.get("GTScore")
        self.score = np.ones((n, b)) if score is None else host(score).astype(
            np.float64).reshape(n, b)
        self.valid = (self.box[..., 2] >= 1e-6) & (self.box[..., 3] >= 1e-6)
        smooth = min(1.0 / self.classes, 1.0 / 40) if attrs["use_label_smooth"] else 0.0
        self.pos_label, self.neg_label = 1.0 - smooth, smooth

    def positives(self):
        """(image, mask index, gj, gi, gt index, best anchor) of every matched ground truth,
        and GTMatchMask [n, b]."""
        n, _, _, h, w = self.t.shape
        match = np.full(self.valid.shape, -1, dtype=np.int32)
        found = []
        aw, ah = self.anchors[:, 0] / self.input_size, self.anchors[:, 1] / self.input_size
        for i, t in zip(*np.nonzero(self.valid)):
            gx, gy, gw, gh = self.box[i, t]
            ious = _iou_centre(0.0, 0.0, aw, ah, 0.0, 0.0, gw, gh)
            best = int(np.argmax(ious)) if ious.max() > 0 else 0  # first best, as fluid's '>'
            m = self.mask.index(best) if best in self.mask else -1
            match[i, t] = m
            if m >= 0:
                found.append((i, m, int(gy * h), int(gx * w), t, best))
        return found, match

    @np.errstate(over="ignore")
    def objectness_mask(self, ignore_thresh: float, scale: float, found) -> np.ndarray:
        n, m, _, h, w = self.t.shape
        bias = -0.5 * (scale - 1.0)
        col, row = np.arange(w)[None, None, :], np.arange(h)[None, :, None]
        an = self.anchors[self.mask]
        px = (col + _sigmoid(self.t[:, :, 0]) * scale + bias) / h
        py = (row + _sigmoid(self.t[:, :, 1]) * scale + bias) / h
        pw = np.exp(self.t[:, :, 2]) * an[None, :, 0, None, None] / self.input_size
        ph = np.exp(self.t[:, :, 3]) * an[None, :, 1, None, None] / self.input_size
        obj = np.zeros((n, m, h, w))
        for i in range(n):
            gts = self.box[i][self.valid[i]]
            if gts.size:
                g = [gts[:, k, None, None, None] for k in range(4)]
                best = _iou_centre(px[i][None], py[i][None], pw[i][None], ph[i][None],
                                   *g).max(axis=0)
                obj[i][best > ignore_thresh] = -1.0
        for i, mi, gj, gi, t, _ in found:
            obj[i, mi, gj, gi] = self.score[i, t]
        return obj

    def box_terms(self, i, mi, gj, gi, t, best):
        """The positive's logits slice, its location targets and its weights."""
        n, _, _, h, w = self.t.shape
        gx, gy, gw, gh = self.box[i, t]
        target = np.array([gx * w - gi, gy * h - gj,
                           np.log(gw * self.input_size / self.anchors[best, 0]),
                           np.log(gh * self.input_size / self.anchors[best, 1])])
        labels = np.full(self.classes, self.neg_label)
        labels[self.label[i, t]] = self.pos_label
        weight = (2.0 - gw * gh) * self.score[i, t]
        return target, labels, weight


@kernel("yolov3_loss")
def yolov3_loss(xp, ins, attrs, want):
    y = _Yolo(ins, attrs)
    found, match = y.positives()
    obj = y.objectness_mask(attrs["ignore_thresh"], attrs["scale_x_y"], found)
    t = y.t
    loss = np.zeros(t.shape[0])
    for i, mi, gj, gi, gt, best in found:
        target, labels, weight = y.box_terms(i, mi, gj, gi, gt, best)
        v = t[i, mi, :, gj, gi]
        loss[i] += weight * (_sce(v[0], target[0]) + _sce(v[1], target[1])
                             + abs(v[2] - target[2]) + abs(v[3] - target[3]))
        loss[i] += y.score[i, gt] * _sce(v[5:5 + y.classes], labels).sum()
    conf = t[:, :, 4]
    obj_loss = np.where(obj > 1e-5, _sce(conf, 1.0) * obj, np.where(obj > -0.5, _sce(conf, 0.0),
                                                                    0.0))
    loss += obj_loss.sum(axis=(1, 2, 3))
    dtype = ins["X"].dtype
    return {"Loss": xp.asarray(loss, dtype=dtype), "ObjectnessMask": xp.asarray(obj, dtype=dtype),
            "GTMatchMask": xp.asarray(match)}


@kernel("yolov3_loss_grad")
def yolov3_loss_grad(xp, ins, attrs, want):
    """The gradient of the loss above, the masks fixed (they move only where a prediction's
    overlap crosses ignore_thresh). Where two ground truths are positives of one cell and
    anchor, the location and class gradient there is the last one's alone, although the loss
    counts both: fluid 1.8's kernel writes (not adds) them, and programs train as in fluid."""
    y = _Yolo(ins, attrs)
    found, _ = y.positives()
    obj = host(ins["ObjectnessMask"]).astype(np.float64)
    dl = host(ins["Loss@GRAD"]).astype(np.float64).reshape(-1)
    t = y.t
    d = np.zeros_like(t)
    for i, mi, gj, gi, gt, best in found:
        target, labels, weight = y.box_terms(i, mi, gj, gi, gt, best)
        v = t[i, mi, :, gj, gi]
        d[i, mi, 0:2, gj, gi] = (_sigmoid(v[0:2]) - target[0:2]) * weight * dl[i]
        d[i, mi, 2:4, gj, gi] = np.where(v[2:4] > target[2:4], 1.0, -1.0) * weight * dl[i]
        d[i, mi, 5:5 + y.classes, gj, gi] = ((_sigmoid(v[5:5 + y.classes]) - labels)
                                             * y.score[i, gt] * dl[i])
    p = _sigmoid(t[:, :, 4])
    d[:, :, 4] = np.where(obj > 1e-5, (p - 1.0) * obj, np.where(obj > -0.5, p, 0.0)) * dl[
        :, None, None, None]
    return {"X@GRAD": xp.asarray(d.reshape(ins["X"].shape), dtype=ins["X"].dtype)}


@kernel("anchor_generator")
def anchor_generator(xp, ins, attrs, want):
    _, _, h, w = ins["Input"].shape
    sw, sh = attrs["stride"]
    offset = attrs["offset"]
    sizes = []
    for ratio in attrs["aspect_ratios"]:  # fluid's order: ratios outer, sizes inner
        base_w = np.round(np.sqrt(sw * sh / ratio))
        base_h = np.round(base_w * ratio)
        for size in attrs["anchor_sizes"]:
            sizes.append((size / sw * base_w, size / sh * base_h))
    aw, ah = (np.array(v)[None, None, :] for v in zip(*sizes))
    cx = (np.arange(w) * sw + offset * (sw - 1))[None, :, None]
    cy = (np.arange(h) * sh + offset * (sh - 1))[:, None, None]
    anchors = np.stack(np.broadcast_arrays(cx - 0.5 * (aw - 1), cy - 0.5 * (ah - 1),
                                           cx + 0.5 * (aw - 1), cy + 0.5 * (ah - 1)), axis=-1)
    var = np.broadcast_to(np.asarray(attrs["variances"]), anchors.shape)
    dtype = ins["Input"].dtype
    return {"Anchors": xp.asarray(anchors, dtype=dtype),
            "Variances": xp.asarray(np.ascontiguousarray(var), dtype=dtype)}


@kernel("box_decoder_and_assign")
def box_decoder_and_assign(xp, ins, attrs, want):
    prior = host(ins["PriorBox"]).astype(np.float64)
    var = host(ins["PriorBoxVar"]).astype(np.float64).reshape(4)
    target = host(ins["TargetBox"]).astype(np.float64)
    score = host(ins["BoxScore"]).astype(np.float64)
    n, classes = score.shape
    pw = prior[:, 2] - prior[:, 0] + 1
    ph = prior[:, 3] - prior[:, 1] + 1
    pcx, pcy = prior[:, 0] + pw / 2, prior[:, 1] + ph / 2
    t = target.reshape(n, classes, 4)
    clip = attrs["box_clip"]
    cx = var[0] * t[..., 0] * pw[:, None] + pcx[:, None]
    cy = var[1] * t[..., 1] * ph[:, None] + pcy[:, None]
    bw = np.exp(np.minimum(var[2] * t[..., 2], clip)) * pw[:, None]
    bh = np.exp(np.minimum(var[3] * t[..., 3], clip)) * ph[:, None]
    decoded = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2 - 1, cy + bh / 2 - 1], axis=-1)
    # the best-scoring class other than the background (class 0) takes the box; none scoring
    # above -1 (or a single class) keeps the prior
    best = np.full(n, -1)
    if classes > 1:
        cand = np.where(score[:, 1:] > -1, score[:, 1:], -np.inf)
        has = np.isfinite(cand).any(axis=1)
        best = np.where(has, cand.argmax(axis=1) + 1, -1)
    assigned = np.where((best > 0)[:, None], decoded[np.arange(n), np.maximum(best, 0)], prior)
    dtype = ins["TargetBox"].dtype
    return {"DecodeBox": xp.asarray(decoded.reshape(n, classes * 4), dtype=dtype),
            "OutputAssignBox": xp.asarray(assigned, dtype=dtype)}


@kernel("polygon_box_transform")
def polygon_box_transform(xp, ins, attrs, want):
    """Offsets to vertex coordinates: even channels x = 4 * column - offset, odd channels
    y = 4 * row - offset (the geometry map is a quarter of the image)."""
    x = ins["Input"]
    _, c, h, w = x.shape
    col = xp.arange(w, dtype=x.dtype)[None, None, None, :] * 4
    row = xp.arange(h, dtype=x.dtype)[None, None, :, None] * 4
    even = (xp.arange(c) % 2 == 0)[None, :, None, None]
    return {"Output": xp.where(even, col, row) - x}
