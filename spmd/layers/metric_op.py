"""fluid.layers metric builders: auc (with its persistable counters) and mean_iou. accuracy
is in loss.py.

>>> # auc_out, batch_auc, [bpos, bneg, pos, neg] = auc(input=probs [N, 2], label=y [N, 1])
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer

__all__ = ["auc", "mean_iou"]


def _positive_int(value, arg: str, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidArgumentError(f"{where}: {arg} must be an int >= {minimum}, got {value!r}")
    return int(value)


def auc(input, label, curve="ROC", num_thresholds=2 ** 12 - 1, topk=1, slide_steps=1):
    """Area under the ROC curve of the scores in input's last column (input [N, 2]
    probabilities, label [N, 1] int 0/1), bucketed at num_thresholds thresholds.

    Returns (auc, batch_auc, [batch_stat_pos, batch_stat_neg, stat_pos, stat_neg]): auc
    accumulates over every batch run so far; batch_auc over the last slide_steps batches. The
    four int64 counter variables are persistable, zeroed by the startup program (run it again,
    or set them to zeros, to reset). As in fluid 1.8, curve='PR' is accepted and computes the
    same ROC area, and topk is unused.

    >>> # global_auc, batch_auc, states = auc(input=softmax_out, label=y)
    """
    where = "auc"
    check_variable(input, "input", where, dtypes={"float32", "float64"})
    check_variable(label, "label", where, dtypes={"int32", "int64"})
    if curve not in ("ROC", "PR"):
        raise InvalidArgumentError(f"{where}: curve must be 'ROC' or 'PR', got {curve!r}")
    n = _positive_int(num_thresholds, "num_thresholds", where)
    steps = _positive_int(slide_steps, "slide_steps", where, minimum=0)
    helper = LayerHelper("auc")
    auc_out = helper.create_variable_for_type_inference("float64", stop_gradient=True)
    batch_auc_out = helper.create_variable_for_type_inference("float64", stop_gradient=True)
    # the sliding window: slide_steps rings of n + 1 buckets, their sum, and a batch counter
    batch_len = (1 + steps) * (n + 1) + 1
    stats = [helper.create_global_variable(shape, "int64", persistable=True, stop_gradient=True)
             for shape in ([batch_len], [batch_len], [1, n + 1], [1, n + 1])]
    for var in stats:
        helper.set_variable_initializer(var, ConstantInitializer(0.0))
    for out, pos, neg, window in ((batch_auc_out, stats[0], stats[1], steps),
                                  (auc_out, stats[2], stats[3], 0)):
        helper.append_op("auc", {"Predict": [input], "Label": [label], "StatPos": [pos],
                                 "StatNeg": [neg]},
                         {"AUC": [out], "StatPosOut": [pos], "StatNegOut": [neg]},
                         {"curve": curve, "num_thresholds": n, "slide_steps": window})
    return auc_out, batch_auc_out, stats


def mean_iou(input, label, num_classes):
    """Mean intersection-over-union of predicted and true class ids (same shape, int32/int64):
    the mean over classes that occur of correct / (correct + wrong). Returns (mean_iou [1]
    float32, out_wrong [num_classes] int32, out_correct [num_classes] int32).

    >>> # miou, wrong, correct = mean_iou(input=pred_ids, label=true_ids, num_classes=21)
    """
    where = "mean_iou"
    check_variable(input, "input", where, dtypes={"int32", "int64"})
    check_variable(label, "label", where, dtypes={"int32", "int64"})
    c = _positive_int(num_classes, "num_classes", where)
    helper = LayerHelper("mean_iou")
    miou = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    wrong = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    correct = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("mean_iou", {"Predictions": [input], "Labels": [label]},
                     {"OutMeanIou": [miou], "OutWrong": [wrong], "OutCorrect": [correct]},
                     {"num_classes": c})
    return miou, wrong, correct
