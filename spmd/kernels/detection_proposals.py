"""Kernels: generate_proposals, distribute_fpn_proposals, collect_fpn_proposals (the ops are
described in spmd/ops/detection_proposals.py). Host code: proposals are selected by sorting
and greedy NMS, per image, as fluid's CPU kernels do.
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


def _offsets(ins, slot: str, op: str, index: int | None = None):
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
    offsets = _offsets(ins, "FpnRois", "distribute_fpn_proposals")
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
        off = _offsets(ins, "MultiLevelRois", "collect_fpn_proposals", i)
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


def overlaps(a, b):
    """[len(a), len(b)] IoU in pixels (+1), as fluid's BboxOverlaps."""
    iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]) + 1
    ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]) + 1
    inter = np.maximum(iw, 0) * np.maximum(ih, 0)
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return np.where(inter == 0, 0.0, inter / np.where(union == 0, 1.0, union))


def box_to_delta(ex, gt):
    """The deltas that decode `ex` into `gt` (pixel widths, no variances)."""
    ew, eh = ex[:, 2] - ex[:, 0] + 1, ex[:, 3] - ex[:, 1] + 1
    gw, gh = gt[:, 2] - gt[:, 0] + 1, gt[:, 3] - gt[:, 1] + 1
    return np.stack([(gt[:, 0] + 0.5 * gw - ex[:, 0] - 0.5 * ew) / ew,
                     (gt[:, 1] + 0.5 * gh - ex[:, 1] - 0.5 * eh) / eh,
                     np.log(gw / ew), np.log(gh / eh)], axis=1)


def reservoir(inds: list, num: int, rng) -> list:
    """fluid's ReservoirSampling: keep `num` of inds, uniformly when rng (else the first)."""
    inds = list(inds)
    if len(inds) > num:
        if rng is not None:
            for i in range(num, len(inds)):
                r = int(np.floor(rng.uniform() * i))
                if r < num:
                    inds[r], inds[i] = inds[i], inds[r]
        inds = inds[:num]
    return inds


def _rpn_labels(ov, attrs, rng):
    """fluid's ScoreAssign on one image's [anchors, gts] overlaps: (fg anchors the location
    targets use, their inside weights, fg then bg anchors the scores use, their labels)."""
    a2g = ov.max(axis=1)
    g2a = ov.max(axis=0)
    batch, frac = attrs["rpn_batch_size_per_im"], attrs["rpn_fg_fraction"]
    sampled = frac > 0 and batch > 0
    # a gt's best anchors (to 1e-5) and anchors over the positive overlap are foreground
    fg = np.nonzero((np.abs(ov - g2a[None, :]) < 1e-5).any(axis=1)
                    | (a2g >= attrs["rpn_positive_overlap"]))[0].tolist()
    if sampled:
        fg = reservoir(fg, int(frac * batch), rng)
    label = np.full(ov.shape[0], -1)
    label[fg] = 1
    bg = np.nonzero(a2g < attrs["rpn_negative_overlap"])[0].tolist()
    if sampled:
        bg = reservoir(bg, batch - len(fg), rng)
    loc, weight = [], []
    for i in bg:  # a sampled background that was foreground keeps a zero-weight location row
        if label[i] == 1:
            loc.append(fg[0])
            weight.append(0.0)
        label[i] = 0
    fg_final, bg_final = np.nonzero(label == 1)[0], np.nonzero(label == 0)[0]
    loc += fg_final.tolist()
    weight += [1.0] * fg_final.size
    return np.array(loc, dtype=np.int64), np.array(weight), np.concatenate([fg_final, bg_final]), \
        np.concatenate([np.ones(fg_final.size), np.zeros(bg_final.size)])


