"""Op definitions: the YOLO, ROI-pooling and region-proposal half of fluid 1.8's detection ops:
yolo_box, yolov3_loss, roi_align, roi_pool, psroi_pool, prroi_pool, anchor_generator,
box_decoder_and_assign, polygon_box_transform (kernels in spmd/kernels/detection_roi.py;
the proposal ops in detection_proposals.py).

ROIs are [R, 4] boxes (x1, y1, x2, y2) in input pixels; which image each one belongs to comes,
as in fluid, from the ROIs' LoD (rois per image) or from a RoisLod / BatchRoINums input.
"""
from __future__ import annotations

from .registry import define_op

_FLOATS = ("float32", "float64", "float16")


def _check_nchw(ctx, slot: str):
    x = ctx.input(slot)
    ctx.check(len(x.shape) == 4, f"{slot} must be 4-D NCHW, got {list(x.shape)}")
    ctx.check(x.dtype in _FLOATS, f"{slot} must be float32 or float64, got {x.dtype}")
    return x


def _check_rois(ctx):
    rois = ctx.input("ROIs")
    ctx.check(len(rois.shape) == 2 and rois.shape[1] in (4, -1),
              f"ROIs must be [num_rois, 4] (x1, y1, x2, y2), got {list(rois.shape)}")
    return rois


def _pooled(ctx):
    ph, pw = ctx.attr("pooled_height"), ctx.attr("pooled_width")
    ctx.check(ph > 0 and pw > 0, f"pooled_height and pooled_width must be > 0, got {ph}, {pw}")
    ctx.check(ctx.attr("spatial_scale") > 0,
              f"spatial_scale must be > 0, got {ctx.attr('spatial_scale')}")
    return ph, pw


@define_op("yolo_box", inputs=["X", "ImgSize"], outputs=["Boxes", "Scores"], grad=None,
           attrs={"anchors": "ints", "class_num": "int", "conf_thresh": ("float", 0.01),
                  "downsample_ratio": ("int", 32), "clip_bbox": ("bool", True),
                  "scale_x_y": ("float", 1.0)})
def _yolo_box(ctx):
    x = _check_nchw(ctx, "X")
    anchors, classes = ctx.attr("anchors"), ctx.attr("class_num")
    ctx.check(len(anchors) % 2 == 0 and anchors, f"anchors must be (w, h) pairs, got {anchors}")
    ctx.check(classes > 0, f"class_num must be > 0, got {classes}")
    an = len(anchors) // 2
    n, c, h, w = x.shape
    ctx.check(c < 0 or c == an * (5 + classes),
              f"X's channels must be anchors * (5 + class_num) = {an * (5 + classes)}, got {c}")
    size = ctx.input("ImgSize")
    ctx.check(len(size.shape) == 2 and size.shape[1] in (2, -1),
              f"ImgSize must be [N, 2] (height, width), got {list(size.shape)}")
    boxes = an * h * w if h > 0 and w > 0 else -1
    ctx.set_output("Boxes", (n, boxes, 4), x.dtype)
    ctx.set_output("Scores", (n, boxes, classes), x.dtype)


@define_op("yolov3_loss", inputs=["X", "GTBox", "GTLabel", "GTScore?"],
           outputs=["Loss", "ObjectnessMask", "GTMatchMask"],
           no_grad_inputs=("GTBox", "GTLabel", "GTScore"),
           nondiff_outputs=("ObjectnessMask", "GTMatchMask"),
           attrs={"anchors": "ints", "anchor_mask": "ints", "class_num": "int",
                  "ignore_thresh": ("float", 0.7), "downsample_ratio": ("int", 32),
                  "use_label_smooth": ("bool", True), "scale_x_y": ("float", 1.0)})
