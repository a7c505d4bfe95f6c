"""Op definitions: the YOLO and anchor half of fluid 1.8's detection ops: yolo_box, yolov3_loss,
anchor_generator, box_decoder_and_assign, polygon_box_transform (kernels in
spmd/kernels/detection_yolo.py).
"""
from __future__ import annotations

from .detection_roi import _check_nchw
from .registry import define_op


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
