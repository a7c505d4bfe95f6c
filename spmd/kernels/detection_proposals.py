"""Kernels: generate_proposals, distribute_fpn_proposals, collect_fpn_proposals and
retinanet_detection_output (the ops are described in spmd/ops/detection_proposals.py; the
training-target ops are in detection_targets.py). Host code: proposals are selected by
sorting and greedy NMS, per image, as fluid's CPU kernels do.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from .crf import host
from .registry import kernel

BBOX_CLIP = math.log(1000.0 / 16.0)  # fluid's kBBoxClipDefault: the largest exp() of a delta


def box_area(boxes):
    """fluid's unnormalized BBoxArea: (w + 1) * (h + 1) in pixels, 0 for an inverted box."""
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    return np.where((w < 0) | (h < 0), 0.0, (w + 1) * (h + 1))


def nms(boxes, scores, thresh: float, eta: float = 1.0, first_on_ties: bool = False):
    """Greedy NMS as fluid's: highest score first (equal scores: the later index first, as
    generate_proposals; the earlier with first_on_ties, as retinanet_detection_output), a box
    kept while its overlap (pixel areas, +1) with every kept one is <= the threshold, which
    shrinks by eta after each kept box while above 0.5. Returns the kept indices in order."""
    if first_on_ties:
        order = np.argsort(-np.asarray(scores), kind="stable")
    else:
        order = np.argsort(scores, kind="stable")[::-1]
    area = box_area(boxes)
    kept: list[int] = []
    limit = thresh
    for i in order:
        b = boxes[i]
        ok = True
        for j in kept:
            k = boxes[j]
            if k[0] > b[2] or k[2] < b[0] or k[1] > b[3] or k[3] < b[1]:
                continue
            iw = min(b[2], k[2]) - max(b[0], k[0]) + 1
            ih = min(b[3], k[3]) - max(b[1], k[1]) + 1
            inter = iw * ih
            if inter / (area[i] + area[j] - inter) > limit:
                ok = False
                break
        if ok:
            kept.append(int(i))
            if eta < 1 and limit > 0.5:
                limit *= eta
    return kept


def decode(anchors, deltas, variances):
    """Anchor + variance-scaled deltas -> boxes (x1, y1, x2, y2), pixel (+1) convention."""
    aw = anchors[:, 2] - anchors[:, 0] + 1.0
    ah = anchors[:, 3] - anchors[:, 1] + 1.0
    acx, acy = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    cx = variances[:, 0] * deltas[:, 0] * aw + acx
    cy = variances[:, 1] * deltas[:, 1] * ah + acy
    w = np.exp(np.minimum(variances[:, 2] * deltas[:, 2], BBOX_CLIP)) * aw
    h = np.exp(np.minimum(variances[:, 3] * deltas[:, 3], BBOX_CLIP)) * ah
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1], axis=1)


def _one_image(scores, deltas, info, anchors, variances, attrs):
    order = np.argsort(-scores, kind="stable")
    pre = attrs["pre_nms_topN"]
    if 0 < pre < order.size:
        order = order[:pre]
    boxes = decode(anchors[order], deltas[order], variances[order])
    height, width, scale = info
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0.0, width - 1)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0.0, height - 1)
    score = scores[order]
    # keep boxes at least min_size (in the original image's pixels) whose centre is inside
    min_size = max(attrs["min_size"], 1.0)
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    keep = ((w / scale + 1 >= min_size) & (h / scale + 1 >= min_size)
            & (boxes[:, 0] + (w + 1) / 2 <= width) & (boxes[:, 1] + (h + 1) / 2 <= height))
    if not keep.any():
        return np.zeros((1, 4)), np.zeros(1)  # fluid's answer for an image with none left
    boxes, score = boxes[keep], score[keep]
    if attrs["nms_thresh"] > 0:
        kept = nms(boxes, score, attrs["nms_thresh"], attrs["eta"])
        post = attrs["post_nms_topN"]
        if 0 < post < len(kept):
            kept = kept[:post]
        boxes, score = boxes[kept], score[kept]
    return boxes, score


