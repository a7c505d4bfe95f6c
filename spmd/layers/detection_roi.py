"""fluid.layers' YOLO, ROI-pooling and box layers (fluid 1.8's layers/detection.py and the ROI
layers of nn.py): yolo_box, yolov3_loss, roi_align, roi_pool, psroi_pool, prroi_pool,
deformable_roi_pooling, roi_perspective_transform, anchor_generator, box_decoder_and_assign,
polygon_box_transform.
The ops are in spmd/ops/detection_roi.py; the region-proposal layers in detection_proposals.py.

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
from .helper import LayerHelper, check_variable

__all__ = ["anchor_generator", "box_decoder_and_assign", "deformable_roi_pooling",
           "polygon_box_transform", "prroi_pool", "psroi_pool", "roi_align", "roi_pool",
           "roi_perspective_transform", "yolo_box", "yolov3_loss"]

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



def _pair(value, arg: str, where: str) -> list[int]:
    pair = [value, value] if isinstance(value, numbers.Integral) else list(value)
    if len(pair) != 2 or not all(isinstance(v, numbers.Integral) and v > 0 for v in pair):
        raise InvalidArgumentError(f"{where}: {arg} must be an int or 2 positive ints, got "
                                   f"{value!r}")
    return [int(v) for v in pair]


def deformable_roi_pooling(input, rois, trans, no_trans=False, spatial_scale=1.0,
                           group_size=(1, 1), pooled_height=1, pooled_width=1, part_size=None,
                           sample_per_part=1, trans_std=0.1, position_sensitive=False,
                           name=None):
    """Deformable (PS)ROI pooling: each bin, moved by its part's offset in trans [R, 2 *
    classes, part_h, part_w] (times trans_std and the ROI's size; none when no_trans),
    averages sample_per_part^2 bilinear samples; position_sensitive reads channel groups as
    psroi_pool. Returns [R, C or C / (ph * pw), ph, pw].

    >>> # deformable_roi_pooling(x [N, C, H, W], rois (lod_level=1), trans, pooled_height=7,
    >>> #                        pooled_width=7, sample_per_part=4)
    """
    where = "deformable_roi_pooling"
    _roi_inputs(input, rois, where)
    check_variable(trans, "trans", where, _FLOATS)
    inputs = {"Input": [input], "ROIs": [rois], "Trans": [trans]}
    channels = input.shape[1]
    output_dim = channels // pooled_height // pooled_width if position_sensitive else channels
    part = [pooled_height, pooled_width] if part_size is None else _pair(part_size, "part_size",
                                                                        where)
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    count = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("deformable_psroi_pooling", inputs, {"Output": [out], "TopCount": [count]},
                     {"no_trans": bool(no_trans), "spatial_scale": float(spatial_scale),
                      "output_dim": int(output_dim),
                      "group_size": _pair(group_size, "group_size", where),
                      "pooled_height": int(pooled_height), "pooled_width": int(pooled_width),
                      "part_size": part, "sample_per_part": int(sample_per_part),
                      "trans_std": float(trans_std)})
    return out


def roi_perspective_transform(input, rois, transformed_height, transformed_width,
                              spatial_scale=1.0, name=None):
    """Warp each quadrilateral ROI (rois [R, 8]: x0, y0, ..., x3, y3 clockwise from the top
    left, lod_level=1) onto a transformed_height x transformed_width grid by a perspective
    transform, sampling bilinearly. Returns (out [R, C, th, tw], mask [R, 1, th, tw] int32:
    1 where the source lies in the quad and the map, transform_matrix [R, 9]).

    >>> # out, mask, matrix = roi_perspective_transform(feat, quads, 8, 32, 0.25)
    """
    where = "roi_perspective_transform"
    check_variable(input, "input", where, _FLOATS)
    check_variable(rois, "rois", where, _FLOATS)
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    matrix = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    idx = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    weights = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(where, {"X": [input], "ROIs": [rois]},
                     {"Out": [out], "Mask": [mask], "TransformMatrix": [matrix],
                      "Out2InIdx": [idx], "Out2InWeights": [weights]},
                     {"transformed_height": int(transformed_height),
                      "transformed_width": int(transformed_width),
                      "spatial_scale": float(spatial_scale)})
    return out, mask, matrix
