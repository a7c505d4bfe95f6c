"""fluid.layers' SSD-family detection layers (fluid 1.8's layers/detection.py): prior_box,
density_prior_box, multi_box_head, box_coder, iou_similarity, bipartite_match, target_assign,
ssd_loss, multiclass_nms, detection_output, box_clip and detection_map (sigmoid_focal_loss
is in loss.py). The ops are in spmd/ops/detection_ssd.py.

ssd_loss is fluid's composition: IoU of ground truth and priors, bipartite (+ per prediction)
matching, hard negative mining on the softmax loss, encoded box targets; its gradient flows
through softmax_with_cross_entropy and smooth_l1 only, as in fluid.

>>> # locs, confs, box, var = multi_box_head([f1, f2], image, base_size=64, num_classes=3,
>>> #                                        aspect_ratios=[[2.], [2.]], min_sizes=[16., 32.],
>>> #                                        max_sizes=[32., 48.])
>>> # loss = ssd_loss(locs, confs, gt_box, gt_label, box, var)
"""
from __future__ import annotations

import math

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from . import conv, loss, manip, math_ops, nn, tensor
from .helper import LayerHelper, check_variable

# detection_map is fluid.layers.detection.detection_map only (fluid 1.8 keeps it out of
# fluid.layers; fluid.metrics.DetectionMAP builds it)
__all__ = ["bipartite_match", "box_clip", "box_coder", "density_prior_box", "detection_output",
           "iou_similarity", "matrix_nms", "multi_box_head", "multiclass_nms",
           "prior_box", "ssd_loss", "target_assign"]

_FLOATS = {"float32", "float64"}


def _list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _out(helper, dtype, stop_gradient=True):
    """An output of one of these ops: none has a gradient, so none is opened to one."""
    return helper.create_variable_for_type_inference(dtype, stop_gradient=stop_gradient)


def _steps(steps, where):
    if not (isinstance(steps, (list, tuple)) and len(steps) == 2):
        raise InvalidArgumentError(
            f"{where}: steps must be a list or tuple of 2 (step_width, step_height), got "
            f"{steps!r}")
    return [float(s) for s in steps]


def _anchor_op(op, input, image, attrs, name):
    helper = LayerHelper(op, name=name)
    check_variable(input, "input", op, dtypes=_FLOATS | {"uint8", "int8"})
    check_variable(image, "image", op)
    box, var = _out(helper, input.dtype, True), _out(helper, input.dtype, True)
    helper.append_op(op, {"Input": [input], "Image": [image]},
                     {"Boxes": [box], "Variances": [var]}, attrs)
    return box, var


def prior_box(input, image, min_sizes, max_sizes=None, aspect_ratios=[1.0],  # noqa: B006
              variance=[0.1, 0.1, 0.2, 0.2], flip=False, clip=False,  # noqa: B006
              steps=[0.0, 0.0], offset=0.5, name=None,  # noqa: B006
              min_max_aspect_ratios_order=False):
    """SSD prior (anchor) boxes of a feature map: (Boxes, Variances), each [H, W, P, 4].

    >>> # box, var = prior_box(feature, image, min_sizes=[16.], max_sizes=[32.],
    >>> #                      aspect_ratios=[2.], flip=True)
    """
    step_w, step_h = _steps(steps, "prior_box")
    attrs = {"min_sizes": [float(m) for m in _list(min_sizes)],
             "aspect_ratios": [float(a) for a in _list(aspect_ratios)],
             "variances": [float(v) for v in variance], "flip": flip, "clip": clip,
             "step_w": step_w, "step_h": step_h, "offset": offset,
             "min_max_aspect_ratios_order": min_max_aspect_ratios_order}
    if max_sizes is not None:
        maxs = _list(max_sizes)
        if maxs and maxs[0] > 0:
            attrs["max_sizes"] = [float(m) for m in maxs]
    return _anchor_op("prior_box", input, image, attrs, name)


