"""Op definitions: fluid 1.8's non-maximum suppression ops multiclass_nms, multiclass_nms2 and
matrix_nms (kernels in spmd/kernels/detection_nms.py); none has a gradient.
"""
from __future__ import annotations

from .detection_ssd import _float_input, _known
from .registry import define_op

_NMS_ATTRS = {"background_label": ("int", 0), "score_threshold": "float",
              "nms_top_k": "int", "nms_threshold": ("float", 0.3), "nms_eta": ("float", 1.0),
              "keep_top_k": "int", "normalized": ("bool", True)}


def _nms_infer(ctx):
    boxes, scores = _float_input(ctx, "BBoxes"), _float_input(ctx, "Scores")
    ctx.check(len(scores.shape) in (2, 3), f"Scores must be [N, C, M] or a LoD [M, C], got "
                                           f"{list(scores.shape)}")
    ctx.check(len(boxes.shape) == 3, f"BBoxes must be 3-D ([N, M, 4] or a LoD [M, C, 4]), got "
                                     f"{list(boxes.shape)}")
    if len(scores.shape) == 3:
        ctx.check(boxes.shape[2] in (4, -1), f"BBoxes [N, M, 4]: the last dimension must be 4, "
                                             f"got {list(boxes.shape)}")
        ctx.check(not (_known(boxes.shape[1]) and _known(scores.shape[2]))
                  or boxes.shape[1] == scores.shape[2],
                  f"BBoxes {list(boxes.shape)} and Scores {list(scores.shape)} must agree on "
                  f"the number of boxes M (BBoxes [N, M, 4], Scores [N, C, M])")
    else:
        ctx.check(boxes.shape[2] in (4, -1), f"BBoxes [M, C, 4]: the last dimension must be "
                                             f"4, got {list(boxes.shape)}")
    ctx.set_output("Out", (-1, 6), boxes.dtype)
    ctx.set_output("Index", (-1, 1), "int32")
    ctx.set_lod_level("Out", 1)
    ctx.set_lod_level("Index", 1)


define_op("multiclass_nms", inputs=["BBoxes", "Scores"], outputs=["Out"], grad=None,
          lod_inputs=("BBoxes", "Scores"), lod_outputs=("Out",), attrs=dict(_NMS_ATTRS))(
    _nms_infer)


define_op("multiclass_nms2", inputs=["BBoxes", "Scores"], outputs=["Out", "Index"], grad=None,
          lod_inputs=("BBoxes", "Scores"), lod_outputs=("Out", "Index"),
          attrs=dict(_NMS_ATTRS))(_nms_infer)


@define_op("matrix_nms", inputs=["BBoxes", "Scores"], outputs=["Out", "Index", "RoisNum?"],
           grad=None, lod_outputs=("Out", "Index"),
           attrs={"background_label": ("int", 0), "score_threshold": "float",
                  "post_threshold": ("float", 0.0), "nms_top_k": "int", "keep_top_k": "int",
                  "normalized": ("bool", True), "use_gaussian": ("bool", False),
                  "gaussian_sigma": ("float", 2.0)})
def _matrix_nms(ctx):
    boxes, scores = _float_input(ctx, "BBoxes"), _float_input(ctx, "Scores")
    ctx.check(len(boxes.shape) == 3 and boxes.shape[2] in (4, -1),
              f"BBoxes must be [N, M, 4], got {list(boxes.shape)}")
    ctx.check(len(scores.shape) == 3, f"Scores must be [N, C, M], got {list(scores.shape)}")
    ctx.set_output("Out", (-1, 6), boxes.dtype)
    ctx.set_output("Index", (-1, 1), "int32")
    ctx.set_output("RoisNum", (-1,), "int32")
    ctx.set_lod_level("Out", 1)
    ctx.set_lod_level("Index", 1)
