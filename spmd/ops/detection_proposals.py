"""Op definitions: Faster R-CNN / FPN region proposals of fluid 1.8: generate_proposals,
distribute_fpn_proposals, collect_fpn_proposals (kernels in spmd/kernels/detection_proposals.py).

Each output of ROIs carries LoD (ROIs per image), as fluid's; none has a gradient.
"""
from __future__ import annotations

from .registry import define_op


@define_op("generate_proposals",
           inputs=["Scores", "BboxDeltas", "ImInfo", "Anchors", "Variances"],
           outputs=["RpnRois", "RpnRoiProbs", "RpnRoisLod?"], grad=None,
           lod_outputs=("RpnRois", "RpnRoiProbs"),
           attrs={"pre_nms_topN": ("int", 6000), "post_nms_topN": ("int", 1000),
                  "nms_thresh": ("float", 0.5), "min_size": ("float", 0.1),
                  "eta": ("float", 1.0)})
def _generate_proposals(ctx):
    scores, deltas = ctx.input("Scores"), ctx.input("BboxDeltas")
    ctx.check(len(scores.shape) == 4 and len(deltas.shape) == 4,
              f"Scores must be [N, A, H, W] and BboxDeltas [N, 4A, H, W], got "
              f"{list(scores.shape)} and {list(deltas.shape)}")
    ctx.check(scores.shape[1] < 0 or deltas.shape[1] < 0 or deltas.shape[1] == 4 * scores.shape[1],
              f"BboxDeltas' {deltas.shape[1]} channels must be 4 * Scores' {scores.shape[1]}")
    for slot in ("Anchors", "Variances"):
        v = ctx.input(slot)
        ctx.check(v.shape[-1] in (4, -1), f"{slot} must end in 4 (x1, y1, x2, y2), got "
                                          f"{list(v.shape)}")
    info = ctx.input("ImInfo")
    ctx.check(len(info.shape) == 2 and info.shape[1] in (3, -1),
              f"ImInfo must be [N, 3] (height, width, scale), got {list(info.shape)}")
    ctx.check(ctx.attr("eta") <= 1.0, f"eta must be <= 1, got {ctx.attr('eta')}")
    ctx.set_output("RpnRois", (-1, 4), deltas.dtype)
    ctx.set_output("RpnRoiProbs", (-1, 1), scores.dtype)
    ctx.set_output("RpnRoisLod", (scores.shape[0],), "int64")
    ctx.set_lod_level("RpnRois", 1)
    ctx.set_lod_level("RpnRoiProbs", 1)


@define_op("distribute_fpn_proposals", inputs=["FpnRois"],
           outputs=["MultiFpnRois*", "RestoreIndex"], grad=None, lod_inputs=("FpnRois",),
           lod_outputs=("MultiFpnRois",),
           attrs={"min_level": "int", "max_level": "int", "refer_level": "int",
                  "refer_scale": "int"})
def _distribute_fpn_proposals(ctx):
    rois = ctx.input("FpnRois")
    ctx.check(len(rois.shape) == 2 and rois.shape[1] in (4, -1),
              f"FpnRois must be [R, 4], got {list(rois.shape)}")
    lo, hi = ctx.attr("min_level"), ctx.attr("max_level")
    ctx.check(0 <= lo <= hi, f"need 0 <= min_level <= max_level, got {lo}, {hi}")
    ctx.check(ctx.num_outputs("MultiFpnRois") == hi - lo + 1,
              f"MultiFpnRois must bind max_level - min_level + 1 = {hi - lo + 1} variables, "
              f"got {ctx.num_outputs('MultiFpnRois')}")
    ctx.check(ctx.attr("refer_scale") > 0, f"refer_scale must be > 0, got "
                                           f"{ctx.attr('refer_scale')}")
    ctx.set_output("MultiFpnRois", (-1, 4), rois.dtype)
    ctx.set_output("RestoreIndex", (rois.shape[0], 1), "int32")
    ctx.set_lod_level("MultiFpnRois", 1)


@define_op("collect_fpn_proposals", inputs=["MultiLevelRois*", "MultiLevelScores*"],
           outputs=["FpnRois"], grad=None, lod_inputs=("MultiLevelRois", "MultiLevelScores"),
           lod_outputs=("FpnRois",), attrs={"post_nms_topN": ("int", 100)})
def _collect_fpn_proposals(ctx):
    rois, scores = ctx.inputs("MultiLevelRois"), ctx.inputs("MultiLevelScores")
    ctx.check(rois and len(rois) == len(scores),
              f"give one MultiLevelScores per MultiLevelRois, got {len(rois)} and {len(scores)}")
    ctx.check(ctx.attr("post_nms_topN") > 0,
              f"post_nms_topN must be > 0, got {ctx.attr('post_nms_topN')}")
    ctx.set_output("FpnRois", (-1, 4), rois[0].dtype)
    ctx.set_lod_level("FpnRois", 1)


@define_op("retinanet_detection_output", inputs=["BBoxes*", "Scores*", "Anchors*", "ImInfo"],
           outputs=["Out"], grad=None, lod_outputs=("Out",),
           attrs={"score_threshold": ("float", 0.05), "nms_top_k": ("int", 1000),
                  "keep_top_k": ("int", 100), "nms_threshold": ("float", 0.3),
                  "nms_eta": ("float", 1.0)})
def _retinanet_detection_output(ctx):
    boxes, scores = ctx.inputs("BBoxes"), ctx.inputs("Scores")
    anchors = ctx.inputs("Anchors")
    ctx.check(boxes and len(boxes) == len(scores) == len(anchors),
              f"give one BBoxes, Scores and Anchors per FPN level, got {len(boxes)}, "
              f"{len(scores)} and {len(anchors)}")
    for i, (b, s) in enumerate(zip(boxes, scores)):
        ctx.check(len(b.shape) == 3 and len(s.shape) == 3,
                  f"level {i}: BBoxes must be [N, M, 4] and Scores [N, M, classes], got "
                  f"{list(b.shape)} and {list(s.shape)}")
    ctx.set_output("Out", (-1, 6), boxes[0].dtype)
    ctx.set_lod_level("Out", 1)


