"""fluid.layers' YOLO, ROI-pooling, box and proposal layers (fluid 1.8's layers/detection.py
and the ROI layers of nn.py): yolo_box, yolov3_loss, roi_align, roi_pool, psroi_pool,
prroi_pool, anchor_generator, box_decoder_and_assign, polygon_box_transform,
generate_proposals, distribute_fpn_proposals, collect_fpn_proposals, rpn_target_assign,
generate_proposal_labels. The ops are in
spmd/ops/detection_roi.py and detection_proposals.py.

ROIs are [R, 4] (x1, y1, x2, y2) Variables with lod_level=1: their LoD says how many ROIs
belong to each image, as in fluid.

>>> # feat = conv2d(img [N, 3, 32, 32], ...)          # [N, C, 8, 8], stride 4
>>> # rois = fluid.data("rois", [None, 4], lod_level=1)
>>> # pooled = roi_align(feat, rois, 7, 7, spatial_scale=0.25)   # [R, C, 7, 7]
"""
from __future__ import annotations

import numbers

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from . import tensor
from .helper import LayerHelper, check_variable

__all__ = ["anchor_generator", "box_decoder_and_assign", "collect_fpn_proposals",
           "distribute_fpn_proposals", "generate_proposal_labels", "generate_proposals",
           "polygon_box_transform", "prroi_pool", "psroi_pool", "roi_align", "roi_pool",
           "rpn_target_assign", "yolo_box", "yolov3_loss"]

_FLOATS = {"float32", "float64"}


def _ints(value, arg: str, where: str) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, numbers.Integral) for v in value):
        raise InvalidArgumentError(f"{where}: {arg} must be a list or tuple of ints, got "
                                   f"{value!r}")
    return [int(v) for v in value]


def _check_type(value, kind, arg: str, where: str, kind_name: str):
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InvalidArgumentError(f"{where}: {arg} must be {kind_name}, got "
                                   f"{type(value).__name__}: {value!r}")
    return value


def yolov3_loss(x, gt_box, gt_label, anchors, anchor_mask, class_num, ignore_thresh,
                downsample_ratio, gt_score=None, use_label_smooth=True, name=None,
                scale_x_y=1.0):
    """YOLOv3's loss for one output scale: x [N, len(anchor_mask) * (5 + class_num), H, W],
    gt_box [N, B, 4] (cx, cy, w, h divided by the input size; zero rows are padding),
    gt_label [N, B] int32, gt_score [N, B] (mixup weights, 1 when None). Returns [N].

    >>> # loss = yolov3_loss(x, gt_box, gt_label, anchors=[10, 13, 16, 30, 33, 23],
    >>> #                    anchor_mask=[0, 1, 2], class_num=80, ignore_thresh=0.7,
    >>> #                    downsample_ratio=32)
    """
    where = "yolov3_loss"
    check_variable(x, "x", where, _FLOATS)
    check_variable(gt_box, "gt_box", where, _FLOATS)
    check_variable(gt_label, "gt_label", where, {"int32", "int64"})
    if gt_score is not None:
        check_variable(gt_score, "gt_score", where, _FLOATS)
    _check_type(class_num, numbers.Integral, "class_num", where, "an int")
    _check_type(ignore_thresh, float, "ignore_thresh", where, "a float")
    _check_type(use_label_smooth, bool, "use_label_smooth", where, "a bool")
    helper = LayerHelper(where, name=name)
    loss = helper.create_variable_for_type_inference(x.dtype)
    obj_mask = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    match = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    inputs = {"X": [x], "GTBox": [gt_box], "GTLabel": [gt_label]}
    if gt_score is not None:
        inputs["GTScore"] = [gt_score]
    helper.append_op(where, inputs,
                     {"Loss": [loss], "ObjectnessMask": [obj_mask], "GTMatchMask": [match]},
                     {"anchors": _ints(anchors, "anchors", where),
                      "anchor_mask": _ints(anchor_mask, "anchor_mask", where),
                      "class_num": int(class_num), "ignore_thresh": ignore_thresh,
                      "downsample_ratio": int(downsample_ratio),
                      "use_label_smooth": use_label_smooth, "scale_x_y": float(scale_x_y)})
    return loss