def density_prior_box(input, image, densities=None, fixed_sizes=None, fixed_ratios=None,
                      variance=[0.1, 0.1, 0.2, 0.2], clip=False,  # noqa: B006
                      steps=[0.0, 0.0], offset=0.5, flatten_to_2d=False,  # noqa: B006
                      name=None):
    """Density prior boxes (several shifted copies per cell): (Boxes, Variances), each
    [H, W, P, 4], or [H * W * P, 4] with flatten_to_2d.

    >>> # box, var = density_prior_box(feature, image, densities=[2, 1], fixed_sizes=[8., 16.],
    >>> #                              fixed_ratios=[1.])
    """
    for arg, value in (("densities", densities), ("fixed_sizes", fixed_sizes),
                       ("fixed_ratios", fixed_ratios)):
        if not isinstance(value, (list, tuple)):
            raise InvalidArgumentError(
                f"density_prior_box: {arg} must be a list or tuple, got {value!r}")
    if len(densities) != len(fixed_sizes):
        raise InvalidArgumentError(
            f"density_prior_box: densities {list(densities)} and fixed_sizes "
            f"{list(fixed_sizes)} must be equally long")
    step_w, step_h = _steps(steps, "density_prior_box")
    attrs = {"variances": [float(v) for v in variance], "clip": clip, "step_w": step_w,
             "step_h": step_h, "offset": offset, "densities": [int(d) for d in densities],
             "fixed_sizes": [float(s) for s in fixed_sizes],
             "fixed_ratios": [float(r) for r in fixed_ratios], "flatten_to_2d": flatten_to_2d}
    return _anchor_op("density_prior_box", input, image, attrs, name)


def box_coder(prior_box, prior_box_var, target_box, code_type="encode_center_size",
              box_normalized=True, name=None, axis=0):
    """Encode target boxes against priors ([N, 4] -> [N, M, 4] offsets) or decode offsets
    [N, M, 4] into boxes; the variance is a Variable [M, 4] or a list of 4 floats.

    >>> # enc = box_coder(priors, [0.1, 0.1, 0.2, 0.2], gt, code_type="encode_center_size")
    """
    helper = LayerHelper("box_coder", name=name)
    check_variable(prior_box, "prior_box", "box_coder", dtypes=_FLOATS)
    check_variable(target_box, "target_box", "box_coder", dtypes=_FLOATS)
    inputs = {"PriorBox": [prior_box], "TargetBox": [target_box]}
    attrs = {"code_type": code_type, "box_normalized": box_normalized, "axis": axis}
    if isinstance(prior_box_var, Variable):
        inputs["PriorBoxVar"] = [prior_box_var]
    elif isinstance(prior_box_var, (list, tuple)):
        attrs["variance"] = [float(v) for v in prior_box_var]
    else:
        raise InvalidArgumentError(
            f"box_coder: prior_box_var must be a Variable or a list of 4 floats, got "
            f"{type(prior_box_var).__name__}")
    out = _out(helper, prior_box.dtype)
    helper.append_op("box_coder", inputs, {"OutputBox": [out]}, attrs)
    return out


def iou_similarity(x, y, box_normalized=True, name=None):
    """IoU of each box of x [N, 4] with each box of y [M, 4] -> [N, M] (x's LoD kept).

    >>> # iou = iou_similarity(gt_box, prior_box)
    """
    helper = LayerHelper("iou_similarity", name=name)
    check_variable(x, "x", "iou_similarity", dtypes=_FLOATS)
    check_variable(y, "y", "iou_similarity", dtypes=_FLOATS)
    out = _out(helper, x.dtype)
    helper.append_op("iou_similarity", {"X": [x], "Y": [y]}, {"Out": [out]},
                     {"box_normalized": box_normalized})
    return out


def bipartite_match(dist_matrix, match_type=None, dist_threshold=None, name=None):
    """Greedy bipartite matching of the columns of a (LoD) distance matrix to its rows:
    (matched row indices int32 [N, M], matched distances [N, M]); -1 marks no match.

    >>> # idx, dist = bipartite_match(iou, "per_prediction", 0.5)
    """
    helper = LayerHelper("bipartite_match", name=name)
    check_variable(dist_matrix, "dist_matrix", "bipartite_match", dtypes=_FLOATS)
    idx, dist = _out(helper, "int32"), _out(helper, dist_matrix.dtype)
    helper.append_op("bipartite_match", {"DistMat": [dist_matrix]},
                     {"ColToRowMatchIndices": [idx], "ColToRowMatchDist": [dist]},
                     {"match_type": match_type, "dist_threshold": dist_threshold})
    return idx, dist


