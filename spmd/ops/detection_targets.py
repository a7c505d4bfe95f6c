"""Op definitions: the training-target ops of fluid 1.8's two-stage and RetinaNet detectors:
rpn_target_assign, generate_proposal_labels, retinanet_target_assign (kernels in
spmd/kernels/detection_targets.py); none has a gradient.
"""
from __future__ import annotations

from .registry import define_op


@define_op("rpn_target_assign", inputs=["Anchor", "GtBoxes", "IsCrowd", "ImInfo"],
           outputs=["LocationIndex", "ScoreIndex", "TargetBBox", "TargetLabel",
                    "BBoxInsideWeight"], grad=None, random=True,
           lod_inputs=("GtBoxes", "IsCrowd"),
           lod_outputs=("LocationIndex", "ScoreIndex", "TargetBBox", "TargetLabel",
                        "BBoxInsideWeight"),
           attrs={"rpn_batch_size_per_im": ("int", 256), "rpn_straddle_thresh": ("float", 0.0),
                  "rpn_positive_overlap": ("float", 0.7), "rpn_negative_overlap": ("float", 0.3),
                  "rpn_fg_fraction": ("float", 0.25), "use_random": ("bool", True)})
def _rpn_target_assign(ctx):
    anchor, gt = ctx.input("Anchor"), ctx.input("GtBoxes")
    ctx.check(len(anchor.shape) == 2 and anchor.shape[1] in (4, -1),
              f"Anchor must be [A, 4], got {list(anchor.shape)}")
    ctx.check(len(gt.shape) == 2 and gt.shape[1] in (4, -1),
              f"GtBoxes must be [G, 4] with LoD (boxes per image), got {list(gt.shape)}")
    info = ctx.input("ImInfo")
    ctx.check(len(info.shape) == 2 and info.shape[1] in (3, -1),
              f"ImInfo must be [N, 3] (height, width, scale), got {list(info.shape)}")
    ctx.set_output("LocationIndex", (-1,), "int32")
    ctx.set_output("ScoreIndex", (-1,), "int32")
    ctx.set_output("TargetBBox", (-1, 4), anchor.dtype)
    ctx.set_output("TargetLabel", (-1, 1), "int32")
    ctx.set_output("BBoxInsideWeight", (-1, 4), anchor.dtype)
    for slot in ("LocationIndex", "ScoreIndex", "TargetBBox", "TargetLabel", "BBoxInsideWeight"):
        ctx.set_lod_level(slot, 1)


@define_op("generate_proposal_labels",
           inputs=["RpnRois", "GtClasses", "IsCrowd", "GtBoxes", "ImInfo"],
           outputs=["Rois", "LabelsInt32", "BboxTargets", "BboxInsideWeights",
                    "BboxOutsideWeights"], grad=None, random=True,
           lod_inputs=("RpnRois", "GtClasses", "IsCrowd", "GtBoxes"),
           lod_outputs=("Rois", "LabelsInt32", "BboxTargets", "BboxInsideWeights",
                        "BboxOutsideWeights"),
           attrs={"batch_size_per_im": ("int", 256), "fg_fraction": ("float", 0.25),
                  "fg_thresh": ("float", 0.25), "bg_thresh_hi": ("float", 0.5),
                  "bg_thresh_lo": ("float", 0.0),
                  "bbox_reg_weights": ("floats", [0.1, 0.1, 0.2, 0.2]), "class_nums": "int",
                  "use_random": ("bool", True), "is_cascade_rcnn": ("bool", False),
                  "is_cls_agnostic": ("bool", False)})
def _generate_proposal_labels(ctx):
    rois = ctx.input("RpnRois")
    ctx.check(len(rois.shape) == 2 and rois.shape[1] in (4, -1),
              f"RpnRois must be [R, 4] with LoD (ROIs per image), got {list(rois.shape)}")
    ctx.check(ctx.attr("class_nums") > 0, f"class_nums must be > 0, got {ctx.attr('class_nums')}")
    ctx.check(len(ctx.attr("bbox_reg_weights")) == 4,
              f"bbox_reg_weights must hold 4 numbers, got {ctx.attr('bbox_reg_weights')}")
    width = 4 * ctx.attr("class_nums")
    ctx.set_output("Rois", (-1, 4), rois.dtype)
    ctx.set_output("LabelsInt32", (-1, 1), "int32")
    for slot in ("BboxTargets", "BboxInsideWeights", "BboxOutsideWeights"):
        ctx.set_output(slot, (-1, width), rois.dtype)
    for slot in ("Rois", "LabelsInt32", "BboxTargets", "BboxInsideWeights",
                 "BboxOutsideWeights"):
        ctx.set_lod_level(slot, 1)


@define_op("retinanet_target_assign",
           inputs=["Anchor", "GtBoxes", "GtLabels", "IsCrowd", "ImInfo"],
           outputs=["LocationIndex", "ScoreIndex", "TargetBBox", "TargetLabel",
                    "BBoxInsideWeight", "ForegroundNumber"], grad=None,
           lod_inputs=("GtBoxes", "GtLabels", "IsCrowd"),
           lod_outputs=("LocationIndex", "ScoreIndex", "TargetBBox", "TargetLabel",
                        "BBoxInsideWeight", "ForegroundNumber"),
           attrs={"positive_overlap": ("float", 0.5), "negative_overlap": ("float", 0.4)})
def _retinanet_target_assign(ctx):
    _rpn_target_assign(ctx)
    ctx.set_output("ForegroundNumber", (-1, 1), "int32")
    ctx.set_lod_level("ForegroundNumber", 1)
