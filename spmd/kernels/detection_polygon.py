"""Kernel: locality_aware_nms (EAST's text detector; the op is described in
spmd/ops/detection_polygon.py), and the polygon overlap it needs.

Per class, consecutive boxes that overlap more than nms_threshold are merged as they come
(the coordinates averaged by score, the scores added), then the merged boxes above
score_threshold go through greedy NMS. As in fluid 1.8, the merges write into the image's
boxes and scores themselves, so a later class sees the boxes an earlier class merged, and the
output rows carry the merged values. Polygon overlap: the intersection of two convex
polygons by clipping one against the other (fluid clips with gpc, which also takes concave
ones; EAST's quadrilaterals are convex).
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from .crf import host
from .registry import kernel


def polygon_area(p) -> float:
    x, y = p[:, 0], p[:, 1]
    return abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))) / 2


def _cross(u, v) -> float:
    return float(u[0] * v[1] - u[1] * v[0])


def _clip(subject: list, clip: np.ndarray) -> list:
    """Sutherland-Hodgman: the part of polygon `subject` inside convex polygon `clip`."""
    sign = 1.0 if _cross(clip[1] - clip[0], clip[2] - clip[1]) >= 0 else -1.0
    out = subject
    for i in range(len(clip)):
        a, b = clip[i], clip[(i + 1) % len(clip)]
        side = [sign * _cross(b - a, p - a) for p in out]
        nxt = []
        for j, p in enumerate(out):
            q, sp, sq = out[(j + 1) % len(out)], side[j], side[(j + 1) % len(out)]
            if sp >= 0:
                nxt.append(p)
            if (sp >= 0) != (sq >= 0):
                nxt.append(p + (q - p) * (sp / (sp - sq)))
        out = nxt
        if not out:
            break
    return out


def polygon_iou(a, b) -> float:
    pa, pb = np.asarray(a, float).reshape(-1, 2), np.asarray(b, float).reshape(-1, 2)
    area_a, area_b = polygon_area(pa), polygon_area(pb)
    inter_poly = _clip(list(pa), pb)
    inter = polygon_area(np.array(inter_poly)) if len(inter_poly) >= 3 else 0.0
    if area_a == 0 or area_b == 0 or inter == 0:
        return 0.0
    return inter / (area_a + area_b - inter)


def box_iou(a, b, normalized: bool) -> float:
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    norm = 0.0 if normalized else 1.0
    iw = min(a[2], b[2]) - max(a[0], b[0]) + norm
    ih = min(a[3], b[3]) - max(a[1], b[1]) + norm

    def area(r):
        if r[2] < r[0] or r[3] < r[1]:
            return 0.0
        return (r[2] - r[0] + norm) * (r[3] - r[1] + norm)

    return iw * ih / (area(a) + area(b) - iw * ih)


def _select(boxes, sc, attrs, overlap) -> list[int]:
    """One class: merge neighbours in place, then NMS; the kept indices in order."""
    thresh = attrs["nms_threshold"]
    keep_slot = np.zeros(len(sc), dtype=bool)
    index = -1
    for k in range(len(sc)):
        if index > -1 and overlap(boxes[k], boxes[index]) > thresh:
            boxes[index] = (boxes[k] * sc[k] + boxes[index] * sc[index]) / (sc[k] + sc[index])
            sc[index] += sc[k]
        else:
            if index > -1:
                keep_slot[index] = True
            index = k
    if index > -1:
        keep_slot[index] = True
    cand = [k for k in range(len(sc)) if sc[k] > attrs["score_threshold"] and keep_slot[k]]
    cand.sort(key=lambda k: -sc[k])  # stable: equal scores keep index order
    if attrs["nms_top_k"] > -1:
        cand = cand[:attrs["nms_top_k"]]
    kept, limit = [], thresh
    for k in cand:
        if all(overlap(boxes[k], boxes[j]) <= limit for j in kept):
            kept.append(k)
            if attrs["nms_eta"] < 1 and limit > 0.5:
                limit *= attrs["nms_eta"]
    return kept


@kernel("locality_aware_nms")
def locality_aware_nms(xp, ins, attrs, want):
    all_boxes = host(ins["BBoxes"]).astype(np.float64)
    all_scores = host(ins["Scores"]).astype(np.float64)
    size = all_boxes.shape[2]
    if size == 4:
        def overlap(a, b):
            return box_iou(a, b, attrs["normalized"])
    else:
        overlap = polygon_iou
    rows, counts = [], []
    for i in range(all_boxes.shape[0]):
        boxes, scores = all_boxes[i].copy(), all_scores[i].copy()
        picked = {c: _select(boxes, scores[c], attrs, overlap)
                  for c in range(scores.shape[0]) if c != attrs["background_label"]}
        total = sum(len(v) for v in picked.values())
        if -1 < attrs["keep_top_k"] < total:
            pairs = sorted(((scores[c, k], c, k) for c in sorted(picked) for k in picked[c]),
                           key=lambda p: -p[0])[:attrs["keep_top_k"]]
            picked = {}
            for _, c, k in pairs:
                picked.setdefault(c, []).append(k)
        image = [[c, scores[c, k], *boxes[k]] for c in sorted(picked) for k in picked[c]]
        rows += image
        counts.append(len(image))
    dtype = ins["BBoxes"].dtype
    if not rows:  # fluid's answer when nothing is kept: one row [-1]
        return {"Out": xp.asarray(np.full((1, 1), -1.0), dtype=dtype),
                "Out@LOD": make_lod([[0, 1]])}
    return {"Out": xp.asarray(np.array(rows).reshape(-1, size + 2), dtype=dtype),
            "Out@LOD": make_lod([[0, *np.cumsum(counts).tolist()]])}
