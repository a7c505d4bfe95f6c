"""Kernel: detection_map, fluid 1.8's mean average precision of LoD detections (op in
spmd/ops/detection_map.py).

Per class: every detection (best score first within an image) is a true positive when its
box, clipped to [0, 1], overlaps an unclaimed ground-truth box of its class by more than
overlap_threshold, else a false positive; AP is the area under the precision/recall steps
("integral") or VOC2007's 11-point mean. With HasState set, the positive counts and the
(score, flag) lists of earlier batches (PosCount, TruePos, FalsePos) are carried on, so the
Accum* outputs fed back give a running mAP. Two of fluid's quirks are kept on purpose, so
the numbers are fluid's: a class is skipped when its positive count equals background_label,
and the 11-point loop is fluid's own.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from .crf import host
from .registry import kernel
from .sequence import input_lod


def _overlap(a, b) -> float:
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _ground_truth(label: np.ndarray, offsets) -> list[dict]:
    """Per image: class -> [(box, difficult)]."""
    images = []
    for n in range(offsets.size - 1):
        boxes: dict[int, list] = {}
        for row in label[offsets[n]:offsets[n + 1]]:
            if label.shape[1] == 6:
                box, difficult = row[2:6], abs(row[1]) >= 1e-6
            else:
                box, difficult = row[1:5], False
            boxes.setdefault(int(row[0]), []).append((box, difficult))
        images.append(boxes)
    return images


def _detections(det: np.ndarray, offsets) -> list[dict]:
    """Per image: class -> [(score, box)] in input order."""
    images = []
    for n in range(offsets.size - 1):
        boxes: dict[int, list] = {}
        for row in det[offsets[n]:offsets[n + 1]]:
            boxes.setdefault(int(row[0]), []).append((row[1], row[2:6]))
        images.append(boxes)
    return images


def _carried(ins, class_num):
    """The state of earlier batches: (pos counts, true pos, false pos) by class."""
    pos = {i: int(c) for i, c in enumerate(host(ins["PosCount"]).reshape(-1)[:class_num])}
    lists = []
    for slot in ("TruePos", "FalsePos"):
        data = host(ins[slot]).reshape(-1, 2)
        off = input_lod(ins, slot, "detection_map")[0]
        lists.append({i: [(data[j, 0], int(data[j, 1])) for j in range(off[i], off[i + 1])]
                      for i in range(off.size - 1)})
    return pos, lists[0], lists[1]


def _match(gts, dets, evaluate_difficult, threshold, pos, tp, fp):
    for boxes in gts:
        for label, items in boxes.items():
            count = len(items) if evaluate_difficult else sum(not d for _, d in items)
            if count:
                pos[label] = pos.get(label, 0) + count
    for image_gt, image_det in zip(gts, dets):
        for label, preds in image_det.items():
            truth = image_gt.get(label) if image_gt else None
            if truth is None:
                for score, _ in preds:
                    tp.setdefault(label, []).append((score, 0))
                    fp.setdefault(label, []).append((score, 1))
                continue
            claimed = [False] * len(truth)
            for score, box in sorted(preds, key=lambda p: -p[0]):
                box = np.clip(box, 0.0, 1.0)
                overlaps = [_overlap(box, g) for g, _ in truth]
                best = int(np.argmax(overlaps))
                hit = 0
                if overlaps[best] > threshold:
                    if not (evaluate_difficult or not truth[best][1]):
                        continue  # a difficult box matched: neither true nor false
                    hit = 0 if claimed[best] else 1
                    claimed[best] = True
                tp.setdefault(label, []).append((score, hit))
                fp.setdefault(label, []).append((score, 1 - hit))


def _average_precision(tps, fps, num_pos, eleven_point: bool) -> float:
    order = sorted(range(len(tps)), key=lambda i: -tps[i][0])  # stable, as fluid's
    tp_sum = np.cumsum([tps[i][1] for i in order])
    order = sorted(range(len(fps)), key=lambda i: -fps[i][0])
    fp_sum = np.cumsum([fps[i][1] for i in order])
    precision = tp_sum / (tp_sum + fp_sum)
    recall = tp_sum / num_pos
    if eleven_point:
        best = [0.0] * 11
        start = len(tp_sum) - 1
        for j in range(10, -1, -1):
            for i in range(start, -1, -1):
                if recall[i] < j / 10.0:
                    start = i
                    if j > 0:
                        best[j - 1] = best[j]
                    break
                best[j] = max(best[j], precision[i])
        return sum(b / 11 for b in best)
    ap, prev = np.float32(0.0), np.float32(0.0)
    for p, r in zip(precision, recall):
        if abs(r - prev) > 1e-6:
            ap += np.float32(p * abs(r - prev))
        prev = np.float32(r)
    return float(ap)


def _packed(lists: dict, class_num: int, dtype):
    rows, starts = [], [0]
    for c in range(class_num):
        rows += [(s, f) for s, f in lists.get(c, [])]
        starts.append(len(rows))
    return np.asarray(rows, dtype=dtype).reshape(-1, 2), make_lod([starts])


@kernel("detection_map")
def detection_map(xp, ins, attrs, want):
    det, label = host(ins["DetectRes"]), host(ins["Label"])
    det_off = input_lod(ins, "DetectRes", "detection_map")[0]
    gt_off = input_lod(ins, "Label", "detection_map")[0]
    if det_off.size != gt_off.size:
        raise InvalidArgumentError(
            f"detection_map: DetectRes holds {det_off.size - 1} images and Label "
            f"{gt_off.size - 1}; give both for the same batch")
    class_num = attrs["class_num"]
    state = ins.get("HasState")
    if ins.get("PosCount") is not None and state is not None and int(host(state).reshape(-1)[0]):
        pos, tp, fp = _carried(ins, class_num)
    else:
        pos, tp, fp = {}, {}, {}
    _match(_ground_truth(label, gt_off), _detections(det, det_off),
           attrs["evaluate_difficult"], attrs["overlap_threshold"], pos, tp, fp)
    total, count = 0.0, 0
    for c in sorted(pos):
        if pos[c] == attrs["background_label"]:
            continue
        count += 1
        if c in tp:
            total += _average_precision(tp[c], fp[c], pos[c], attrs["ap_type"] == "11point")
    m_ap = total / count if count else 0.0
    counts = np.array([[pos.get(c, 0)] for c in range(class_num)], dtype=np.int32)
    tp_rows, tp_lod = _packed(tp, class_num, det.dtype)
    fp_rows, fp_lod = _packed(fp, class_num, det.dtype)
    return {"MAP": xp.asarray(np.array([m_ap], dtype=det.dtype)),
            "AccumPosCount": xp.asarray(counts), "AccumTruePos": xp.asarray(tp_rows),
            "AccumTruePos@LOD": tp_lod, "AccumFalsePos": xp.asarray(fp_rows),
            "AccumFalsePos@LOD": fp_lod}