def _yolov3_loss(ctx):
    x = _check_nchw(ctx, "X")
    anchors, mask = ctx.attr("anchors"), ctx.attr("anchor_mask")
    classes = ctx.attr("class_num")
    ctx.check(len(anchors) % 2 == 0 and anchors, f"anchors must be (w, h) pairs, got {anchors}")
    an = len(anchors) // 2
    ctx.check(mask and all(0 <= m < an for m in mask),
              f"anchor_mask entries must index the {an} anchors, got {mask}")
    ctx.check(classes > 0, f"class_num must be > 0, got {classes}")
    n, c, h, w = x.shape
    ctx.check(c < 0 or c == len(mask) * (5 + classes),
              f"X's channels must be len(anchor_mask) * (5 + class_num) = "
              f"{len(mask) * (5 + classes)}, got {c}")
    ctx.check(h < 0 or w < 0 or h == w, f"X must be square (H == W), got {h} x {w}")
    box = ctx.input("GTBox")
    ctx.check(len(box.shape) == 3 and box.shape[2] in (4, -1),
              f"GTBox must be [N, B, 4] (cx, cy, w, h in [0, 1]), got {list(box.shape)}")
    label = ctx.input("GTLabel")
    ctx.check(len(label.shape) == 2, f"GTLabel must be [N, B], got {list(label.shape)}")
    ctx.check(label.dtype in ("int32", "int64"), f"GTLabel must be int32, got {label.dtype}")
    ctx.set_output("Loss", (n,), x.dtype)
    ctx.set_output("ObjectnessMask", (n, len(mask), h, w), x.dtype)
    ctx.set_output("GTMatchMask", (n, box.shape[1]), "int32")


_ROI_GRAD = dict(no_grad_inputs=("ROIs", "RoisLod"), lod_inputs=("ROIs",))


@define_op("roi_align", inputs=["X", "ROIs", "RoisLod?"], outputs=["Out"],
           grad_uses=("X", "ROIs", "RoisLod"), grad_no_need_buffer=("X",),
           attrs={"pooled_height": ("int", 1), "pooled_width": ("int", 1),
                  "spatial_scale": ("float", 1.0), "sampling_ratio": ("int", -1)}, **_ROI_GRAD)