@kernel("generate_proposals")
def generate_proposals(xp, ins, attrs, want):
    scores = host(ins["Scores"]).astype(np.float64)
    n, a, h, w = scores.shape
    deltas = host(ins["BboxDeltas"]).astype(np.float64)
    info = host(ins["ImInfo"]).astype(np.float64).reshape(n, 3)
    anchors = host(ins["Anchors"]).astype(np.float64).reshape(-1, 4)
    variances = host(ins["Variances"]).astype(np.float64).reshape(-1, 4)
    if anchors.shape[0] != a * h * w or variances.shape[0] != anchors.shape[0]:
        raise InvalidArgumentError(
            f"generate_proposals: Anchors and Variances must hold H * W * A = {h * w * a} boxes "
            f"(one per anchor and cell of Scores {list(scores.shape)}), got {anchors.shape[0]} "
            f"and {variances.shape[0]}")
    rois, probs, counts = [], [], []
    for i in range(n):
        # cell-major, anchor-minor: Scores [A, H, W] -> [H, W, A]; deltas [4A, H, W] likewise
        s = scores[i].transpose(1, 2, 0).reshape(-1)
        d = deltas[i].transpose(1, 2, 0).reshape(-1, 4)
        boxes, score = _one_image(s, d, info[i], anchors, variances, attrs)
        rois.append(boxes)
        probs.append(score)
        counts.append(len(score))
    lod = make_lod([[0, *np.cumsum(counts).tolist()]])
    res = {"RpnRois": xp.asarray(np.concatenate(rois), dtype=ins["BboxDeltas"].dtype),
           "RpnRoiProbs": xp.asarray(np.concatenate(probs).reshape(-1, 1),
                                     dtype=ins["Scores"].dtype),
           "RpnRois@LOD": lod, "RpnRoiProbs@LOD": lod}
    if "RpnRoisLod" in want:  # fluid 1.8 gives the offsets past the first (its 'rois num')
        res["RpnRoisLod"] = xp.asarray(np.cumsum(counts).astype(np.int64))
    return res


def lod_offsets(ins, slot: str, op: str, index: int | None = None):
    lod = ins.get(slot + "@LOD")
    if index is not None and lod is not None:
        lod = lod[index]
    if lod is None:
        where = slot if index is None else f"{slot}[{index}]"
        raise InvalidArgumentError(
            f"{op}: {where} carries no LoD (ROIs per image); feed it as a LoDTensor "
            f"(fluid.create_lod_tensor(rois, [[rois per image]], place)) or take it from an op "
            f"that gives one (generate_proposals)")
    return np.asarray(lod[-1], dtype=np.int64)


@kernel("distribute_fpn_proposals")
def distribute_fpn_proposals(xp, ins, attrs, want):
    """Each ROI to the level floor(log2(sqrt(area) / refer_scale) + refer_level), clamped;
    per level the ROIs keep their image order. RestoreIndex[i]: where original ROI i went in
    the levels laid end to end."""
    rois = host(ins["FpnRois"])
    offsets = lod_offsets(ins, "FpnRois", "distribute_fpn_proposals")
    lo, hi = attrs["min_level"], attrs["max_level"]
    scale = np.sqrt(box_area(rois.astype(np.float64)))
    level = np.floor(np.log2(scale / attrs["refer_scale"] + 1e-6) + attrs["refer_level"])
    level = np.clip(level, lo, hi).astype(np.int64)
    image = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    outs, lods, placed = [], [], []
    for lv in range(lo, hi + 1):
        idx = np.nonzero(level == lv)[0]  # already grouped by image, in image order
        outs.append(xp.asarray(rois[idx]))
        counts = np.bincount(image[idx], minlength=offsets.size - 1)
        lods.append(make_lod([[0, *np.cumsum(counts).tolist()]]))
        placed.append(idx)
    restore = np.empty(rois.shape[0], dtype=np.int32)
    restore[np.concatenate(placed)] = np.arange(rois.shape[0], dtype=np.int32)
    return {"MultiFpnRois": outs, "MultiFpnRois@LOD": lods,
            "RestoreIndex": xp.asarray(restore.reshape(-1, 1))}


