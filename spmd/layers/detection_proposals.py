"""fluid.layers' region-proposal layers of Faster R-CNN, FPN and RetinaNet (fluid 1.8's
layers/detection.py): generate_proposals, distribute_fpn_proposals, collect_fpn_proposals,
rpn_target_assign, retinanet_target_assign, retinanet_detection_output,
generate_proposal_labels, generate_mask_labels, locality_aware_nms. The ops are in
spmd/ops/detection_proposals.py. Boxes of a batch carry LoD (boxes per image), as in fluid;
use_random samples from spmd's generator (fluid's own engine cannot be reproduced;
use_random=False gives fluid's samples).

>>> # rois, probs = generate_proposals(scores, deltas, im_info, anchors, variances)
>>> # rois, labels, targets, w_in, w_out = generate_proposal_labels(
>>> #     rois, gt_classes, is_crowd, gt_boxes, im_info, class_nums=81)
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from . import tensor
from .helper import LayerHelper, check_variable

__all__ = ["collect_fpn_proposals", "distribute_fpn_proposals", "generate_mask_labels",
           "generate_proposal_labels",
           "generate_proposals", "locality_aware_nms", "retinanet_detection_output",
           "retinanet_target_assign", "rpn_target_assign"]

_FLOATS = {"float32", "float64"}


def generate_proposals(scores, bbox_deltas, im_info, anchors, variances, pre_nms_top_n=6000,
                       post_nms_top_n=1000, nms_thresh=0.5, min_size=0.1, eta=1.0, name=None,
                       return_rois_num=False):
    """RPN proposals per image: the pre_nms_top_n best anchors decoded by bbox_deltas, clipped
    to im_info (height, width, scale), small ones dropped, NMS, the post_nms_top_n best.
    Returns (rois [R, 4], probs [R, 1]), both with LoD (ROIs per image); with
    return_rois_num also fluid 1.8's RpnRoisLod (the LoD offsets past the first).

    >>> # rois, probs = generate_proposals(scores [N, A, H, W], deltas [N, 4A, H, W],
    >>> #                                  im_info, anchors, variances)
    """
    where = "generate_proposals"
    for arg, v in (("scores", scores), ("bbox_deltas", bbox_deltas), ("im_info", im_info),
                   ("anchors", anchors), ("variances", variances)):
        check_variable(v, arg, where, _FLOATS)
    helper = LayerHelper(where, name=name)
    rois = helper.create_variable_for_type_inference(bbox_deltas.dtype, stop_gradient=True)
    probs = helper.create_variable_for_type_inference(scores.dtype, stop_gradient=True)
    rois_lod = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(where, {"Scores": [scores], "BboxDeltas": [bbox_deltas],
                             "ImInfo": [im_info], "Anchors": [anchors],
                             "Variances": [variances]},
                     {"RpnRois": [rois], "RpnRoiProbs": [probs], "RpnRoisLod": [rois_lod]},
                     {"pre_nms_topN": int(pre_nms_top_n), "post_nms_topN": int(post_nms_top_n),
                      "nms_thresh": float(nms_thresh), "min_size": float(min_size),
                      "eta": float(eta)})
    return (rois, probs, rois_lod) if return_rois_num else (rois, probs)


def distribute_fpn_proposals(fpn_rois, min_level, max_level, refer_level, refer_scale,
                             name=None):
    """FPN: each ROI to the pyramid level floor(log2(sqrt(area) / refer_scale) +
    refer_level), clamped to [min_level, max_level]. Returns (one LoD ROI tensor per level,
    restore_index [R, 1]: row i of the levels laid end to end came from ROI ...).

    >>> # multi_rois, restore = distribute_fpn_proposals(rois, 2, 5, 4, 224)
    """
    where = "distribute_fpn_proposals"
    check_variable(fpn_rois, "fpn_rois", where, _FLOATS)
    helper = LayerHelper(where, name=name)
    multi = [helper.create_variable_for_type_inference(fpn_rois.dtype, stop_gradient=True)
             for _ in range(max_level - min_level + 1)]
    restore = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(where, {"FpnRois": [fpn_rois]},
                     {"MultiFpnRois": multi, "RestoreIndex": [restore]},
                     {"min_level": int(min_level), "max_level": int(max_level),
                      "refer_level": int(refer_level), "refer_scale": int(refer_scale)})
    return multi, restore


def collect_fpn_proposals(multi_rois, multi_scores, min_level, max_level, post_nms_top_n,
                          name=None):
    """FPN: the post_nms_top_n best-scoring ROIs of levels min_level..max_level together,
    grouped by image: [R, 4] with LoD.

    >>> # rois = collect_fpn_proposals([r2, r3, r4], [s2, s3, s4], 2, 4, 100)
    """
    where = "collect_fpn_proposals"
    count = max_level - min_level + 1
    rois, scores = list(multi_rois)[:count], list(multi_scores)[:count]
    for i, (r, sc) in enumerate(zip(rois, scores)):
        check_variable(r, f"multi_rois[{i}]", where, _FLOATS)
        check_variable(sc, f"multi_scores[{i}]", where, _FLOATS)
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(rois[0].dtype, stop_gradient=True)
    helper.append_op(where, {"MultiLevelRois": rois, "MultiLevelScores": scores},
                     {"FpnRois": [out]}, {"post_nms_topN": int(post_nms_top_n)})
    return out


def rpn_target_assign(bbox_pred, cls_logits, anchor_box, anchor_var, gt_boxes, is_crowd,
                      im_info, rpn_batch_size_per_im=256, rpn_straddle_thresh=0.0,
                      rpn_fg_fraction=0.5, rpn_positive_overlap=0.7, rpn_negative_overlap=0.3,
                      use_random=True):
    """RPN training targets (Faster R-CNN): anchors inside the image labelled foreground (a
    ground truth's best, or overlap >= rpn_positive_overlap) or background (< negative),
    sampled to rpn_batch_size_per_im per image (rpn_fg_fraction foreground; uniformly with
    use_random, from spmd's generator, else the first ones). gt_boxes and is_crowd carry LoD
    (boxes per image). Returns (the scored cls_logits rows, the located bbox_pred rows,
    target_label, target_bbox, bbox_inside_weight), as fluid's layer.

    >>> # score, loc, label, target, weight = rpn_target_assign(
    >>> #     bbox_pred, cls_logits, anchors, var, gt_boxes, is_crowd, im_info)
    """
    where = "rpn_target_assign"
    for arg, v in (("bbox_pred", bbox_pred), ("cls_logits", cls_logits),
                   ("anchor_box", anchor_box), ("anchor_var", anchor_var),
                   ("gt_boxes", gt_boxes), ("im_info", im_info)):
        check_variable(v, arg, where, _FLOATS)
    check_variable(is_crowd, "is_crowd", where, {"int32"})
    helper = LayerHelper(where)
    outs = _target_vars(helper, anchor_box.dtype)
    helper.append_op(where, {"Anchor": [anchor_box], "GtBoxes": [gt_boxes],
                             "IsCrowd": [is_crowd], "ImInfo": [im_info]},
                     {k: [v] for k, v in outs.items()},
                     {"rpn_batch_size_per_im": int(rpn_batch_size_per_im),
                      "rpn_straddle_thresh": float(rpn_straddle_thresh),
                      "rpn_positive_overlap": float(rpn_positive_overlap),
                      "rpn_negative_overlap": float(rpn_negative_overlap),
                      "rpn_fg_fraction": float(rpn_fg_fraction), "use_random": bool(use_random)})
    scores = tensor.gather(tensor.reshape(cls_logits, (-1, 1)), outs["ScoreIndex"])
    locations = tensor.gather(tensor.reshape(bbox_pred, (-1, 4)), outs["LocationIndex"])
    return scores, locations, outs["TargetLabel"], outs["TargetBBox"], outs["BBoxInsideWeight"]


def generate_proposal_labels(rpn_rois, gt_classes, is_crowd, gt_boxes, im_info,
                             batch_size_per_im=256, fg_fraction=0.25, fg_thresh=0.25,
                             bg_thresh_hi=0.5, bg_thresh_lo=0.0,
                             bbox_reg_weights=(0.1, 0.1, 0.2, 0.2), class_nums=None,
                             use_random=True, is_cls_agnostic=False, is_cascade_rcnn=False):
    """Fast R-CNN training samples per image from the proposals and the ground truth (all
    with LoD): (rois, labels_int32, bbox_targets [R, 4 * class_nums], bbox_inside_weights,
    bbox_outside_weights), as fluid's layer. use_random samples from spmd's generator.

    >>> # rois, labels, targets, w_in, w_out = generate_proposal_labels(
    >>> #     rpn_rois, gt_classes, is_crowd, gt_boxes, im_info, class_nums=81)
    """
    where = "generate_proposal_labels"
    for arg, v in (("rpn_rois", rpn_rois), ("gt_boxes", gt_boxes), ("im_info", im_info)):
        check_variable(v, arg, where, _FLOATS)
    check_variable(gt_classes, "gt_classes", where, {"int32"})
    check_variable(is_crowd, "is_crowd", where, {"int32"})
    if not isinstance(class_nums, numbers.Integral) or class_nums <= 0:
        raise InvalidArgumentError(f"{where}: class_nums (the classes, background included) "
                                   f"must be a positive int, got {class_nums!r}")
    helper = LayerHelper(where)
    slots = ("Rois", "LabelsInt32", "BboxTargets", "BboxInsideWeights", "BboxOutsideWeights")
    outs = {s: helper.create_variable_for_type_inference(
        "int32" if s == "LabelsInt32" else rpn_rois.dtype, stop_gradient=True) for s in slots}
    helper.append_op(where, {"RpnRois": [rpn_rois], "GtClasses": [gt_classes],
                             "IsCrowd": [is_crowd], "GtBoxes": [gt_boxes], "ImInfo": [im_info]},
                     {k: [v] for k, v in outs.items()},
                     {"batch_size_per_im": int(batch_size_per_im),
                      "fg_fraction": float(fg_fraction), "fg_thresh": float(fg_thresh),
                      "bg_thresh_hi": float(bg_thresh_hi), "bg_thresh_lo": float(bg_thresh_lo),
                      "bbox_reg_weights": [float(w) for w in bbox_reg_weights],
                      "class_nums": int(class_nums), "use_random": bool(use_random),
                      "is_cls_agnostic": bool(is_cls_agnostic),
                      "is_cascade_rcnn": bool(is_cascade_rcnn)})
    return tuple(outs[s] for s in slots)


def _target_vars(helper, dtype, extra=()):
    return {slot: helper.create_variable_for_type_inference(kind, stop_gradient=True)
            for slot, kind in (("LocationIndex", "int32"), ("ScoreIndex", "int32"),
                               ("TargetLabel", "int32"), ("TargetBBox", dtype),
                               ("BBoxInsideWeight", dtype), *extra)}


def retinanet_target_assign(bbox_pred, cls_logits, anchor_box, anchor_var, gt_boxes, gt_labels,
                            is_crowd, im_info, num_classes=1, positive_overlap=0.5,
                            negative_overlap=0.4):
    """RetinaNet's targets: every anchor labelled with its best box's class (overlap >=
    positive_overlap, or a box's best anchor) or background (< negative_overlap), none
    sampled away. gt_boxes, gt_labels and is_crowd carry LoD. Returns (the scored cls_logits
    rows [F + B, num_classes], the located bbox_pred rows, target_label, target_bbox,
    bbox_inside_weight, fg_num [N, 1]: foreground anchors per image + 1), as fluid's layer.

    >>> # score, loc, label, target, weight, fg_num = retinanet_target_assign(
    >>> #     bbox_pred, cls_logits, anchors, var, gt_boxes, gt_labels, is_crowd, im_info, 80)
    """
    where = "retinanet_target_assign"
    for arg, v in (("bbox_pred", bbox_pred), ("cls_logits", cls_logits),
                   ("anchor_box", anchor_box), ("anchor_var", anchor_var),
                   ("gt_boxes", gt_boxes), ("im_info", im_info)):
        check_variable(v, arg, where, _FLOATS)
    check_variable(gt_labels, "gt_labels", where, {"int32"})
    check_variable(is_crowd, "is_crowd", where, {"int32"})
    helper = LayerHelper(where)
    outs = _target_vars(helper, anchor_box.dtype, (("ForegroundNumber", "int32"),))
    helper.append_op(where, {"Anchor": [anchor_box], "GtBoxes": [gt_boxes],
                             "GtLabels": [gt_labels], "IsCrowd": [is_crowd],
                             "ImInfo": [im_info]},
                     {k: [v] for k, v in outs.items()},
                     {"positive_overlap": float(positive_overlap),
                      "negative_overlap": float(negative_overlap)})
    scores = tensor.gather(tensor.reshape(cls_logits, (-1, int(num_classes))),
                           outs["ScoreIndex"])
    locations = tensor.gather(tensor.reshape(bbox_pred, (-1, 4)), outs["LocationIndex"])
    return (scores, locations, outs["TargetLabel"], outs["TargetBBox"],
            outs["BBoxInsideWeight"], outs["ForegroundNumber"])


def retinanet_detection_output(bboxes, scores, anchors, im_info, score_threshold=0.05,
                               nms_top_k=1000, keep_top_k=100, nms_threshold=0.3,
                               nms_eta=1.0):
    """RetinaNet inference over FPN levels (lists of bboxes [N, Mi, 4] deltas, scores
    [N, Mi, C] probabilities, anchors [Mi, 4]): per level the nms_top_k best scores over
    score_threshold (the last level's over 0) decoded and clipped to the original image,
    NMS per class, the keep_top_k best per image. Rows (label 1..C, score, x1, y1, x2, y2)
    with LoD (rows per image).

    >>> # dets = retinanet_detection_output([b3, b4], [s3, s4], [a3, a4], im_info)
    """
    where = "retinanet_detection_output"
    bboxes, scores, anchors = list(bboxes), list(scores), list(anchors)
    if not bboxes or not len(bboxes) == len(scores) == len(anchors):
        raise InvalidArgumentError(
            f"{where}: give one bboxes, scores and anchors Variable per FPN level, got "
            f"{len(bboxes)}, {len(scores)} and {len(anchors)}")
    for arg, group in (("bboxes", bboxes), ("scores", scores), ("anchors", anchors)):
        for i, v in enumerate(group):
            check_variable(v, f"{arg}[{i}]", where, _FLOATS)
    check_variable(im_info, "im_info", where, _FLOATS)
    helper = LayerHelper(where)
    out = helper.create_variable_for_type_inference(bboxes[0].dtype, stop_gradient=True)
    helper.append_op(where, {"BBoxes": bboxes, "Scores": scores, "Anchors": anchors,
                             "ImInfo": [im_info]}, {"Out": [out]},
                     {"score_threshold": float(score_threshold), "nms_top_k": int(nms_top_k),
                      "keep_top_k": int(keep_top_k), "nms_threshold": float(nms_threshold),
                      "nms_eta": float(nms_eta)})
    return out


def locality_aware_nms(bboxes, scores, score_threshold, nms_top_k, keep_top_k,
                       nms_threshold=0.3, normalized=True, nms_eta=1.0, background_label=-1,
                       name=None):
    """EAST's locality-aware NMS: bboxes [N, M, 4 or 8 (a quadrilateral's points), ...],
    scores [N, C, M]; per class consecutive boxes overlapping more than nms_threshold are
    merged (score-weighted, scores added), then greedy NMS; keep_top_k per image. Rows
    (label, score, coordinates) with LoD (rows per image); [[-1]] when none is kept.

    >>> # out = locality_aware_nms(quads [N, M, 8], scores [N, 1, M], 0.5, 200, 100)
    """
    where = "locality_aware_nms"
    check_variable(bboxes, "bboxes", where, _FLOATS)
    check_variable(scores, "scores", where, _FLOATS)
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(bboxes.dtype, stop_gradient=True)
    helper.append_op(where, {"BBoxes": [bboxes], "Scores": [scores]}, {"Out": [out]},
                     {"background_label": int(background_label),
                      "score_threshold": float(score_threshold), "nms_top_k": int(nms_top_k),
                      "nms_threshold": float(nms_threshold), "nms_eta": float(nms_eta),
                      "keep_top_k": int(keep_top_k), "normalized": bool(normalized)})
    return out


def generate_mask_labels(im_info, gt_classes, is_crowd, gt_segms, rois, labels_int32,
                         num_classes, resolution):
    """Mask R-CNN's mask targets: every foreground ROI of rois / labels_int32 (from
    generate_proposal_labels) gets the polygons (gt_segms [points, 2], LoD: boxes per image,
    polygons per box, points per polygon) of the box it overlaps most, rasterized on a
    resolution x resolution grid over it, in its class's column (-1 elsewhere). Returns
    (mask_rois, roi_has_mask_int32: each row's index among its image's ROIs, mask_int32
    [P, num_classes * resolution ** 2]), with LoD; an image without foreground gives one
    placeholder row of -1, as fluid.

    >>> # mask_rois, has_mask, masks = generate_mask_labels(
    >>> #     im_info, gt_classes, is_crowd, gt_segms, rois, labels, 81, 14)
    """
    where = "generate_mask_labels"
    for arg, v in (("im_info", im_info), ("gt_segms", gt_segms), ("rois", rois)):
        check_variable(v, arg, where, _FLOATS)
    for arg, v in (("gt_classes", gt_classes), ("is_crowd", is_crowd),
                   ("labels_int32", labels_int32)):
        check_variable(v, arg, where, {"int32"})
    helper = LayerHelper(where)
    mask_rois = helper.create_variable_for_type_inference(rois.dtype, stop_gradient=True)
    has_mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    masks = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(where, {"ImInfo": [im_info], "GtClasses": [gt_classes],
                             "IsCrowd": [is_crowd], "GtSegms": [gt_segms], "Rois": [rois],
                             "LabelsInt32": [labels_int32]},
                     {"MaskRois": [mask_rois], "RoiHasMaskInt32": [has_mask],
                      "MaskInt32": [masks]},
                     {"num_classes": int(num_classes), "resolution": int(resolution)})
    return mask_rois, has_mask, masks
