"""Op definitions: detection_map, fluid 1.8's mean average precision of detections (its kernel,
with the accumulated state, in spmd/kernels/detection_map.py).
"""
from __future__ import annotations

from .registry import define_op


@define_op("detection_map",
           inputs=["DetectRes", "Label", "HasState?", "PosCount?", "TruePos?", "FalsePos?"],
           outputs=["MAP", "AccumPosCount", "AccumTruePos", "AccumFalsePos"], grad=None,
           lod_inputs=("DetectRes", "Label", "TruePos", "FalsePos"),
           lod_outputs=("AccumTruePos", "AccumFalsePos"),
           attrs={"overlap_threshold": ("float", 0.5), "evaluate_difficult": ("bool", True),
                  "ap_type": ("str", "integral"), "class_num": "int",
                  "background_label": ("int", 0)})
def _detection_map(ctx):
    det, label = ctx.input("DetectRes"), ctx.input("Label")
    ctx.check(len(det.shape) == 2 and det.shape[1] in (6, -1),
              f"DetectRes must be a LoD [No, 6] (label, score, box), got {list(det.shape)}")
    ctx.check(len(label.shape) == 2 and label.shape[1] in (5, 6, -1),
              f"Label must be a LoD [Ng, 6] (label, difficult, box) or [Ng, 5] (label, box), "
              f"got {list(label.shape)}")
    ctx.check(ctx.attr("ap_type") in ("integral", "11point"),
              f"ap_type must be 'integral' or '11point', got {ctx.attr('ap_type')!r}")
    ctx.check(ctx.attr("class_num") > 0, f"class_num must be > 0, got {ctx.attr('class_num')}")
    ctx.set_output("MAP", (1,), det.dtype)
    ctx.set_output("AccumPosCount", (ctx.attr("class_num"), 1), "int32")
    ctx.set_output("AccumTruePos", (-1, 2), det.dtype)
    ctx.set_output("AccumFalsePos", (-1, 2), det.dtype)
    ctx.set_lod_level("AccumTruePos", 1)
    ctx.set_lod_level("AccumFalsePos", 1)
