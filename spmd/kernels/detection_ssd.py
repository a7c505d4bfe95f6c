"""Kernels: prior_box, density_prior_box, box_coder, iou_similarity, bipartite_match,
target_assign, mine_hard_examples and box_clip (ops in spmd/ops/detection_ssd.py).

The anchor and coder kernels are array expressions on `xp`; matching, assignment and mining
walk images and boxes on the host (they are greedy, data-dependent loops in fluid too), then
hand their small int results back as arrays of the input's kind.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from ..ops.detection_ssd import expand_aspect_ratios
from .crf import host
from .registry import kernel
from .sequence import input_lod


def _real(dtype):
    """The scalar type fluid's kernel computes in (T): the input's float type."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def _steps(attrs, feature_hw, image_hw, t):
    """(step_h, step_w) in T: the attributes, or image size / feature size when either is 0."""
    if attrs["step_w"] == 0 or attrs["step_h"] == 0:
        return t(image_hw[0]) / t(feature_hw[0]), t(image_hw[1]) / t(feature_hw[1])
    return t(np.float32(attrs["step_h"])), t(np.float32(attrs["step_w"]))


def _centers(count, offset, step, t):
    """(index + offset) * step per cell, rounded in T as fluid computes it."""
    return (np.arange(count).astype(t) + t(np.float32(offset))) * step


def _prior_half_sizes(attrs, t) -> list[tuple]:
    """(half width, half height) in T of each prior at one cell, in fluid's order (sizes
    and ratios are float attributes; the halves are rounded to T as fluid stores them)."""
    ratios = [np.float32(r) for r in expand_aspect_ratios(attrs["aspect_ratios"],
                                                           attrs["flip"])]
    maxs = [np.float32(m) for m in attrs["max_sizes"]]
    out = []
    for s, mn in enumerate(np.float32(m) for m in attrs["min_sizes"]):
        by_ratio = [(t(np.float64(mn) * np.sqrt(np.float64(r)) / 2.0),
                     t(np.float64(mn) / np.sqrt(np.float64(r)) / 2.0)) for r in ratios]
        square = [(t(np.sqrt(np.float64(mn * maxs[s])) / 2.0),) * 2] if maxs else []
        if attrs["min_max_aspect_ratios_order"]:
            # min square, max square, then the other ratios (Caffe's order)
            out += [by_ratio[0]] + square + [b for r, b in zip(ratios, by_ratio)
                                             if abs(r - 1.0) >= 1e-6]
        else:
            out += by_ratio + square
    return out


def _priors_out(xp, boxes: np.ndarray, attrs, dtype):
    if attrs["clip"]:
        boxes = np.clip(boxes, 0.0, 1.0)
    boxes = boxes.astype(dtype)
    var = np.broadcast_to(np.asarray(attrs["variances"], dtype=dtype), boxes.shape)
    return {"Boxes": xp.asarray(boxes), "Variances": xp.asarray(np.ascontiguousarray(var))}


@kernel("prior_box")
def prior_box(xp, ins, attrs, want):
    x, img = ins["Input"], ins["Image"]
    t = _real(x.dtype)
    fh, fw = x.shape[2], x.shape[3]
    img_h, img_w = t(img.shape[2]), t(img.shape[3])
    step_h, step_w = _steps(attrs, (fh, fw), (img.shape[2], img.shape[3]), t)
    cy = _centers(fh, attrs["offset"], step_h, t).reshape(-1, 1, 1)
    cx = _centers(fw, attrs["offset"], step_w, t).reshape(1, -1, 1)
    halves = np.asarray(_prior_half_sizes(attrs, t), dtype=t).reshape(-1, 2)
    hw, hh = halves[:, 0].reshape(1, 1, -1), halves[:, 1].reshape(1, 1, -1)
    boxes = np.stack(np.broadcast_arrays((cx - hw) / img_w, (cy - hh) / img_h,
                                         (cx + hw) / img_w, (cy + hh) / img_h), axis=-1)
    return _priors_out(xp, boxes, attrs, x.dtype)