def _roi_align(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    ctx.set_output("Out", (rois.shape[0], x.shape[1], ph, pw), x.dtype)


@define_op("roi_pool", inputs=["X", "ROIs", "RoisLod?"], outputs=["Out", "Argmax"],
           nondiff_outputs=("Argmax",), grad_uses=("X", "ROIs", "RoisLod", "Argmax"),
           grad_no_need_buffer=("X",),
           attrs={"pooled_height": ("int", 1), "pooled_width": ("int", 1),
                  "spatial_scale": ("float", 1.0)}, **_ROI_GRAD)
def _roi_pool(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    shape = (rois.shape[0], x.shape[1], ph, pw)
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("Argmax", shape, "int64")


@define_op("psroi_pool", inputs=["X", "ROIs"], outputs=["Out"], grad_uses=("X", "ROIs"),
           grad_no_need_buffer=("X",), no_grad_inputs=("ROIs",), lod_inputs=("ROIs",),
           attrs={"output_channels": "int", "spatial_scale": ("float", 1.0),
                  "pooled_height": ("int", 1), "pooled_width": ("int", 1)})
def _psroi_pool(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    oc = ctx.attr("output_channels")
    ctx.check(oc > 0 and (x.shape[1] < 0 or x.shape[1] == oc * ph * pw),
              f"X's channels must be output_channels * pooled_height * pooled_width = "
              f"{oc * ph * pw}, got {x.shape[1]}")
    ctx.set_output("Out", (rois.shape[0], oc, ph, pw), x.dtype)


@define_op("prroi_pool", inputs=["X", "ROIs", "BatchRoINums?"], outputs=["Out"],
           no_grad_inputs=("BatchRoINums",), lod_inputs=("ROIs",),
           attrs={"spatial_scale": ("float", 1.0), "pooled_height": ("int", 1),
                  "pooled_width": ("int", 1)})
def _prroi_pool(ctx):
    x, rois = _check_nchw(ctx, "X"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    ctx.set_output("Out", (rois.shape[0], x.shape[1], ph, pw), x.dtype)


@define_op("anchor_generator", inputs=["Input"], outputs=["Anchors", "Variances"], grad=None,
           attrs={"anchor_sizes": "floats", "aspect_ratios": "floats",
                  "variances": ("floats", [0.1, 0.1, 0.2, 0.2]), "stride": "floats",
                  "offset": ("float", 0.5)})
def _anchor_generator(ctx):
    x = _check_nchw(ctx, "Input")
    ctx.check(len(ctx.attr("stride")) == 2,
              f"stride must be (stride_width, stride_height), got {ctx.attr('stride')}")
    ctx.check(len(ctx.attr("variances")) == 4,
              f"variances must hold 4 numbers, got {ctx.attr('variances')}")
    ctx.check(ctx.attr("anchor_sizes") and ctx.attr("aspect_ratios"),
              "anchor_sizes and aspect_ratios must not be empty")
    k = len(ctx.attr("anchor_sizes")) * len(ctx.attr("aspect_ratios"))
    shape = (x.shape[2], x.shape[3], k, 4)
    ctx.set_output("Anchors", shape, x.dtype)
    ctx.set_output("Variances", shape, x.dtype)


@define_op("box_decoder_and_assign", inputs=["PriorBox", "PriorBoxVar", "TargetBox", "BoxScore"],
           outputs=["DecodeBox", "OutputAssignBox"], grad=None,
           attrs={"box_clip": ("float", 4.135)})
def _box_decoder_and_assign(ctx):
    prior, var = ctx.input("PriorBox"), ctx.input("PriorBoxVar")
    target, score = ctx.input("TargetBox"), ctx.input("BoxScore")
    ctx.check(len(prior.shape) == 2 and prior.shape[1] in (4, -1),
              f"PriorBox must be [N, 4], got {list(prior.shape)}")
    ctx.check(len(var.shape) == 1 and var.shape[0] in (4, -1),
              f"PriorBoxVar must be [4], got {list(var.shape)}")
    ctx.check(len(target.shape) == 2 and len(score.shape) == 2,
              f"TargetBox must be [N, classes * 4] and BoxScore [N, classes], got "
              f"{list(target.shape)} and {list(score.shape)}")
    ctx.check(target.shape[1] < 0 or score.shape[1] < 0 or target.shape[1] == 4 * score.shape[1],
              f"TargetBox's {target.shape[1]} columns must be 4 * BoxScore's {score.shape[1]}")
    ctx.set_output("DecodeBox", target.shape, target.dtype)
    ctx.set_output("OutputAssignBox", prior.shape, target.dtype)


@define_op("polygon_box_transform", inputs=["Input"], outputs=["Output"], grad=None)
def _polygon_box_transform(ctx):
    x = _check_nchw(ctx, "Input")
    ctx.check(x.shape[1] < 0 or x.shape[1] % 2 == 0,
              f"Input's channels (x, y offsets of the polygon's vertices) must be even, got "
              f"{x.shape[1]}")
    ctx.set_output("Output", x.shape, x.dtype)


@define_op("deformable_psroi_pooling", inputs=["Input", "ROIs", "Trans"],
           outputs=["Output", "TopCount"], no_grad_inputs=("ROIs",),
           nondiff_outputs=("TopCount",), grad_uses=("Input", "ROIs", "Trans"),
           lod_inputs=("ROIs",),
           attrs={"no_trans": ("bool", False), "spatial_scale": ("float", 1.0),
                  "output_dim": "int", "group_size": ("ints", [1, 1]),
                  "pooled_height": ("int", 1), "pooled_width": ("int", 1),
                  "part_size": ("ints", [1, 1]), "sample_per_part": ("int", 1),
                  "trans_std": ("float", 0.1)})
def _deformable_psroi_pooling(ctx):
    x, rois = _check_nchw(ctx, "Input"), _check_rois(ctx)
    ph, pw = _pooled(ctx)
    group, part = ctx.attr("group_size"), ctx.attr("part_size")
    ctx.check(len(group) == 2 and len(part) == 2 and min(group + part) > 0,
              f"group_size and part_size must be 2 positive ints, got {group}, {part}")
    od = ctx.attr("output_dim")
    ctx.check(od > 0 and (x.shape[1] < 0 or x.shape[1] == od * group[0] * group[1]),
              f"Input's channels must be output_dim * group_size[0] * group_size[1] = "
              f"{od * group[0] * group[1]}, got {x.shape[1]}")
    trans = ctx.input("Trans")
    ctx.check(len(trans.shape) == 4, f"Trans must be [R, 2 * classes, part_h, part_w], got "
                                     f"{list(trans.shape)}")
    ctx.check(ctx.attr("sample_per_part") > 0,
              f"sample_per_part must be > 0, got {ctx.attr('sample_per_part')}")
    shape = (rois.shape[0], od, ph, pw)
    ctx.set_output("Output", shape, x.dtype)
    ctx.set_output("TopCount", shape, x.dtype)


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
