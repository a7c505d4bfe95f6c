"""Kernels: multiclass_nms, multiclass_nms2 and matrix_nms (ops in
spmd/ops/detection_nms.py).

Per image and class: the boxes scoring above score_threshold, best first (a stable sort, as
fluid's), at most nms_top_k of them, each kept unless it overlaps a kept one by more than the
(adaptive) threshold; then at most keep_top_k per image by score. The output rows are
[label, score, xmin, ymin, xmax, ymax], classes in ascending order, with one LoD level of
rows per image; when no image keeps anything, fluid's output is the single row [[-1]].
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from .crf import host
from .registry import kernel


def _area(box: np.ndarray, normalized: bool) -> float:
    if box[2] < box[0] or box[3] < box[1]:
        return 0.0
    w, h = box[2] - box[0], box[3] - box[1]
    return w * h if normalized else (w + 1) * (h + 1)


def jaccard(a: np.ndarray, b: np.ndarray, normalized: bool):
    """IoU of two boxes as multiclass_nms computes it (0 when they do not touch)."""
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return a.dtype.type(0)
    norm = 0 if normalized else 1
    iw = min(a[2], b[2]) - max(a[0], b[0]) + norm
    ih = min(a[3], b[3]) - max(a[1], b[1]) + norm
    inter = iw * ih
    return inter / (_area(a, normalized) + _area(b, normalized) - inter)


def nms_one_class(boxes: np.ndarray, scores: np.ndarray, attrs) -> list[int]:
    """The indices kept for one class of one image, in the order NMS kept them."""
    dtype = scores.dtype.type
    thr = dtype(attrs["score_threshold"])
    cand = np.flatnonzero(scores > thr)
    order = cand[np.argsort(-scores[cand], kind="stable")]
    top_k = attrs["nms_top_k"]
    if top_k > -1:
        order = order[:top_k]
    adaptive, eta = dtype(attrs["nms_threshold"]), dtype(attrs["nms_eta"])
    kept: list[int] = []
    for i in order:
        keep = all(jaccard(boxes[i], boxes[j], attrs["normalized"]) <= adaptive for j in kept)
        if keep:
            kept.append(int(i))
            if eta < 1 and adaptive > 0.5:
                adaptive = adaptive * eta
    return kept


def _one_image(boxes, scores, attrs, per_class_boxes: bool):
    """{label: kept indices} for one image. boxes [M, 4] (or [M, C, 4]), scores [C, M]."""
    picked = {}
    for c in range(scores.shape[0]):
        if c == attrs["background_label"]:
            continue
        b = boxes[:, c, :] if per_class_boxes else boxes
        kept = nms_one_class(b, scores[c], attrs)
        picked[c] = sorted(kept) if per_class_boxes else kept
    total = sum(len(v) for v in picked.values())
    keep_top_k = attrs["keep_top_k"]
    if keep_top_k > -1 and total > keep_top_k:
        pairs = [(scores[c][i], c, i) for c in sorted(picked) for i in picked[c]]
        order = sorted(range(len(pairs)), key=lambda k: -pairs[k][0])[:keep_top_k]  # stable
        trimmed: dict[int, list[int]] = {}
        for k in order:
            trimmed.setdefault(pairs[k][1], []).append(pairs[k][2])
        picked = {c: sorted(v) if per_class_boxes else v for c, v in trimmed.items()}
    return picked


def _images(ins, op: str):
    """(boxes, scores [C, M], index offset, per-class boxes) per image, for either layout."""
    boxes, scores = host(ins["BBoxes"]), host(ins["Scores"])
    if scores.ndim == 3:
        m = scores.shape[2]
        return [(boxes[i], scores[i], i * m, False) for i in range(scores.shape[0])]
    lod = ins.get("BBoxes@LOD") or ins.get("Scores@LOD")
    if lod is None:
        raise InvalidArgumentError(
            f"{op}: with Scores [M, C] the boxes of each image come from the LoD of BBoxes "
            f"[M, C, 4]; feed BBoxes as a LoDTensor (one level: boxes per image)")
    off = lod[-1]
    c = scores.shape[1]
    return [(boxes[off[i]:off[i + 1]], scores[off[i]:off[i + 1]].T, int(off[i]) * c, True)
            for i in range(off.size - 1)]


def _nms(xp, ins, attrs, with_index: bool):
    rows, index, starts = [], [], [0]
    for boxes, scores, offset, per_class in _images(ins, "multiclass_nms"):
        picked = _one_image(boxes, scores, attrs, per_class)
        c_count = scores.shape[0]
        for c in sorted(picked):
            for i in picked[c]:
                box = boxes[i, c] if per_class else boxes[i]
                rows.append(np.concatenate([[c, scores[c][i]], box]))
                index.append(offset + (i * c_count + c if per_class else i))
        starts.append(len(rows))
    dtype = host(ins["Scores"]).dtype
    width = host(ins["BBoxes"]).shape[-1] + 2
    if rows:
        out = np.asarray(rows, dtype=dtype).reshape(-1, width)
    elif with_index:
        out = np.zeros((0, width), dtype=dtype)
    else:
        out, starts = np.full((1, 1), -1, dtype=dtype), [0, 1]
    res = {"Out": xp.asarray(out), "Out@LOD": make_lod([starts])}
    if with_index:
        res["Index"] = xp.asarray(np.asarray(index, dtype=np.int32).reshape(-1, 1))
        res["Index@LOD"] = make_lod([starts])
    return res


@kernel("multiclass_nms")
def multiclass_nms(xp, ins, attrs, want):
    return _nms(xp, ins, attrs, with_index=False)


@kernel("multiclass_nms2")
def multiclass_nms2(xp, ins, attrs, want):
    return _nms(xp, ins, attrs, with_index=True)


def _matrix_one_class(boxes, scores, attrs):
    """Matrix NMS of one class (SOLOv2): each candidate's score decays by its overlap with
    every better-scoring candidate, relative to how much that one was itself covered;
    returns (indices, decayed scores) above post_threshold, best first."""
    dtype = scores.dtype.type
    cand = np.flatnonzero(scores > dtype(attrs["score_threshold"]))
    order = cand[np.argsort(-scores[cand], kind="stable")]
    if attrs["nms_top_k"] > -1:
        order = order[:attrs["nms_top_k"]]
    n = order.size
    iou = np.zeros((n, n), dtype=scores.dtype)
    for i in range(1, n):
        for j in range(i):
            iou[i, j] = jaccard(boxes[order[i]], boxes[order[j]], attrs["normalized"])
    covered = iou.max(axis=1) if n else np.zeros(0, iou.dtype)  # by better-scoring ones
    post, sigma = dtype(attrs["post_threshold"]), dtype(attrs["gaussian_sigma"])
    kept, decayed = [], []
    for i in range(n):
        decay = dtype(1.0)
        for j in range(i):
            if attrs["use_gaussian"]:
                d = np.exp((covered[j] * covered[j] - iou[i, j] * iou[i, j]) * sigma)
            else:
                d = (dtype(1.0) - iou[i, j]) / (dtype(1.0) - covered[j])
            decay = min(decay, d)
        score = decay * scores[order[i]]
        if score > post:
            kept.append(int(order[i]))
            decayed.append(score)
    return kept, decayed


@kernel("matrix_nms")
def matrix_nms(xp, ins, attrs, want):
    boxes, scores = host(ins["BBoxes"]), host(ins["Scores"])
    rows, index, starts, counts = [], [], [0], []
    for i in range(scores.shape[0]):
        found = []  # (decayed score, class, box index), classes in order
        for c in range(scores.shape[1]):
            if c == attrs["background_label"]:
                continue
            kept, decayed = _matrix_one_class(boxes[i], scores[i, c], attrs)
            found += [(s, c, k) for k, s in zip(kept, decayed)]
        order = sorted(range(len(found)), key=lambda k: -found[k][0])  # stable
        if attrs["keep_top_k"] > -1:
            order = order[:attrs["keep_top_k"]]
        for k in order:
            score, c, b = found[k]
            rows.append(np.concatenate([[c, score], boxes[i, b]]))
            index.append(i * scores.shape[2] + b)
        starts.append(len(rows))
        counts.append(len(order))
    out = np.asarray(rows, dtype=scores.dtype).reshape(-1, boxes.shape[2] + 2)
    res = {"Out": xp.asarray(out), "Out@LOD": make_lod([starts]),
           "Index": xp.asarray(np.asarray(index, dtype=np.int32).reshape(-1, 1)),
           "Index@LOD": make_lod([starts])}
    if "RoisNum" in want:
        res["RoisNum"] = xp.asarray(np.asarray(counts, dtype=np.int32))
    return res
