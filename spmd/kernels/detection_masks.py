"""Kernel: generate_mask_labels (Mask R-CNN's mask targets; the op is described in
spmd/ops/detection_masks.py), with the polygon rasterizer it needs.

Each foreground ROI takes the ground truth whose polygons' bounding box it overlaps most and
gets that object's polygons rasterized into a resolution x resolution grid over the ROI, in
the column of its class (-1 elsewhere). The rasterizer is COCO's (fluid's Poly2Mask): the
polygon scaled by 5, its edges walked pixel by pixel, the crossings of pixel columns kept,
run-length encoded and decoded column-major; the same pixels come out.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from .crf import host
from .detection_proposals import lod_offsets
from .detection_targets import overlaps
from .registry import kernel


def poly_to_mask(xy, h: int, w: int) -> np.ndarray:
    """[h, w] uint8 mask of polygon xy (x0, y0, x1, y1, ...), as COCO's rleFrPoly."""
    scale = 5.0
    k = len(xy) // 2
    x = [int(scale * float(xy[2 * j]) + 0.5) for j in range(k)] + [0]
    y = [int(scale * float(xy[2 * j + 1]) + 0.5) for j in range(k)] + [0]
    x[k], y[k] = x[0], y[0]
    u, v = [], []
    for j in range(k):
        xs, xe, ys, ye = x[j], x[j + 1], y[j], y[j + 1]
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            s = 0.0 if dx == 0 else (ye - ys) / dx
            for d in range(dx + 1):
                t = dx - d if flip else d
                u.append(t + xs)
                v.append(int(ys + s * t + 0.5))
        else:
            s = 0.0 if dy == 0 else (xe - xs) / dy
            for d in range(dy + 1):
                t = dy - d if flip else d
                v.append(t + ys)
                u.append(int(xs + s * t + 0.5))
    # the crossings of pixel columns, downsampled
    pos = []
    for j in range(1, len(u)):
        if u[j] == u[j - 1]:
            continue
        xd = (float(u[j] if u[j] < u[j - 1] else u[j] - 1) + 0.5) / scale - 0.5
        if math.floor(xd) != xd or xd < 0 or xd > w - 1:
            continue
        yd = (float(v[j] if v[j] < v[j - 1] else v[j - 1]) + 0.5) / scale - 0.5
        yd = math.ceil(min(max(yd, 0.0), float(h)))
        pos.append(int(xd) * h + int(yd))
    a = sorted(pos) + [h * w]
    a = sorted(a)
    diffs, prev = [], 0
    for t in a:
        diffs.append(t - prev)
        prev = t
    runs = [diffs[0]]
    j = 1
    while j < len(diffs):
        if diffs[j] > 0:
            runs.append(diffs[j])
            j += 1
        else:
            j += 1
            if j < len(diffs):
                runs[-1] += diffs[j]
                j += 1
    flat = np.zeros(h * w, dtype=np.uint8)
    idx, value = 0, 0
    for r in runs:
        flat[idx:idx + r] = value
        idx += r
        value = 1 - value
    return flat.reshape(w, h).T  # the runs are column-major


def polys_to_mask_in_box(polys, box, m: int) -> np.ndarray:
    """The union of polygons rasterized on an m x m grid over box (fluid's float32 maths)."""
    f = np.float32
    w, h = max(f(box[2]) - f(box[0]), f(1.0)), max(f(box[3]) - f(box[1]), f(1.0))
    mask = np.zeros((m, m), dtype=np.uint8)
    for p in polys:
        p = np.asarray(p, dtype=f).reshape(-1, 2)
        px = (p[:, 0] - f(box[0])) * f(m) / w
        py = (p[:, 1] - f(box[1])) * f(m) / h
        mask |= poly_to_mask(np.stack([px, py], 1).reshape(-1), m, m)
    return mask