def yolo_box(x, img_size, anchors, class_num, conf_thresh, downsample_ratio, clip_bbox=True,
             name=None, scale_x_y=1.0):
    """Decode a YOLOv3 head into boxes [N, A * H * W, 4] (x1, y1, x2, y2 in the pixels of
    img_size [N, 2] (height, width)) and scores [N, A * H * W, class_num] (objectness times
    class probability; 0 where objectness < conf_thresh).

    >>> # boxes, scores = yolo_box(x, img_size, [10, 13, 16, 30], 80, 0.01, 32)
    """
    where = "yolo_box"
    check_variable(x, "x", where, _FLOATS)
    check_variable(img_size, "img_size", where, {"int32", "int64"})
    _check_type(class_num, numbers.Integral, "class_num", where, "an int")
    _check_type(conf_thresh, float, "conf_thresh", where, "a float")
    helper = LayerHelper(where, name=name)
    boxes = helper.create_variable_for_type_inference(x.dtype)
    scores = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(where, {"X": [x], "ImgSize": [img_size]},
                     {"Boxes": [boxes], "Scores": [scores]},
                     {"anchors": _ints(anchors, "anchors", where), "class_num": int(class_num),
                      "conf_thresh": conf_thresh, "downsample_ratio": int(downsample_ratio),
                      "clip_bbox": bool(clip_bbox), "scale_x_y": float(scale_x_y)})
    return boxes, scores


def _roi_inputs(input, rois, where: str, extra=None):
    check_variable(input, "input", where, _FLOATS)
    check_variable(rois, "rois", where, _FLOATS)
    inputs = {"X": [input], "ROIs": [rois]}
    for slot, value in (extra or {}).items():
        if value is not None:
            check_variable(value, slot, where)
            inputs[slot] = [value]
    return inputs


def roi_align(input, rois, pooled_height=1, pooled_width=1, spatial_scale=1.0,
              sampling_ratio=-1, name=None, rois_lod=None):
    """Average of bilinear samples (sampling_ratio per bin side, or ceil(roi size / pooled)
    when -1) in each of pooled_height x pooled_width bins of every ROI: [R, C, ph, pw].

    >>> # roi_align(feat [N, C, H, W], rois [R, 4] lod_level=1, 7, 7, 0.25)
    """
    where = "roi_align"
    inputs = _roi_inputs(input, rois, where, {"RoisLod": rois_lod})
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(where, inputs, {"Out": [out]},
                     {"pooled_height": pooled_height, "pooled_width": pooled_width,
                      "spatial_scale": spatial_scale, "sampling_ratio": sampling_ratio})
    return out


def roi_pool(input, rois, pooled_height=1, pooled_width=1, spatial_scale=1.0, rois_lod=None):
    """Max over each of pooled_height x pooled_width integer bins of every ROI (corners
    rounded after scaling): [R, C, ph, pw].

    >>> # roi_pool(feat [N, C, H, W], rois [R, 4] lod_level=1, 2, 2, 0.5)
    """
    where = "roi_pool"
    inputs = _roi_inputs(input, rois, where, {"RoisLod": rois_lod})
    helper = LayerHelper(where)
    out = helper.create_variable_for_type_inference(input.dtype)
    argmax = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(where, inputs, {"Out": [out], "Argmax": [argmax]},
                     {"pooled_height": pooled_height, "pooled_width": pooled_width,
                      "spatial_scale": spatial_scale})
    return out


def psroi_pool(input, rois, output_channels, spatial_scale, pooled_height, pooled_width,
               name=None):
    """Position-sensitive ROI pooling (R-FCN): output channel c at bin (i, j) averages input
    channel (c * pooled_height + i) * pooled_width + j over the bin: [R, output_channels,
    ph, pw].

    >>> # psroi_pool(x [N, 2 * 3 * 3, H, W], rois, 2, 1.0, 3, 3)
    """
    where = "psroi_pool"
    _check_type(output_channels, numbers.Integral, "output_channels", where, "an int")
    _check_type(spatial_scale, float, "spatial_scale", where, "a float")
    _check_type(pooled_height, numbers.Integral, "pooled_height", where, "an int")
    _check_type(pooled_width, numbers.Integral, "pooled_width", where, "an int")
    inputs = _roi_inputs(input, rois, where)
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(where, inputs, {"Out": [out]},
                     {"output_channels": int(output_channels), "spatial_scale": spatial_scale,
                      "pooled_height": int(pooled_height), "pooled_width": int(pooled_width)})
    return out