def _anchor_targets(ins, attrs, op: str, straddle: float, rng, labels=None):
    """Per image: anchors inside (straddle < 0: all), the non-crowd ground truth scaled by
    im_info, fluid's ScoreAssign; the targets of the images laid end to end (indices offset
    by anchors * image), their LoDs, and each image's foreground count. With `labels` (one
    class per box) the foreground's label is its box's class instead of 1."""
    anchors = host(ins["Anchor"]).astype(np.float64).reshape(-1, 4)
    gts = host(ins["GtBoxes"]).astype(np.float64)
    crowd = host(ins["IsCrowd"]).reshape(-1)
    info = host(ins["ImInfo"]).astype(np.float64).reshape(-1, 3)
    off = _offsets(ins, "GtBoxes", op)
    if off.size - 1 != info.shape[0]:
        raise InvalidArgumentError(
            f"{op}: GtBoxes' LoD holds {off.size - 1} images, ImInfo {info.shape[0]}; give "
            f"one LoD sequence of boxes per image")
    parts = {k: [] for k in ("loc", "score", "bbox", "label", "weight")}
    fg_counts = []
    for i in range(info.shape[0]):
        height, width, scale = info[i]
        t = straddle
        if t >= 0:
            inside = np.nonzero((anchors[:, 0] >= -t) & (anchors[:, 1] >= -t)
                                & (anchors[:, 2] < width + t) & (anchors[:, 3] < height + t))[0]
        else:
            inside = np.arange(anchors.shape[0])
        keep = crowd[off[i]:off[i + 1]] == 0
        gt = gts[off[i]:off[i + 1]][keep] * scale
        if gt.shape[0] == 0 or inside.size == 0:
            raise InvalidArgumentError(
                f"{op}: image {i} has {gt.shape[0]} non-crowd ground-truth boxes and "
                f"{inside.size} anchors inside it; each image needs at least one of both")
        ov = overlaps(anchors[inside], gt)
        loc, weight, score, label = _rpn_labels(ov, attrs, rng)
        best = ov.argmax(axis=1)
        if labels is not None:
            classes = labels[off[i]:off[i + 1]][keep]
            label = np.where(label > 0, classes[best[score]], 0)
        parts["bbox"].append(box_to_delta(anchors[inside][loc], gt[best[loc]]))
        parts["loc"].append(inside[loc] + i * anchors.shape[0])
        parts["score"].append(inside[score] + i * anchors.shape[0])
        parts["label"].append(label)
        parts["weight"].append(np.repeat(weight[:, None], 4, axis=1))
        fg_counts.append(int(weight.sum()))
    loc_lod = make_lod([[0, *np.cumsum([p.size for p in parts["loc"]]).tolist()]])
    score_lod = make_lod([[0, *np.cumsum([p.size for p in parts["score"]]).tolist()]])
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    xp_dtype = ins["Anchor"].dtype
    return cat, loc_lod, score_lod, fg_counts, xp_dtype


def _target_outputs(xp, cat, loc_lod, score_lod, dtype) -> dict:
    return {"LocationIndex": xp.asarray(cat["loc"].astype(np.int32)),
            "ScoreIndex": xp.asarray(cat["score"].astype(np.int32)),
            "TargetBBox": xp.asarray(cat["bbox"].reshape(-1, 4), dtype=dtype),
            "TargetLabel": xp.asarray(cat["label"].astype(np.int32).reshape(-1, 1)),
            "BBoxInsideWeight": xp.asarray(cat["weight"].reshape(-1, 4), dtype=dtype),
            "LocationIndex@LOD": loc_lod, "TargetBBox@LOD": loc_lod,
            "BBoxInsideWeight@LOD": loc_lod, "ScoreIndex@LOD": score_lod,
            "TargetLabel@LOD": score_lod}


@kernel("rpn_target_assign", context=True)
def rpn_target_assign(xp, ins, attrs, want, ctx):
    rng = ctx.rng if attrs["use_random"] else None
    cat, loc_lod, score_lod, _, dtype = _anchor_targets(
        ins, attrs, "rpn_target_assign", attrs["rpn_straddle_thresh"], rng)
    return _target_outputs(xp, cat, loc_lod, score_lod, dtype)


@kernel("retinanet_target_assign")
def retinanet_target_assign(xp, ins, attrs, want):
    """rpn_target_assign's assignment with every anchor, none sampled away, the foreground
    labelled with its box's class; ForegroundNumber: each image's foreground count + 1 (as
    fluid 1.8, which keeps the focal loss' normalizer above 0)."""
    score_attrs = {"rpn_batch_size_per_im": 0, "rpn_fg_fraction": 0.0,
                   "rpn_positive_overlap": attrs["positive_overlap"],
                   "rpn_negative_overlap": attrs["negative_overlap"]}
    labels = host(ins["GtLabels"]).reshape(-1).astype(np.int64)
    cat, loc_lod, score_lod, fg, dtype = _anchor_targets(
        ins, score_attrs, "retinanet_target_assign", -1.0, None, labels)
    res = _target_outputs(xp, cat, loc_lod, score_lod, dtype)
    res["ForegroundNumber"] = xp.asarray(np.array(fg, dtype=np.int32).reshape(-1, 1) + 1)
    res["ForegroundNumber@LOD"] = make_lod([list(range(len(fg) + 1))])
    return res


def _sample(inds: list, mapped: list | None, num: int, rng):
    """Reservoir sampling that moves `mapped` (the matched ground truth) along with inds."""
    inds, mapped = list(inds), None if mapped is None else list(mapped)
    if rng is not None and len(inds) > num:
        for i in range(num, len(inds)):
            r = int(np.floor(rng.uniform() * i))
            if r < num:
                inds[r], inds[i] = inds[i], inds[r]
                if mapped is not None:
                    mapped[r], mapped[i] = mapped[i], mapped[r]
    return inds[:num], None if mapped is None else mapped[:num]