def target_assign(input, matched_indices, negative_indices=None, mismatch_value=None,
                  name=None):
    """Gather per-prior targets from a LoD input [rows, P, K] by matched indices [N, P]:
    (targets [N, P, K], weights float32 [N, P, 1]); negatives get mismatch_value, weight 1.

    >>> # tgt, w = target_assign(encoded_gt, match_idx, mismatch_value=0)
    """
    helper = LayerHelper("target_assign", name=name)
    check_variable(input, "input", "target_assign")
    check_variable(matched_indices, "matched_indices", "target_assign", dtypes={"int32"})
    inputs = {"X": [input], "MatchIndices": [matched_indices]}
    if negative_indices is not None:
        inputs["NegIndices"] = [check_variable(negative_indices, "negative_indices",
                                               "target_assign", dtypes={"int32"})]
    out, weight = _out(helper, input.dtype), _out(helper, "float32")
    helper.append_op("target_assign", inputs, {"Out": [out], "OutWeight": [weight]},
                     {"mismatch_value": mismatch_value})
    return out, weight


def _to_2d(x, stop_gradient=False):
    out = tensor.flatten(x, axis=2)
    out.stop_gradient = stop_gradient or out.stop_gradient
    return out


def ssd_loss(location, confidence, gt_box, gt_label, prior_box, prior_box_var=None,
             background_label=0, overlap_threshold=0.5, neg_pos_ratio=3.0, neg_overlap=0.5,
             loc_loss_weight=1.0, conf_loss_weight=1.0, match_type="per_prediction",
             mining_type="max_negative", normalize=True, sample_size=None):
    """fluid's multi-box SSD loss per image [N, 1]: softmax confidence loss on positives and
    mined hard negatives plus smooth-L1 location loss on positives (divided by the number of
    positives in the batch when `normalize`).

    >>> # loss = fluid.layers.reduce_sum(ssd_loss(locs, confs, gt_box, gt_label, box, var))
    """
    if mining_type != "max_negative":
        raise InvalidArgumentError(
            f"ssd_loss: only mining_type='max_negative' is supported (as in fluid 1.8), got "
            f"{mining_type!r}")
    check_variable(confidence, "confidence", "ssd_loss", dtypes=_FLOATS)
    if confidence.ndim != 3:
        raise InvalidArgumentError(
            f"ssd_loss: confidence must be [N, Np, C], got {list(confidence.shape)}")
    helper = LayerHelper("ssd_loss")
    conf_shape = manip.shape(confidence)
    iou = iou_similarity(gt_box, prior_box)
    matched, matched_dist = bipartite_match(iou, match_type, overlap_threshold)
    gt_label = tensor.reshape(gt_label, shape=(gt_label.ndim - 1) * [0] + [-1, 1])
    gt_label.stop_gradient = True
    target_label, _ = target_assign(gt_label, matched, mismatch_value=background_label)
    confidence = _to_2d(confidence)
    target_label = _to_2d(tensor.cast(target_label, "int64"), stop_gradient=True)
    conf_loss = loss.softmax_with_cross_entropy(confidence, target_label)
    actual_shape = tensor.slice(conf_shape, axes=[0], starts=[0], ends=[2])
    actual_shape.stop_gradient = True
    conf_loss = tensor.reshape(conf_loss, shape=[-1, 0], actual_shape=actual_shape)
    conf_loss.stop_gradient = True
    neg_indices = _out(helper, "int32")
    updated = _out(helper, matched.dtype)
    helper.append_op("mine_hard_examples",
                     {"ClsLoss": [conf_loss], "MatchIndices": [matched],
                      "MatchDist": [matched_dist]},
                     {"NegIndices": [neg_indices], "UpdatedMatchIndices": [updated]},
                     {"neg_pos_ratio": neg_pos_ratio, "neg_dist_threshold": neg_overlap,
                      "mining_type": mining_type, "sample_size": sample_size})
    if prior_box_var is None:  # fluid's box_coder refuses None; here: no variance at all
        encoded = _encode_without_variance(prior_box, gt_box)
    else:
        encoded = box_coder(prior_box, prior_box_var, gt_box, code_type="encode_center_size")
    target_bbox, target_loc_weight = target_assign(encoded, updated,
                                                   mismatch_value=background_label)
    target_label, target_conf_weight = target_assign(
        gt_label, updated, negative_indices=neg_indices, mismatch_value=background_label)
    target_label = tensor.cast(_to_2d(target_label, stop_gradient=True), "int64")
    target_label.stop_gradient = True
    conf_loss = loss.softmax_with_cross_entropy(confidence, target_label)
    target_conf_weight = _to_2d(target_conf_weight, stop_gradient=True)
    conf_loss = conf_loss * target_conf_weight
    location = _to_2d(location)
    target_bbox = _to_2d(target_bbox, stop_gradient=True)
    loc_loss = nn.smooth_l1(location, target_bbox)
    target_loc_weight = _to_2d(target_loc_weight, stop_gradient=True)
    loc_loss = loc_loss * target_loc_weight
    total = conf_loss * float(conf_loss_weight) + loc_loss * float(loc_loss_weight)
    total = tensor.reshape(total, shape=[-1, 0], actual_shape=actual_shape)
    total = math_ops.reduce_sum(total, dim=1, keep_dim=True)
    if normalize:
        total = total / math_ops.reduce_sum(target_loc_weight)
    return total