def prroi_pool(input, rois, spatial_scale=1.0, pooled_height=1, pooled_width=1,
               batch_roi_nums=None, name=None):
    """Precise ROI pooling: the integral of the bilinear interpolant over each bin, divided
    by the bin's area; differentiable in the ROIs too. [R, C, ph, pw].

    >>> # prroi_pool(x [N, C, H, W], rois [R, 4] lod_level=1, 1.0, 2, 2)
    """
    where = "prroi_pool"
    _check_type(spatial_scale, float, "spatial_scale", where, "a float")
    _check_type(pooled_height, numbers.Integral, "pooled_height", where, "an int")
    _check_type(pooled_width, numbers.Integral, "pooled_width", where, "an int")
    inputs = _roi_inputs(input, rois, where, {"BatchRoINums": batch_roi_nums})
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(where, inputs, {"Out": [out]},
                     {"spatial_scale": spatial_scale, "pooled_height": int(pooled_height),
                      "pooled_width": int(pooled_width)})
    return out


def anchor_generator(input, anchor_sizes=None, aspect_ratios=None,
                     variance=(0.1, 0.1, 0.2, 0.2), stride=None, offset=0.5, name=None):
    """Faster R-CNN's anchors on input's H x W grid: (Anchors, Variances), each
    [H, W, len(aspect_ratios) * len(anchor_sizes), 4].

    >>> # anchors, var = anchor_generator(feat, [64, 128], [0.5, 1, 2], stride=[16., 16.])
    """
    where = "anchor_generator"
    check_variable(input, "input", where, _FLOATS)
    sizes = anchor_sizes if isinstance(anchor_sizes, (list, tuple)) else [anchor_sizes]
    ratios = aspect_ratios if isinstance(aspect_ratios, (list, tuple)) else [aspect_ratios]
    if not (isinstance(stride, (list, tuple)) and len(stride) == 2):
        raise InvalidArgumentError(f"{where}: stride must be a list or tuple of 2 "
                                   f"(stride_width, stride_height), got {stride!r}")
    helper = LayerHelper(where, name=name)
    anchors = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    var = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(where, {"Input": [input]}, {"Anchors": [anchors], "Variances": [var]},
                     {"anchor_sizes": [float(s) for s in sizes],
                      "aspect_ratios": [float(r) for r in ratios],
                      "variances": [float(v) for v in variance],
                      "stride": [float(s) for s in stride], "offset": float(offset)})
    return anchors, var


def box_decoder_and_assign(prior_box, prior_box_var, target_box, box_score, box_clip,
                           name=None):
    """Decode per-class box deltas target_box [N, classes * 4] against prior_box [N, 4]
    (variances prior_box_var [4]); each prior then takes the box of its best non-background
    class: (DecodeBox [N, classes * 4], OutputAssignBox [N, 4]).

    >>> # decoded, assigned = box_decoder_and_assign(rois, var, deltas, scores, 4.135)
    """
    where = "box_decoder_and_assign"
    for arg, v in (("prior_box", prior_box), ("prior_box_var", prior_box_var),
                   ("target_box", target_box), ("box_score", box_score)):
        check_variable(v, arg, where, _FLOATS)
    helper = LayerHelper(where, name=name)
    decoded = helper.create_variable_for_type_inference(prior_box.dtype)
    assigned = helper.create_variable_for_type_inference(prior_box.dtype)
    helper.append_op(where, {"PriorBox": [prior_box], "PriorBoxVar": [prior_box_var],
                             "TargetBox": [target_box], "BoxScore": [box_score]},
                     {"DecodeBox": [decoded], "OutputAssignBox": [assigned]},
                     {"box_clip": float(box_clip)})
    return decoded, assigned


def polygon_box_transform(input, name=None):
    """EAST's geometry map [N, 2k, H, W] of vertex offsets to vertex coordinates (4 * column
    or 4 * row minus the offset).

    >>> # quad = polygon_box_transform(geo [N, 8, H, W])
    """
    where = "polygon_box_transform"
    check_variable(input, "input", where, _FLOATS)
    if isinstance(input, Variable) and input.ndim != 4:
        raise InvalidArgumentError(f"{where}: input must be 4-D NCHW, got {list(input.shape)}")
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(where, {"Input": [input]}, {"Output": [out]}, {})
    return out


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
    outs = {slot: helper.create_variable_for_type_inference(dtype, stop_gradient=True)
            for slot, dtype in (("LocationIndex", "int32"), ("ScoreIndex", "int32"),
                                ("TargetLabel", "int32"), ("TargetBBox", anchor_box.dtype),
                                ("BBoxInsideWeight", anchor_box.dtype))}
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