@kernel("density_prior_box")
def density_prior_box(xp, ins, attrs, want):
    x, img = ins["Input"], ins["Image"]
    t = _real(x.dtype)
    fh, fw = x.shape[2], x.shape[3]
    img_h, img_w = img.shape[2], img.shape[3]
    step_h, step_w = _steps(attrs, (fh, fw), (img_h, img_w), t)
    step_average = int((step_w + step_h) * 0.5)  # fluid truncates the mean step to an int
    cy = _centers(fh, attrs["offset"], step_h, t).reshape(-1, 1, 1)
    cx = _centers(fw, attrs["offset"], step_w, t).reshape(1, -1, 1)
    # per prior: its first centre's offset from the cell centre, its shift index and size
    # (fluid keeps the shifted centres and the sizes as floats, the corners as doubles)
    start, di_, dj_, shift_, bw_, bh_ = [], [], [], [], [], []
    for size, density in zip(attrs["fixed_sizes"], attrs["densities"]):
        shift = step_average // density
        for ratio in attrs["fixed_ratios"]:
            root = np.float32(np.sqrt(np.float64(np.float32(ratio))))
            bw, bh = np.float32(np.float32(size) * root), np.float32(np.float32(size) / root)
            for di in range(density):
                for dj in range(density):
                    start.append(-step_average / 2.0 + shift / 2.0)
                    di_.append(di)
                    dj_.append(dj)
                    shift_.append(shift)
                    bw_.append(bw)
                    bh_.append(bh)
    start, di_, dj_, shift_ = (np.asarray(a).reshape(1, 1, -1) for a in (start, di_, dj_,
                                                                          shift_))
    bw_, bh_ = (np.asarray(a, dtype=np.float64).reshape(1, 1, -1) for a in (bw_, bh_))
    pcx = ((cx.astype(np.float64) + start).astype(np.float32) + dj_ * shift_).astype(
        np.float32).astype(np.float64)
    pcy = ((cy.astype(np.float64) + start).astype(np.float32) + di_ * shift_).astype(
        np.float32).astype(np.float64)
    boxes = np.stack(np.broadcast_arrays(
        np.maximum((pcx - bw_ / 2.0) / img_w, 0.0), np.maximum((pcy - bh_ / 2.0) / img_h, 0.0),
        np.minimum((pcx + bw_ / 2.0) / img_w, 1.0), np.minimum((pcy + bh_ / 2.0) / img_h, 1.0)),
        axis=-1)
    res = _priors_out(xp, boxes, attrs, x.dtype)
    if attrs["flatten_to_2d"]:
        res = {k: v.reshape(-1, 4) for k, v in res.items()}
    return res


def _center_size(xp, boxes, norm):
    """(center x, center y, width, height) along the last axis; fluid adds 1 to a pixel box's
    width and height, and puts a prior's centre at xmin + width / 2."""
    w = boxes[..., 2] - boxes[..., 0] + norm
    h = boxes[..., 3] - boxes[..., 1] + norm
    return boxes[..., 0] + w / 2, boxes[..., 1] + h / 2, w, h


def _variance(xp, ins, attrs, dtype):
    """PriorBoxVar [M, 4], the `variance` attribute [4], or None."""
    if ins.get("PriorBoxVar") is not None:
        return ins["PriorBoxVar"]
    if attrs["variance"]:
        return xp.asarray(np.asarray(attrs["variance"], dtype=dtype))
    return None


@kernel("box_coder")
def box_coder(xp, ins, attrs, want):
    prior, target = ins["PriorBox"], ins["TargetBox"]
    norm = 0.0 if attrs["box_normalized"] else 1.0
    var = _variance(xp, ins, attrs, target.dtype)
    pcx, pcy, pw, ph = _center_size(xp, prior, norm)
    if attrs["code_type"] == "encode_center_size":
        # target [N, 4] against every prior [M, 4] -> [N, M, 4]
        t = target[:, None, :]
        tcx, tcy = (t[..., 0] + t[..., 2]) / 2, (t[..., 1] + t[..., 3]) / 2
        tw, th = t[..., 2] - t[..., 0] + norm, t[..., 3] - t[..., 1] + norm
        out = xp.stack([(tcx - pcx) / pw, (tcy - pcy) / ph, xp.log(xp.abs(tw / pw)),
                        xp.log(xp.abs(th / ph))], axis=-1)
        if var is not None:
            out = out / (var if var.ndim == 1 else var[None, :, :])
        return {"OutputBox": out.astype(target.dtype)}
    # decode: target [N, M, 4]; the prior of element (i, j) is prior[j] (axis 0) or prior[i]
    expand = (lambda a: a[None, :]) if attrs["axis"] == 0 else (lambda a: a[:, None])
    pcx, pcy, pw, ph = (expand(a) for a in (pcx, pcy, pw, ph))
    if var is None:
        v = [1.0] * 4
    elif var.ndim == 1:
        v = [var[k] for k in range(4)]
    else:
        v = [expand(var[:, k]) for k in range(4)]
    cx = v[0] * target[..., 0] * pw + pcx
    cy = v[1] * target[..., 1] * ph + pcy
    w = xp.exp(v[2] * target[..., 2]) * pw
    h = xp.exp(v[3] * target[..., 3]) * ph
    out = xp.stack([cx - w / 2, cy - h / 2, cx + w / 2 - norm, cy + h / 2 - norm], axis=-1)
    return {"OutputBox": out.astype(target.dtype)}


