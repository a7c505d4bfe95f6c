"""Kernels: metric ops (auc, mean_iou), computed as fluid 1.8's CPU kernels do.

>>> # get_kernel("mean_iou")(np, {"Predictions": p, "Labels": y}, {"num_classes": 3}, want)
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel


def _bucket_counts(xp, pred, label, n: int):
    """Positive and negative counts per threshold bucket int(score * n) of the last column."""
    score = pred[:, -1]
    idx = (score * n).astype(np.int64)
    if idx.size and (int(idx.max()) > n or int(idx.min()) < 0):
        raise InvalidArgumentError(
            f"auc: Predict scores must be in [0, 1], got values in [{float(score.min())}, "
            f"{float(score.max())}]; apply softmax/sigmoid first")
    positive = label.reshape(-1) != 0  # fluid casts the label to bool
    pos = xp.bincount(idx[positive], minlength=n + 1)
    neg = xp.bincount(idx[~positive], minlength=n + 1)
    return pos, neg


def _roc_area(xp, pos, neg) -> float:
    """Trapezoids of the ROC curve swept from the highest bucket down, normalized by the
    positive and negative totals (0 when either is 0). fluid 1.8 computes this area for
    curve='PR' as well."""
    tp = xp.cumsum(pos[::-1].astype(np.float64))
    fp = xp.cumsum(neg[::-1].astype(np.float64))
    tp_prev = xp.concatenate([xp.zeros(1), tp[:-1]])
    fp_prev = xp.concatenate([xp.zeros(1), fp[:-1]])
    area = float((xp.abs(fp - fp_prev) * (tp + tp_prev) / 2.0).sum())
    tot_pos, tot_neg = float(tp[-1]), float(fp[-1])
    return area / tot_pos / tot_neg if tot_pos > 0 and tot_neg > 0 else area


@kernel("auc")
def auc(xp, ins, attrs, want):
    n, steps = attrs["num_thresholds"], attrs["slide_steps"]
    pos, neg = _bucket_counts(xp, ins["Predict"], ins["Label"], n)
    stat_pos = ins["StatPos"].reshape(-1).copy()
    stat_neg = ins["StatNeg"].reshape(-1).copy()
    b = n + 1
    if steps == 0:
        # the first n + 1 counters (the batch-window layout of slide_steps=0 has one more)
        stat_pos[:b] += pos.astype(stat_pos.dtype)
        stat_neg[:b] += neg.astype(stat_neg.dtype)
        cur_pos, cur_neg = stat_pos[:b], stat_neg[:b]
    else:
        # steps ring buckets, then their running sum, then the batch counter
        step = int(stat_pos[(steps + 1) * b]) % steps
        ring, total = slice(step * b, (step + 1) * b), slice(steps * b, (steps + 1) * b)
        for stat, new in ((stat_pos, pos), (stat_neg, neg)):
            stat[total] -= stat[ring]
            stat[ring] = new
            stat[total] += new
            stat[(steps + 1) * b] += 1
        cur_pos, cur_neg = stat_pos[total], stat_neg[total]
    value = _roc_area(xp, cur_pos, cur_neg)
    if steps == 0:  # fluid's output shape without a window
        stat_pos, stat_neg = cur_pos.reshape(1, b), cur_neg.reshape(1, b)
    else:
        stat_pos = stat_pos.reshape(ins["StatPos"].shape)
        stat_neg = stat_neg.reshape(ins["StatNeg"].shape)
    return {"AUC": xp.asarray([value], dtype=np.float64), "StatPosOut": stat_pos,
            "StatNegOut": stat_neg}


@kernel("mean_iou")
def mean_iou(xp, ins, attrs, want):
    c = attrs["num_classes"]
    pred = ins["Predictions"].reshape(-1).astype(np.int64)
    label = ins["Labels"].reshape(-1).astype(np.int64)
    for what, v in (("Predictions", pred), ("Labels", label)):
        if v.size and (int(v.min()) < 0 or int(v.max()) >= c):
            raise InvalidArgumentError(
                f"mean_iou: {what} holds class ids in [{int(v.min())}, {int(v.max())}], "
                f"expected [0, {c}) for num_classes={c}")
    hit = pred == label
    correct = xp.bincount(pred[hit], minlength=c)
    wrong = xp.bincount(pred[~hit], minlength=c) + xp.bincount(label[~hit], minlength=c)
    for w in ins.get("InWrongs") or []:
        wrong = wrong + w.astype(np.int64)
    for r in ins.get("InCorrects") or []:
        correct = correct + r.astype(np.int64)
    denom = wrong + correct
    valid = int((denom != 0).sum())
    iou = (correct.astype(np.float32) / xp.where(denom == 0, 1, denom).astype(np.float32)).sum()
    value = iou / np.float32(max(valid, 1)) if valid else np.float32(0)
    for m in ins.get("InMeanIou") or []:
        value = value + m.reshape(-1)[0]
    return {"OutMeanIou": xp.asarray([value], dtype=np.float32),
            "OutWrong": wrong.astype(np.int32), "OutCorrect": correct.astype(np.int32)}