def _fast_rcnn_image(rois, gt, classes, crowd, scale, attrs, rng):
    """One image's sampled (rois, labels, targets, weights) as fluid's SampleRoisForOneImage:
    candidates are the ground truth (crowd boxes left out) then the proposals in the original
    image's pixels, foreground over fg_thresh (matched to its best ground truth), background
    in [bg_thresh_lo, bg_thresh_hi), each reservoir-sampled."""
    boxes = np.concatenate([gt, rois / scale])
    ov = overlaps(boxes, gt)
    best = ov.max(axis=1)
    fg, mapped, bg = [], [], []
    for i in range(boxes.shape[0]):
        top = -1.0 if i < gt.shape[0] and crowd[i] else best[i]
        if top >= attrs["fg_thresh"]:
            fg.append(i)
            mapped.append(int(np.nonzero(np.abs(top - ov[i]) < 1e-5)[0][0]))
        elif attrs["bg_thresh_lo"] <= top < attrs["bg_thresh_hi"]:
            bg.append(i)
    per_im = attrs["batch_size_per_im"]
    fg, mapped = _sample(fg, mapped, min(int(np.floor(per_im * attrs["fg_fraction"])),
                                         len(fg)), rng)
    bg, _ = _sample(bg, None, min(per_im - len(fg), len(bg)), rng)
    picked = boxes[fg + bg]
    labels = np.concatenate([classes[mapped], np.zeros(len(bg), dtype=np.int64)])
    width = 4 * attrs["class_nums"]
    targets = np.zeros((len(picked), width))
    weights = np.zeros((len(picked), width))
    if fg:
        deltas = box_to_delta(picked[:len(fg)], gt[mapped]) / np.asarray(
            attrs["bbox_reg_weights"])
        for row in range(len(fg)):
            if labels[row] > 0:
                col = 4 * (1 if attrs["is_cls_agnostic"] else labels[row])
                targets[row, col:col + 4] = deltas[row]
                weights[row, col:col + 4] = 1.0
    return picked * scale, labels, targets, weights


@kernel("generate_proposal_labels", context=True)
def generate_proposal_labels(xp, ins, attrs, want, ctx):
    op = "generate_proposal_labels"
    if attrs["is_cascade_rcnn"]:
        # fluid 1.8.5's cascade path samples without the ground truth and scales some of its
        # output ROIs twice (seen running it in fluid 1.8.5); that is not reproduced here
        raise InvalidArgumentError(
            f"{op}: is_cascade_rcnn=True (Cascade R-CNN's later stages) is not provided by "
            f"spmd; use is_cascade_rcnn=False (Faster R-CNN's sampling)")
    rois = host(ins["RpnRois"]).astype(np.float64)
    gts = host(ins["GtBoxes"]).astype(np.float64)
    classes = host(ins["GtClasses"]).reshape(-1).astype(np.int64)
    crowd = host(ins["IsCrowd"]).reshape(-1)
    info = host(ins["ImInfo"]).astype(np.float64).reshape(-1, 3)
    roff, goff = _offsets(ins, "RpnRois", op), _offsets(ins, "GtBoxes", op)
    if roff.size != goff.size or roff.size - 1 != info.shape[0]:
        raise InvalidArgumentError(
            f"{op}: RpnRois' LoD holds {roff.size - 1} images, GtBoxes' {goff.size - 1} and "
            f"ImInfo {info.shape[0]}; give each one sequence per image")
    rng = ctx.rng if attrs["use_random"] else None
    parts = [_fast_rcnn_image(rois[roff[i]:roff[i + 1]], gts[goff[i]:goff[i + 1]],
                              classes[goff[i]:goff[i + 1]], crowd[goff[i]:goff[i + 1]],
                              info[i, 2], attrs, rng) for i in range(info.shape[0])]
    lod = make_lod([[0, *np.cumsum([len(p[1]) for p in parts]).tolist()]])
    dtype = ins["RpnRois"].dtype
    width = 4 * attrs["class_nums"]
    cat = [np.concatenate([p[k] for p in parts]) for k in range(4)]
    res = {"Rois": xp.asarray(cat[0].reshape(-1, 4), dtype=dtype),
           "LabelsInt32": xp.asarray(cat[1].astype(np.int32).reshape(-1, 1)),
           "BboxTargets": xp.asarray(cat[2].reshape(-1, width), dtype=dtype),
           "BboxInsideWeights": xp.asarray(cat[3].reshape(-1, width), dtype=dtype),
           "BboxOutsideWeights": xp.asarray(cat[3].reshape(-1, width), dtype=dtype)}
    res.update({slot + "@LOD": lod for slot in list(res)})
    return res


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
