"""Op definitions: generate_mask_labels, Mask R-CNN's mask targets of fluid 1.8 (its kernel in
spmd/kernels/detection_masks.py); no gradient.
"""
from __future__ import annotations

from .registry import define_op


@define_op("generate_mask_labels",
           inputs=["ImInfo", "GtClasses", "IsCrowd", "GtSegms", "Rois", "LabelsInt32"],
           outputs=["MaskRois", "RoiHasMaskInt32", "MaskInt32"], grad=None,
           lod_inputs=("GtClasses", "IsCrowd", "GtSegms", "Rois", "LabelsInt32"),
           lod_outputs=("MaskRois", "RoiHasMaskInt32", "MaskInt32"),
           attrs={"num_classes": "int", "resolution": "int"})
def _generate_mask_labels(ctx):
    segms = ctx.input("GtSegms")
    ctx.check(len(segms.shape) == 2 and segms.shape[1] in (2, -1),
              f"GtSegms must be [points, 2] (x, y) with 3 levels of LoD (images, polygons "
              f"per box, points per polygon), got {list(segms.shape)}")
    ctx.check(ctx.attr("num_classes") > 0 and ctx.attr("resolution") > 0,
              f"num_classes and resolution must be > 0, got {ctx.attr('num_classes')}, "
              f"{ctx.attr('resolution')}")
    res = ctx.attr("resolution")
    ctx.set_output("MaskRois", (-1, 4), ctx.input("Rois").dtype)
    ctx.set_output("RoiHasMaskInt32", (-1, 1), "int32")
    ctx.set_output("MaskInt32", (-1, ctx.attr("num_classes") * res * res), "int32")
    for slot in ("MaskRois", "RoiHasMaskInt32", "MaskInt32"):
        ctx.set_lod_level(slot, 1)