def _image_masks(rois, labels, classes, crowd, polys, scale, attrs):
    m, n_cls = attrs["resolution"], attrs["num_classes"]
    f = np.float32
    keep = [g for g in range(len(classes)) if classes[g] > 0 and crowd[g] == 0]
    gt_polys = [polys[g] for g in keep]
    boxes = np.array([[min(p[0::2].min() for p in ps), min(p[1::2].min() for p in ps),
                       max(p[0::2].max() for p in ps), max(p[1::2].max() for p in ps)]
                      for ps in gt_polys], dtype=np.float64).reshape(-1, 4)
    fg = np.nonzero(labels > 0)[0]
    targets = np.full((max(len(fg), 1), n_cls * m * m), -1, dtype=np.int32)
    if fg.size:
        picked = (rois[fg] / f(scale)).astype(f)
        ov = overlaps(picked.astype(np.float64), boxes) if len(boxes) else np.zeros(
            (fg.size, 0))
        for i, roi in enumerate(picked):
            best = int(np.argmax(ov[i])) if ov.shape[1] and ov[i].max() > 0 else 0
            mask = polys_to_mask_in_box(gt_polys[best], roi, m)
            cls = int(labels[fg[i]])
            targets[i, cls * m * m:(cls + 1) * m * m] = mask.reshape(-1)
        return (picked * f(scale)).astype(f), fg.astype(np.int32), targets
    # no foreground: one placeholder row (the image's first ROI, the first background's
    # index, an all -1 target), as fluid's kernel gives the mask head something to read
    bg = np.nonzero(labels == 0)[0][:1]
    first = ((rois[:1] / f(scale)).astype(f) * f(scale)).astype(f)
    return first, bg.astype(np.int32), targets[:1]


@kernel("generate_mask_labels")
def generate_mask_labels(xp, ins, attrs, want):
    op = "generate_mask_labels"
    info = host(ins["ImInfo"]).astype(np.float32).reshape(-1, 3)
    rois = host(ins["Rois"]).astype(np.float32)
    labels = host(ins["LabelsInt32"]).reshape(-1)
    classes = host(ins["GtClasses"]).reshape(-1)
    crowd = host(ins["IsCrowd"]).reshape(-1)
    points = host(ins["GtSegms"]).astype(np.float32).reshape(-1)
    segm = ins.get("GtSegms@LOD")
    if segm is None or len(segm) != 3:
        raise InvalidArgumentError(
            f"{op}: GtSegms needs 3 levels of LoD (boxes per image, polygons per box, points "
            f"per polygon), got {0 if segm is None else len(segm)}")
    img_off, box_off, pt_off = (np.asarray(level, dtype=np.int64) for level in segm)
    roff, goff = lod_offsets(ins, "Rois", op), lod_offsets(ins, "GtClasses", op)
    outs, counts = [[], [], []], []
    for i in range(info.shape[0]):
        if roff[i] == roff[i + 1]:
            counts.append(0)
            continue
        polys = []
        for g in range(img_off[i], img_off[i + 1]):
            polys.append([points[2 * pt_off[p]:2 * pt_off[p + 1]]
                          for p in range(box_off[g], box_off[g + 1])])
        got = _image_masks(rois[roff[i]:roff[i + 1]], labels[roff[i]:roff[i + 1]],
                           classes[goff[i]:goff[i + 1]], crowd[goff[i]:goff[i + 1]], polys,
                           info[i, 2], attrs)
        for part, value in zip(outs, got):
            part.append(value)
        counts.append(len(got[1]))
    lod = make_lod([[0, *np.cumsum(counts).tolist()]])
    width = attrs["num_classes"] * attrs["resolution"] ** 2
    cat = [np.concatenate(p) if p else np.zeros((0,)) for p in outs]
    return {"MaskRois": xp.asarray(cat[0].reshape(-1, 4), dtype=ins["Rois"].dtype),
            "RoiHasMaskInt32": xp.asarray(cat[1].astype(np.int32).reshape(-1, 1)),
            "MaskInt32": xp.asarray(cat[2].astype(np.int32).reshape(-1, width)),
            "MaskRois@LOD": lod, "RoiHasMaskInt32@LOD": lod, "MaskInt32@LOD": lod}
