"""Op definitions: roi_perspective_transform, each ROI quadrilateral warped to a rectangle (its
kernel and gradient in spmd/kernels/detection_perspective.py).
"""
from __future__ import annotations

from .detection_roi import _check_nchw
from .registry import define_op


@define_op("roi_perspective_transform", inputs=["X", "ROIs"],
           outputs=["Out", "Mask", "TransformMatrix", "Out2InIdx", "Out2InWeights"],
           no_grad_inputs=("ROIs",), grad_uses=("X", "ROIs"), grad_no_need_buffer=("X",),
           nondiff_outputs=("Mask", "TransformMatrix", "Out2InIdx", "Out2InWeights"),
           lod_inputs=("ROIs",), share_lod=(("ROIs", "Out"),),
           attrs={"transformed_height": "int", "transformed_width": "int",
                  "spatial_scale": ("float", 1.0)})
def _roi_perspective_transform(ctx):
    x, rois = _check_nchw(ctx, "X"), ctx.input("ROIs")
    ctx.check(len(rois.shape) == 2 and rois.shape[1] in (8, -1),
              f"ROIs must be [R, 8] quadrilaterals (x0, y0, ..., x3, y3), got "
              f"{list(rois.shape)}")
    th, tw = ctx.attr("transformed_height"), ctx.attr("transformed_width")
    ctx.check(th > 0 and tw > 0 and ctx.attr("spatial_scale") > 0,
              f"transformed_height, transformed_width and spatial_scale must be > 0, got "
              f"{th}, {tw}, {ctx.attr('spatial_scale')}")
    r = rois.shape[0]
    ctx.set_output("Out", (r, x.shape[1], th, tw), x.dtype)
    ctx.set_output("Mask", (r, 1, th, tw), "int32")
    ctx.set_output("TransformMatrix", (r, 9), x.dtype)
    size = r * x.shape[1] * th * tw if r > 0 and x.shape[1] > 0 else -1
    ctx.set_output("Out2InIdx", (size, 4), "int32")
    ctx.set_output("Out2InWeights", (size, 4), x.dtype)