def iou_matrix(xp, a, b, normalized: bool):
    """IoU of every box of a [N, 4] with every box of b [M, 4] -> [N, M] (fluid's formula:
    +1 on pixel sides, an empty intersection counts 0)."""
    norm = 0.0 if normalized else 1.0
    a, b = a[:, None, :], b[None, :, :]
    area_a = (a[..., 3] - a[..., 1] + norm) * (a[..., 2] - a[..., 0] + norm)
    area_b = (b[..., 3] - b[..., 1] + norm) * (b[..., 2] - b[..., 0] + norm)
    ih = xp.maximum(xp.minimum(a[..., 3], b[..., 3]) - xp.maximum(a[..., 1], b[..., 1]) + norm,
                    0)
    iw = xp.maximum(xp.minimum(a[..., 2], b[..., 2]) - xp.maximum(a[..., 0], b[..., 0]) + norm,
                    0)
    inter = iw * ih
    return inter / (area_a + area_b - inter)


@kernel("iou_similarity")
def iou_similarity(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": iou_matrix(xp, x, ins["Y"], attrs["box_normalized"]).astype(x.dtype)}


def _argmax_match(dist: np.ndarray, idx: np.ndarray, best: np.ndarray, threshold: float):
    """per_prediction: each still-unmatched column takes its best row at >= threshold."""
    for col in np.flatnonzero(idx == -1):
        d = dist[:, col]
        ok = (d >= 1e-6) & (d >= threshold)
        if ok.any():
            row = int(np.argmax(np.where(ok, d, -1.0)))
            idx[col], best[col] = row, d[row]


@kernel("bipartite_match")
def bipartite_match(xp, ins, attrs, want):
    dist = host(ins["DistMat"])
    lod = ins.get("DistMat@LOD")
    if lod is not None and len(lod) != 1:
        raise InvalidArgumentError(
            f"bipartite_match: DistMat carries {len(lod)} levels of LoD; it takes one level "
            f"(the rows of each image)")
    offsets = lod[0] if lod is not None else np.array([0, dist.shape[0]])
    n, cols = offsets.size - 1, dist.shape[1]
    idx = np.full((n, cols), -1, dtype=np.int32)
    best = np.zeros((n, cols), dtype=dist.dtype)
    for i in range(n):
        one = dist[offsets[i]:offsets[i + 1]]
        if one.shape[0] == 0:
            continue
        # fluid's order for a tie: the bipartite pass scans columns, then rows
        _bipartite_scan(one, idx[i], best[i])
        if attrs["match_type"] == "per_prediction":
            _argmax_match(one, idx[i], best[i], attrs["dist_threshold"])
    return {"ColToRowMatchIndices": xp.asarray(idx), "ColToRowMatchDist": xp.asarray(best)}


def _bipartite_scan(dist: np.ndarray, idx: np.ndarray, best: np.ndarray) -> None:
    """Greedy bipartite matching as fluid scans it: each round takes the largest distance
    (> 1e-6) among free rows and free columns, the first one met going column by column and
    row by row within a column, and pairs them; ends when rows or distances run out."""
    free = np.ones(dist.shape[0], dtype=bool)
    while free.any():
        cand = np.where((dist >= 1e-6) & free[:, None] & (idx == -1)[None, :], dist, -1.0)
        if cand.max() <= -1.0:
            return
        flat = np.argmax(cand.T)  # column-major: first maximum by column, then row
        col, row = np.unravel_index(flat, cand.T.shape)
        idx[col], best[col] = row, dist[row, col]
        free[row] = False


@kernel("target_assign")
def target_assign(xp, ins, attrs, want):
    x, match = ins["X"], host(ins["MatchIndices"])
    lod = input_lod(ins, "X", "target_assign")
    if len(lod) != 1:
        raise InvalidArgumentError(f"target_assign: X needs one level of LoD, got {len(lod)}")
    offsets = lod[0]
    n, m = match.shape
    p = x.shape[1]
    if offsets.size - 1 != n:
        raise InvalidArgumentError(
            f"target_assign: X's LoD holds {offsets.size - 1} images but MatchIndices has {n} "
            f"rows; give both for the same batch")
    fill = attrs["mismatch_value"]
    matched = match > -1
    rows = np.where(matched, offsets[:n, None] + np.where(matched, match, 0), 0)
    cols = np.broadcast_to(np.arange(m) % p, (n, m))
    hx = host(x)
    out = np.where(matched[..., None], hx[rows, cols], np.asarray(fill, dtype=hx.dtype))
    weight = matched.astype(np.float32)[..., None]
    neg = ins.get("NegIndices")
    if neg is not None:
        neg_lod = input_lod(ins, "NegIndices", "target_assign")[0]
        neg = host(neg).reshape(-1)
        for i in range(n):
            ids = neg[neg_lod[i]:neg_lod[i + 1]]
            out[i, ids] = fill
            weight[i, ids] = 1.0
    return {"Out": xp.asarray(out.astype(hx.dtype)), "OutWeight": xp.asarray(weight)}


@kernel("mine_hard_examples")
def mine_hard_examples(xp, ins, attrs, want):
    cls = host(ins["ClsLoss"])
    loc = host(ins["LocLoss"]) if ins.get("LocLoss") is not None else None
    match, dist = host(ins["MatchIndices"]), host(ins["MatchDist"])
    hard = attrs["mining_type"] == "hard_example"
    updated = match.copy()
    negs, starts = [], [0]
    for n in range(match.shape[0]):
        if hard:
            eligible = np.ones(match.shape[1], dtype=bool)
            loss = cls[n] + loc[n] if loc is not None else cls[n]
        else:
            eligible = (match[n] == -1) & (dist[n] < np.float32(attrs["neg_dist_threshold"]))
            loss = cls[n]
        cand = np.flatnonzero(eligible)
        if hard:
            take = min(attrs["sample_size"], cand.size)
        else:
            take = min(int(np.count_nonzero(match[n] != -1) * attrs["neg_pos_ratio"]), cand.size)
        order = cand[np.argsort(-loss[cand], kind="stable")][:take]
        chosen = np.zeros(match.shape[1], dtype=bool)
        chosen[order] = True
        if hard:
            updated[n][(match[n] > -1) & ~chosen] = -1
            picked = np.flatnonzero((match[n] <= -1) & chosen)
        else:
            picked = np.flatnonzero(chosen)  # ascending, as fluid's std::set
        negs.append(picked)
        starts.append(starts[-1] + picked.size)
    neg = np.concatenate(negs).astype(np.int32).reshape(-1, 1) if negs else np.zeros(
        (0, 1), np.int32)
    return {"NegIndices": xp.asarray(neg), "NegIndices@LOD": make_lod([starts]),
            "UpdatedMatchIndices": xp.asarray(updated)}


@kernel("box_clip")
def box_clip(xp, ins, attrs, want):
    x, info = ins["Input"], host(ins["ImInfo"])
    offsets = input_lod(ins, "Input", "box_clip")[-1]
    if offsets.size - 1 > info.shape[0]:
        raise InvalidArgumentError(
            f"box_clip: Input's LoD holds {offsets.size - 1} images but ImInfo has "
            f"{info.shape[0]} rows (height, width, scale per image)")
    img = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    im_h = np.round(info[img, 0] / info[img, 2])
    im_w = np.round(info[img, 1] / info[img, 2])
    shape = (-1,) + (1,) * (x.ndim - 2)
    hi_x = xp.asarray((im_w - 1).astype(x.dtype).reshape(shape))
    hi_y = xp.asarray((im_h - 1).astype(x.dtype).reshape(shape))
    out = xp.stack([xp.maximum(xp.minimum(x[..., 0], hi_x), 0),
                    xp.maximum(xp.minimum(x[..., 1], hi_y), 0),
                    xp.maximum(xp.minimum(x[..., 2], hi_x), 0),
                    xp.maximum(xp.minimum(x[..., 3], hi_y), 0)], axis=-1)
    return {"Output": out.astype(x.dtype)}
