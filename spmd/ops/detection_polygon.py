"""Op definitions: locality_aware_nms, EAST's NMS over quadrilaterals (its kernel in
spmd/kernels/detection_polygon.py); no gradient.
"""
from __future__ import annotations

from .registry import define_op


@define_op("locality_aware_nms", inputs=["BBoxes", "Scores"], outputs=["Out"], grad=None,
           lod_outputs=("Out",),
           attrs={"background_label": ("int", -1), "score_threshold": "float",
                  "nms_top_k": "int", "nms_threshold": ("float", 0.3),
                  "nms_eta": ("float", 1.0), "keep_top_k": "int",
                  "normalized": ("bool", True)})
def _locality_aware_nms(ctx):
    boxes, scores = ctx.input("BBoxes"), ctx.input("Scores")
    ctx.check(len(boxes.shape) == 3 and boxes.shape[2] in (4, 8, 16, 24, 32, -1),
              f"BBoxes must be [N, M, 4 or 8, 16, 24, 32] (a box or a polygon's points), got "
              f"{list(boxes.shape)}")
    ctx.check(len(scores.shape) == 3, f"Scores must be [N, classes, M], got "
                                      f"{list(scores.shape)}")
    ctx.set_output("Out", (-1, boxes.shape[2] + 2 if boxes.shape[2] > 0 else -1), boxes.dtype)
    ctx.set_lod_level("Out", 1)
