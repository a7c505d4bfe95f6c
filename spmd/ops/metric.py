"""Op definitions: metric ops (auc, mean_iou). accuracy is in nn.py.

>>> # OP_DEFS["auc"].attrs["num_thresholds"].default  -> 4095
"""
from __future__ import annotations

from .nn import INT_DTYPES, _dims_match
from .registry import define_op

AUC_CURVES = ("ROC", "PR")


@define_op("auc", inputs=["Predict", "Label", "StatPos", "StatNeg"],
           outputs=["AUC", "StatPosOut", "StatNegOut"], grad=None,
           attrs={"curve": ("str", "ROC"), "num_thresholds": ("int", 2 ** 12 - 1),
                  "slide_steps": ("int", 1)})
def _auc(ctx):
    pred, label = ctx.input("Predict"), ctx.input("Label")
    ctx.check(len(pred.shape) == 2, f"Predict must be [N, C] scores (the last column is the "
                                    f"positive class), got {list(pred.shape)}")
    ctx.check(label.dtype in INT_DTYPES or label.dtype == "bool",
              f"Label must be int64 (0/1), got {label.dtype}")
    ctx.check(_dims_match(label.shape[:1], pred.shape[:1]),
              f"Label{list(label.shape)} must have one entry per row of Predict"
              f"{list(pred.shape)}")
    ctx.check(ctx.attr("curve") in AUC_CURVES,
              f"curve must be one of {list(AUC_CURVES)}, got {ctx.attr('curve')!r}")
    n, steps = ctx.attr("num_thresholds"), ctx.attr("slide_steps")
    ctx.check(n >= 1, f"num_thresholds must be >= 1, got {n}")
    ctx.check(steps >= 0, f"slide_steps must be >= 0, got {steps}")
    buckets = n + 1 if steps == 0 else (1 + steps) * (n + 1) + 1
    for slot in ("StatPos", "StatNeg"):
        st = ctx.input(slot)
        size = -1 if any(d < 0 for d in st.shape) else _size(st.shape)
        # slide_steps=0 reads the first n + 1 counters of a longer buffer too (fluid's auc
        # layer gives its batch op a window buffer even when slide_steps=0)
        ctx.check(size == -1 or size == buckets or (steps == 0 and size > buckets),
                  f"{slot} must hold {buckets} counters for num_thresholds={n} and "
                  f"slide_steps={steps}, got shape {list(st.shape)}")
    ctx.set_output("AUC", (1,), "float64")
    for slot in ("StatPosOut", "StatNegOut"):
        # fluid: without a window the counters come out as [1, n + 1], whatever came in
        if steps == 0:
            ctx.set_output(slot, (1, n + 1), "int64")
        else:
            ctx.set_output_like(slot, slot[:-3])


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@define_op("mean_iou", inputs=["Predictions", "Labels", "InWrongs*", "InCorrects*",
                               "InMeanIou*"],
           outputs=["OutMeanIou", "OutWrong", "OutCorrect"], grad=None,
           attrs={"num_classes": ("int", 0)})
def _mean_iou(ctx):
    pred, label = ctx.input("Predictions"), ctx.input("Labels")
    ctx.check(pred.dtype in INT_DTYPES and label.dtype in INT_DTYPES,
              f"Predictions and Labels must be int32/int64 class ids, got {pred.dtype} and "
              f"{label.dtype}")
    ctx.check(_dims_match(pred.shape, label.shape),
              f"Predictions{list(pred.shape)} and Labels{list(label.shape)} must have the same "
              f"shape")
    c = ctx.attr("num_classes")
    ctx.check(c >= 1, f"num_classes must be >= 1, got {c}")
    ctx.set_output("OutMeanIou", (1,), "float32")
    ctx.set_output("OutWrong", (c,), "int32")
    ctx.set_output("OutCorrect", (c,), "int32")