def _encode_without_variance(prior_box, gt_box):
    """fluid's ssd_loss with prior_box_var=None: box_coder gets no variance at all."""
    helper = LayerHelper("box_coder")
    out = _out(helper, prior_box.dtype)
    helper.append_op("box_coder", {"PriorBox": [prior_box], "TargetBox": [gt_box]},
                     {"OutputBox": [out]}, {"code_type": "encode_center_size"})
    return out


def multi_box_head(inputs, image, base_size, num_classes, aspect_ratios, min_ratio=None,
                   max_ratio=None, min_sizes=None, max_sizes=None, steps=None, step_w=None,
                   step_h=None, offset=0.5, variance=[0.1, 0.1, 0.2, 0.2],  # noqa: B006
                   flip=True, clip=False, kernel_size=1, pad=0, stride=1, name=None,
                   min_max_aspect_ratios_order=False):
    """SSD's heads: per feature map, prior boxes and two convolutions (box offsets, class
    scores); returns (locs [N, Np, 4], confs [N, Np, C], boxes [Np, 4], variances [Np, 4]).

    >>> # locs, confs, box, var = multi_box_head([f1, f2, f3], image, 300, 21,
    >>> #                                        [[2.], [2., 3.], [2.]], 20, 90)
    """
    where = "multi_box_head"
    if not isinstance(inputs, (list, tuple)):
        raise InvalidArgumentError(f"{where}: inputs must be a list or tuple of feature maps")
    count = len(inputs)
    if count <= 2:
        if min_sizes is None or max_sizes is None or len(min_sizes) != count or len(
                max_sizes) != count:
            raise InvalidArgumentError(
                f"{where}: with {count} feature map(s) give min_sizes and max_sizes, one per "
                f"map, got {min_sizes!r} and {max_sizes!r}")
    elif min_sizes is None and max_sizes is None:
        min_sizes, max_sizes = [], []
        step = int(math.floor((max_ratio - min_ratio) / (count - 2)))
        for ratio in range(min_ratio, max_ratio + 1, step):
            min_sizes.append(base_size * ratio / 100.0)
            max_sizes.append(base_size * (ratio + step) / 100.0)
        min_sizes = [base_size * 0.10] + min_sizes
        max_sizes = [base_size * 0.20] + max_sizes
    for arg, value in (("aspect_ratios", aspect_ratios), ("step_h", step_h),
                       ("step_w", step_w), ("steps", steps)):
        if value is not None and value != [] and not (
                isinstance(value, (list, tuple)) and len(value) == count):
            raise InvalidArgumentError(
                f"{where}: {arg} must be a list with one entry per input ({count}), got "
                f"{value!r}")
    if steps is not None:
        step_w = step_h = steps
    locs, confs, boxes, variances = [], [], [], []
    for i, feature in enumerate(inputs):
        ratio = _list(aspect_ratios[i]) if aspect_ratios is not None else []
        step = [step_w[i] if step_w else 0.0, step_h[i] if step_w else 0.0]
        box, var = prior_box(feature, image, _list(min_sizes[i]), _list(max_sizes[i]), ratio,
                             variance, flip, clip, step, offset, None,
                             min_max_aspect_ratios_order)
        boxes.append(box)
        variances.append(var)
        priors = box.shape[2]
        for sink, width in ((locs, priors * 4), (confs, priors * num_classes)):
            y = conv.conv2d(feature, num_filters=width, filter_size=kernel_size, padding=pad,
                            stride=stride)
            sink.append(tensor.flatten(tensor.transpose(y, perm=[0, 2, 3, 1]), axis=1))
    if len(boxes) == 1:
        box, var, loc, conf = boxes[0], variances[0], locs[0], confs[0]
    else:
        box = tensor.concat([tensor.flatten(b, axis=3) for b in boxes])
        var = tensor.concat([tensor.flatten(v, axis=3) for v in variances])
        loc = tensor.reshape(tensor.concat(locs, axis=1), shape=[0, -1, 4])
        conf = tensor.reshape(tensor.concat(confs, axis=1), shape=[0, -1, num_classes])
    box.stop_gradient = True
    var.stop_gradient = True
    return loc, conf, box, var