@kernel("collect_fpn_proposals")
def collect_fpn_proposals(xp, ins, attrs, want):
    """The post_nms_topN highest-scoring ROIs over all levels and images, then grouped by
    image (within one, highest score first)."""
    levels = [host(r) for r in ins["MultiLevelRois"]]
    scores = [host(s).reshape(-1) for s in ins["MultiLevelScores"]]
    rows, score, image = [], [], []
    n_images = None
    for i, (r, s) in enumerate(zip(levels, scores)):
        off = lod_offsets(ins, "MultiLevelRois", "collect_fpn_proposals", i)
        if n_images is not None and off.size - 1 != n_images:
            raise InvalidArgumentError(
                f"collect_fpn_proposals: MultiLevelRois[{i}] holds {off.size - 1} images, "
                f"level 0 {n_images}; every level needs one LoD sequence per image")
        n_images = off.size - 1
        if s.size != r.shape[0]:
            raise InvalidArgumentError(
                f"collect_fpn_proposals: MultiLevelScores[{i}] has {s.size} scores for "
                f"{r.shape[0]} ROIs")
        rows.append(r)
        score.append(s)
        image.append(np.repeat(np.arange(n_images), np.diff(off)))
    rows, score, image = np.concatenate(rows), np.concatenate(score), np.concatenate(image)
    top = np.argsort(-score, kind="stable")[:attrs["post_nms_topN"]]
    top = top[np.argsort(image[top], kind="stable")]
    counts = np.bincount(image[top], minlength=n_images)
    return {"FpnRois": xp.asarray(rows[top]),
            "FpnRois@LOD": make_lod([[0, *np.cumsum(counts).tolist()]])}


def _retina_level(boxes, scores, anchors, threshold, top_k, info):
    """One level of one image: (class, [x1, y1, x2, y2, score]) of its top_k (anchor, class)
    scores above threshold, decoded against the anchors and clipped to the original image."""
    flat = scores.reshape(-1)
    idx = np.nonzero(flat > threshold)[0]
    idx = idx[np.argsort(-flat[idx], kind="stable")]
    if top_k > -1:
        idx = idx[:top_k]
    classes = scores.shape[1]
    a, c = idx // classes, idx % classes
    an, d = anchors[a], boxes[a]
    aw, ah = an[:, 2] - an[:, 0] + 1, an[:, 3] - an[:, 1] + 1
    cx, cy = d[:, 0] * aw + an[:, 0] + aw / 2, d[:, 1] * ah + an[:, 1] + ah / 2
    w, h = np.exp(d[:, 2]) * aw, np.exp(d[:, 3]) * ah
    height, width, scale = info
    height, width = np.round(height / scale), np.round(width / scale)
    box = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1], axis=1) / scale
    box[:, 0::2] = np.clip(box[:, 0::2], 0.0, width - 1)  # fluid: min with the edge, then 0
    box[:, 1::2] = np.clip(box[:, 1::2], 0.0, height - 1)
    return c, np.concatenate([box, flat[idx, None]], axis=1)


@kernel("retinanet_detection_output")
def retinanet_detection_output(xp, ins, attrs, want):
    """Per image: every level's best (anchor, class) scores (the last level's over 0, the
    others' over score_threshold) decoded, greedy NMS per class, the keep_top_k best over
    all classes; rows (label = class + 1, score, x1, y1, x2, y2), LoD by image."""
    levels = list(zip(*(list(map(host, ins[k])) for k in ("BBoxes", "Scores", "Anchors"))))
    info = host(ins["ImInfo"]).astype(np.float64).reshape(-1, 3)
    out, counts = [], []
    for i in range(info.shape[0]):
        per_class: dict[int, list] = {}
        for lv, (b, s, a) in enumerate(levels):
            threshold = attrs["score_threshold"] if lv < len(levels) - 1 else 0.0
            cls, dets = _retina_level(b[i].astype(np.float64), s[i].astype(np.float64),
                                      a.astype(np.float64).reshape(-1, 4), threshold,
                                      attrs["nms_top_k"], info[i])
            for c, det in zip(cls, dets):
                per_class.setdefault(int(c), []).append(det)
        picked = []
        for c in sorted(per_class):
            dets = np.array(per_class[c])
            for k in nms(dets[:, :4], dets[:, 4], attrs["nms_threshold"], attrs["nms_eta"],
                         first_on_ties=True):
                picked.append((dets[k, 4], c, dets[k]))
        picked.sort(key=lambda p: -p[0])  # stable: ties keep class, then NMS order
        picked = picked[:attrs["keep_top_k"]]
        out += [[c + 1, det[4], *det[:4]] for _, c, det in picked]
        counts.append(len(picked))
    rows = np.array(out, dtype=np.float64).reshape(-1, 6)
    return {"Out": xp.asarray(rows, dtype=ins["Scores"][0].dtype),
            "Out@LOD": make_lod([[0, *np.cumsum(counts).tolist()]])}
