"""Kernels: the training targets of two-stage and RetinaNet detectors: rpn_target_assign,
retinanet_target_assign, generate_proposal_labels (the ops are described in
spmd/ops/detection_targets.py). Host code, per image, as fluid's CPU kernels: overlaps in
pixels (+1), fluid's ScoreAssign and reservoir sampling (use_random draws from the run's
generator), deltas that decode an anchor or proposal into its ground truth.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from .crf import host
from .detection_proposals import box_area, lod_offsets
from .registry import kernel


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
    off = lod_offsets(ins, "GtBoxes", op)
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
    roff, goff = lod_offsets(ins, "RpnRois", op), lod_offsets(ins, "GtBoxes", op)
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