def multiclass_nms(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold=0.3,
                   normalized=True, nms_eta=1.0, background_label=0, name=None):
    """Per-class NMS of a batch: a LoD [No, 6] of [label, score, xmin, ymin, xmax, ymax]
    rows, one LoD level of detections per image ([[-1]] when nothing is kept).

    >>> # out = multiclass_nms(boxes [N, M, 4], scores [N, C, M], 0.01, 400, 200)
    """
    where = "multiclass_nms"
    check_variable(bboxes, "bboxes", where, dtypes=_FLOATS)
    check_variable(scores, "scores", where, dtypes=_FLOATS)
    for arg, value, kind in (("score_threshold", score_threshold, float),
                             ("nms_top_k", nms_top_k, int), ("keep_top_k", keep_top_k, int),
                             ("nms_threshold", nms_threshold, float),
                             ("normalized", normalized, bool), ("nms_eta", nms_eta, float),
                             ("background_label", background_label, int)):
        if not isinstance(value, kind):
            raise InvalidArgumentError(
                f"{where}: {arg} must be a {kind.__name__}, got {type(value).__name__} "
                f"{value!r}")
    helper = LayerHelper(where, name=name)
    out = _out(helper, bboxes.dtype, True)
    helper.append_op(where, {"BBoxes": [bboxes], "Scores": [scores]}, {"Out": [out]},
                     {"background_label": background_label, "score_threshold": score_threshold,
                      "nms_top_k": nms_top_k, "nms_threshold": nms_threshold,
                      "nms_eta": nms_eta, "keep_top_k": keep_top_k, "normalized": normalized})
    return out


def matrix_nms(bboxes, scores, score_threshold, post_threshold, nms_top_k, keep_top_k,
               use_gaussian=False, gaussian_sigma=2.0, background_label=0, normalized=True,
               return_index=False, name=None):
    """Matrix NMS (SOLOv2) of a batch: scores decayed by overlap instead of boxes dropped;
    a LoD [No, 6] of [label, decayed score, box] rows per image, best first (and the boxes'
    indices across the batch with return_index).

    >>> # out = matrix_nms(boxes [N, M, 4], scores [N, C, M], 0.1, 0.05, 100, 20)
    """
    where = "matrix_nms"
    check_variable(bboxes, "bboxes", where, dtypes=_FLOATS)
    check_variable(scores, "scores", where, dtypes=_FLOATS)
    for arg, value, kind in (("score_threshold", score_threshold, float),
                             ("post_threshold", post_threshold, float),
                             ("nms_top_k", nms_top_k, int), ("keep_top_k", keep_top_k, int),
                             ("normalized", normalized, bool),
                             ("use_gaussian", use_gaussian, bool),
                             ("gaussian_sigma", gaussian_sigma, float),
                             ("background_label", background_label, int)):
        if not isinstance(value, kind):
            raise InvalidArgumentError(
                f"{where}: {arg} must be a {kind.__name__}, got {type(value).__name__} "
                f"{value!r}")
    helper = LayerHelper(where, name=name)
    out, index = _out(helper, bboxes.dtype, True), _out(helper, "int32", True)
    helper.append_op(where, {"BBoxes": [bboxes], "Scores": [scores]},
                     {"Out": [out], "Index": [index]},
                     {"background_label": background_label, "score_threshold": score_threshold,
                      "post_threshold": post_threshold, "nms_top_k": nms_top_k,
                      "gaussian_sigma": gaussian_sigma, "use_gaussian": use_gaussian,
                      "keep_top_k": keep_top_k, "normalized": normalized})
    return (out, index) if return_index else out


def detection_output(loc, scores, prior_box, prior_box_var, background_label=0,
                     nms_threshold=0.3, nms_top_k=400, keep_top_k=200, score_threshold=0.01,
                     nms_eta=1.0, return_index=False):
    """SSD's detections: decode loc against the priors, softmax the scores, multiclass NMS.
    As in fluid 1.8, background_label and nms_eta are not passed on (0 and 1.0 are used).

    >>> # out = detection_output(locs, confs, box, var)   # LoD [No, 6]
    """
    helper = LayerHelper("detection_output")
    decoded = box_coder(prior_box, prior_box_var, loc, code_type="decode_center_size")
    probs = tensor.transpose(nn.softmax(scores), perm=[0, 2, 1])
    probs.stop_gradient = True
    out = _out(helper, decoded.dtype, True)
    attrs = {"background_label": 0, "nms_threshold": nms_threshold, "nms_top_k": nms_top_k,
             "keep_top_k": keep_top_k, "score_threshold": score_threshold, "nms_eta": 1.0}
    outputs = {"Out": [out]}
    if return_index:
        index = _out(helper, "int32", True)
        outputs["Index"] = [index]
    helper.append_op("multiclass_nms2" if return_index else "multiclass_nms",
                     {"Scores": [probs], "BBoxes": [decoded]}, outputs, attrs)
    return (out, index) if return_index else out


def box_clip(input, im_info, name=None):
    """Clip LoD boxes [.., 4] to their image: x in [0, round(w / scale) - 1], y likewise.

    >>> # clipped = box_clip(boxes, im_info)   # im_info [N, 3]: height, width, scale
    """
    check_variable(input, "input", "box_clip", dtypes=_FLOATS)
    check_variable(im_info, "im_info", "box_clip", dtypes=_FLOATS)
    helper = LayerHelper("box_clip", name=name)
    out = _out(helper, input.dtype)
    helper.append_op("box_clip", {"Input": [input], "ImInfo": [im_info]}, {"Output": [out]})
    return out


def detection_map(detect_res, label, class_num, background_label=0, overlap_threshold=0.3,
                  evaluate_difficult=True, has_state=None, input_states=None,
                  out_states=None, ap_version="integral"):
    """Mean average precision of LoD detections [No, 6] against LoD ground truth [Ng, 6]
    (label, difficult, box) or [Ng, 5]; with states, accumulated across batches.

    >>> # m = detection_map(nmsed, gt, class_num=3, overlap_threshold=0.5)
    """
    helper = LayerHelper("detection_map")
    map_out = _out(helper, "float32")
    pos = out_states[0] if out_states is not None else _out(helper, "int32")
    tp = out_states[1] if out_states is not None else _out(helper, "float32")
    fp = out_states[2] if out_states is not None else _out(helper, "float32")
    inputs = {"Label": [label], "DetectRes": [detect_res]}
    if has_state is not None:
        inputs["HasState"] = [has_state]
    if input_states is not None:
        inputs.update(PosCount=[input_states[0]], TruePos=[input_states[1]],
                      FalsePos=[input_states[2]])
    # fluid 1.8's layer does not pass background_label on: the op's default 0 holds
    helper.append_op("detection_map", inputs,
                     {"MAP": [map_out], "AccumPosCount": [pos], "AccumTruePos": [tp],
                      "AccumFalsePos": [fp]},
                     {"overlap_threshold": overlap_threshold,
                      "evaluate_difficult": evaluate_difficult, "ap_type": ap_version,
                      "class_num": class_num})
    return map_out
