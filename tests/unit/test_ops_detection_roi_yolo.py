"""yolo_box, yolov3_loss, anchor_generator, box_decoder_and_assign and polygon_box_transform:
forward against per-cell numpy loops written from fluid 1.8's description, yolov3_loss's
gradient against central finite differences in float64 (with gt_score, with and without
label smoothing, padded ground-truth rows, two ground truths in one cell)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.op_harness import OpCase, check_forward, check_op, rand

RNG = np.random.default_rng(5)
ANCHORS = [10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326]


def sig(v):
    return 1 / (1 + math.exp(-v))


def sce(v, label):
    return max(v, 0) - v * label + math.log(1 + math.exp(-abs(v)))


def iou(a, b):
    """Centre-size boxes (cx, cy, w, h)."""
    ix = min(a[0] + a[2] / 2, b[0] + b[2] / 2) - max(a[0] - a[2] / 2, b[0] - b[2] / 2)
    iy = min(a[1] + a[3] / 2, b[1] + b[3] / 2) - max(a[1] - a[3] / 2, b[1] - b[3] / 2)
    inter = ix * iy if ix >= 0 and iy >= 0 else 0.0
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def yolo_box_ref(X, ImgSize, anchors, class_num, conf_thresh, downsample_ratio,
                 clip_bbox=True, scale_x_y=1.0, **_):
    n, _, h, w = X.shape
    an = len(anchors) // 2
    x = X.reshape(n, an, 5 + class_num, h, w)
    boxes = np.zeros((n, an, h, w, 4))
    scores = np.zeros((n, an, h, w, class_num))
    bias = -0.5 * (scale_x_y - 1)
    for i in range(n):
        ih, iw = ImgSize[i]
        for a in range(an):
            for row in range(h):
                for col in range(w):
                    t = x[i, a, :, row, col]
                    conf = sig(t[4])
                    if conf < conf_thresh:
                        continue
                    cx = (col + sig(t[0]) * scale_x_y + bias) * iw / w
                    cy = (row + sig(t[1]) * scale_x_y + bias) * ih / h
                    bw = math.exp(t[2]) * anchors[2 * a] * iw / (downsample_ratio * h)
                    bh = math.exp(t[3]) * anchors[2 * a + 1] * ih / (downsample_ratio * h)
                    b = [cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2]
                    if clip_bbox:
                        b = [max(b[0], 0), max(b[1], 0), min(b[2], iw - 1), min(b[3], ih - 1)]
                    boxes[i, a, row, col] = b
                    scores[i, a, row, col] = [conf * sig(v) for v in t[5:]]
    return {"Boxes": boxes.reshape(n, -1, 4), "Scores": scores.reshape(n, -1, class_num)}


def yolov3_loss_ref(X, GTBox, GTLabel, anchors, anchor_mask, class_num, ignore_thresh,
                    downsample_ratio, use_label_smooth=True, scale_x_y=1.0, GTScore=None, **_):
    n, _, h, w = X.shape
    m = len(anchor_mask)
    x = X.reshape(n, m, 5 + class_num, h, w)
    size = downsample_ratio * h
    score = np.ones(GTLabel.shape) if GTScore is None else GTScore
    smooth = min(1 / class_num, 1 / 40) if use_label_smooth else 0.0
    loss = np.zeros(n)
    obj = np.zeros((n, m, h, w))
    match = np.full(GTLabel.shape, -1, dtype=np.int32)
    bias = -0.5 * (scale_x_y - 1)
    for i in range(n):
        valid = [t for t in range(GTBox.shape[1]) if GTBox[i, t, 2] >= 1e-6
                 and GTBox[i, t, 3] >= 1e-6]
        for j in range(m):
            aw, ah = anchors[2 * anchor_mask[j]], anchors[2 * anchor_mask[j] + 1]
            for row in range(h):
                for col in range(w):
                    t = x[i, j, :, row, col]
                    pred = ((col + sig(t[0]) * scale_x_y + bias) / h,
                            (row + sig(t[1]) * scale_x_y + bias) / h,
                            math.exp(t[2]) * aw / size, math.exp(t[3]) * ah / size)
                    if max([iou(pred, GTBox[i, g]) for g in valid] + [0]) > ignore_thresh:
                        obj[i, j, row, col] = -1
        for g in valid:
            cx, cy, gw, gh = GTBox[i, g]
            shapes = [iou((0, 0, anchors[2 * a] / size, anchors[2 * a + 1] / size),
                          (0, 0, gw, gh)) for a in range(len(anchors) // 2)]
            best = int(np.argmax(shapes))
            if best not in anchor_mask:
                continue
            j = anchor_mask.index(best)
            match[i, g] = j
            gi, gj = int(cx * w), int(cy * h)
            t = x[i, j, :, gj, gi]
            wgt = (2 - gw * gh) * score[i, g]
            loss[i] += wgt * (sce(t[0], cx * w - gi) + sce(t[1], cy * h - gj)
                              + abs(t[2] - math.log(gw * size / anchors[2 * best]))
                              + abs(t[3] - math.log(gh * size / anchors[2 * best + 1])))
            for c in range(class_num):
                target = 1 - smooth if c == GTLabel[i, g] else smooth
                loss[i] += sce(t[5 + c], target) * score[i, g]
            obj[i, j, gj, gi] = score[i, g]
        for j in range(m):
            for row in range(h):
                for col in range(w):
                    o, v = obj[i, j, row, col], x[i, j, 4, row, col]
                    loss[i] += sce(v, 1) * o if o > 1e-5 else sce(v, 0) if o > -0.5 else 0
    return {"Loss": loss, "ObjectnessMask": obj, "GTMatchMask": match}


def gt_boxes(n, b, valid):
    box = np.zeros((n, b, 4))
    for i in range(n):
        for t in range(valid[i]):
            box[i, t] = [*RNG.uniform(0.1, 0.9, 2), *RNG.uniform(0.05, 0.7, 2)]
    return box


def _loss_case(name, x, box, label, score=None, **attrs):
    inputs = {"X": x, "GTBox": box, "GTLabel": label}
    if score is not None:
        inputs["GTScore"] = score
    full = {"anchors": ANCHORS, "anchor_mask": [3, 4, 5], "class_num": 3,
            "ignore_thresh": 0.5, "downsample_ratio": 32, **attrs}
    return OpCase("yolov3_loss", inputs, yolov3_loss_ref, attrs=full, grad=["X"],
                  grad_outputs=["Loss"], name=name, fp32_rtol=1e-4, fp32_atol=1e-4)


X_LOSS = rand(2, 24, 4, 4, low=-1.5, high=1.5)
BOX = gt_boxes(2, 5, [3, 5])
LABEL = RNG.integers(0, 3, (2, 5)).astype(np.int32)
SCORE = RNG.uniform(0.4, 1.0, (2, 5))
# two boxes of one shape whose centres share a cell: both are positives there
SAME_CELL = np.array([[[0.30, 0.30, 0.30, 0.45], [0.40, 0.35, 0.31, 0.44]]])

CASES = [
    OpCase("yolo_box", {"X": rand(2, 21, 4, 4, low=-2, high=2),
                        "ImgSize": np.array([[64, 64], [48, 56]], np.int32)}, yolo_box_ref,
           attrs={"anchors": [10, 13, 16, 30, 33, 23], "class_num": 2, "conf_thresh": 0.4,
                  "downsample_ratio": 16}, grad=[], name="yolo_box_clipped"),
    OpCase("yolo_box", {"X": rand(1, 14, 3, 3, low=-2, high=2),
                        "ImgSize": np.array([[40, 30]], np.int32)}, yolo_box_ref,
           attrs={"anchors": [10, 13, 16, 30], "class_num": 2, "conf_thresh": 0.2,
                  "downsample_ratio": 8, "clip_bbox": False, "scale_x_y": 1.05},
           grad=[], name="yolo_box_unclipped_scaled"),
    _loss_case("yolov3_loss_smooth", X_LOSS, BOX, LABEL),
    _loss_case("yolov3_loss_score_no_smooth", X_LOSS, BOX, LABEL, SCORE,
               use_label_smooth=False, anchor_mask=[0, 1, 2], ignore_thresh=0.3),
    _loss_case("yolov3_loss_score_scale_xy", X_LOSS, BOX, LABEL, SCORE, scale_x_y=1.2,
               anchor_mask=[6, 7, 8]),
]
X_CELL = rand(1, 24, 4, 4, low=-1.5, high=1.5)
CELL_CASE = _loss_case("yolov3_loss_two_in_one_cell", X_CELL, SAME_CELL,
                       np.array([[0, 2]], np.int32), np.array([[0.9, 0.6]]))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


def _loss_grad(x, box, label, score):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", list(x.shape), dtype="float64")
        xv.stop_gradient = False
        feeds = {"x": x, "box": box, "label": label, "score": score}
        args = [fluid.data(k, list(v.shape), dtype=v.dtype.name)
                for k, v in feeds.items() if k != "x"]
        loss = fluid.layers.yolov3_loss(xv, args[0], args[1], ANCHORS, [3, 4, 5], 3, 0.5, 32,
                                        gt_score=args[2])
        (grad,) = fluid.gradients(fluid.layers.reduce_sum(loss), [xv])
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feeds, fetch_list=[grad])[0]


def test_two_in_one_cell_loss_counts_both_gradient_keeps_the_last_as_fluid():
    """Both boxes are positives of one cell and anchor: the loss counts both (forward against
    the reference), but the location and class gradient there is the last box's alone, as
    fluid 1.8's yolov3_loss_grad writes rather than adds it (tests/oracle stores fluid's
    gradient for such a cell too): programs train as they do in fluid."""
    check_forward(CELL_CASE)
    match = yolov3_loss_ref(X_CELL, SAME_CELL, np.array([[0, 2]]), ANCHORS, [3, 4, 5], 3, 0.5,
                            32)["GTMatchMask"]
    assert match[0, 0] == match[0, 1] == 0  # anchor 3 (mask index 0) for both
    labels, scores = np.array([[0, 2]], np.int32), np.array([[0.9, 0.6]])
    both = _loss_grad(X_CELL, SAME_CELL, labels, scores)
    first = _loss_grad(X_CELL, SAME_CELL[:, :1], labels[:, :1], scores[:, :1])
    last = _loss_grad(X_CELL, SAME_CELL[:, 1:], labels[:, 1:], scores[:, 1:])
    cell = (0, [0, 1, 2, 3, 5, 6, 7], 1, 1)  # mask 0's tx, ty, tw, th and classes at (1, 1)
    np.testing.assert_allclose(both[cell], last[cell], rtol=1e-12)
    assert not np.allclose(both[cell], first[cell] + last[cell])


def anchor_generator_ref(Input, anchor_sizes, aspect_ratios, variances, stride, offset, **_):
    h, w = Input.shape[2:]
    sw, sh = stride
    out = []
    for row in range(h):
        for col in range(w):
            cx, cy = col * sw + offset * (sw - 1), row * sh + offset * (sh - 1)
            cell = []
            for r in aspect_ratios:
                base_w = round(math.sqrt(sw * sh / r))
                base_h = round(base_w * r)
                for s in anchor_sizes:
                    aw, ah = s / sw * base_w, s / sh * base_h
                    cell.append([cx - (aw - 1) / 2, cy - (ah - 1) / 2, cx + (aw - 1) / 2,
                                 cy + (ah - 1) / 2])
            out.append(cell)
    anchors = np.array(out).reshape(h, w, -1, 4)
    return {"Anchors": anchors, "Variances": np.broadcast_to(variances, anchors.shape)}


def box_decoder_ref(PriorBox, PriorBoxVar, TargetBox, BoxScore, box_clip, **_):
    n, classes = BoxScore.shape
    dec = np.zeros((n, classes, 4))
    assigned = np.zeros((n, 4))
    for i in range(n):
        x1, y1, x2, y2 = PriorBox[i]
        pw, ph = x2 - x1 + 1, y2 - y1 + 1
        pcx, pcy = x1 + pw / 2, y1 + ph / 2
        for c in range(classes):
            d = TargetBox[i, 4 * c:4 * c + 4]
            cx, cy = PriorBoxVar[0] * d[0] * pw + pcx, PriorBoxVar[1] * d[1] * ph + pcy
            bw = math.exp(min(PriorBoxVar[2] * d[2], box_clip)) * pw
            bh = math.exp(min(PriorBoxVar[3] * d[3], box_clip)) * ph
            dec[i, c] = [cx - bw / 2, cy - bh / 2, cx + bw / 2 - 1, cy + bh / 2 - 1]
        best = 1 + int(np.argmax(BoxScore[i, 1:]))
        assigned[i] = dec[i, best] if BoxScore[i, best] > -1 else PriorBox[i]
    return {"DecodeBox": dec.reshape(n, -1), "OutputAssignBox": assigned}


def polygon_ref(Input, **_):
    out = np.zeros_like(Input)
    for c in range(Input.shape[1]):
        for row in range(Input.shape[2]):
            for col in range(Input.shape[3]):
                out[:, c, row, col] = (4 * col if c % 2 == 0 else 4 * row) - Input[:, c, row, col]
    return {"Output": out}


PRIOR = np.array([[2.0, 3.0, 20.0, 15.0], [0.0, 0.0, 8.0, 30.0], [5.0, 5.0, 6.0, 7.0]])
BOX_CASES = [
    OpCase("anchor_generator", {"Input": np.zeros((1, 2, 3, 4))}, anchor_generator_ref,
           attrs={"anchor_sizes": [32.0, 64.0, 128.0], "aspect_ratios": [0.5, 2.0],
                  "variances": [0.1, 0.1, 0.2, 0.2], "stride": [16.0, 8.0], "offset": 0.5},
           grad=[]),
    OpCase("box_decoder_and_assign",
           {"PriorBox": PRIOR, "PriorBoxVar": np.array([0.1, 0.1, 0.2, 0.2]),
            "TargetBox": rand(3, 12, low=-3, high=30),
            "BoxScore": np.array([[0.9, 0.1, 0.3], [0.2, 0.7, 0.6], [0.5, 0.5, 0.5]])},
           box_decoder_ref, attrs={"box_clip": 2.5}, rtol=1e-6, fp32_rtol=1e-3, grad=[]),
    OpCase("polygon_box_transform", {"Input": rand(2, 8, 3, 5, low=-5, high=5)}, polygon_ref,
           grad=[]),
]


@pytest.mark.parametrize("case", BOX_CASES, ids=str)
def test_box_op(case):
    check_op(case)


def test_yolo_layers_train_a_head_towards_its_boxes():
    """yolov3_loss over fluid.layers with gt_score: SGD on the head lowers the loss, and
    yolo_box on the trained head scores the ground truth's cell highest."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3, 8, 8])
        box = fluid.data("box", [None, 2, 4])
        label = fluid.data("label", [None, 2], dtype="int32")
        score = fluid.data("score", [None, 2])
        head = fluid.layers.conv2d(x, 3 * (5 + 2), 3, padding=1)
        loss = fluid.layers.reduce_mean(fluid.layers.yolov3_loss(
            head, box, label, [4, 5, 8, 10, 16, 14], [0, 1, 2], 2, 0.7, 4, gt_score=score))
        size = fluid.data("size", [None, 2], dtype="int32")
        boxes, scores = fluid.layers.yolo_box(head, size, [4, 5, 8, 10, 16, 14], 2, 0.0, 4)
        fluid.optimizer.SGD(0.05).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"x": RNG.uniform(-1, 1, (2, 3, 8, 8)).astype("float32"),
            "box": np.array([[[0.3, 0.3, 0.3, 0.3], [0, 0, 0, 0]],
                             [[0.7, 0.6, 0.4, 0.5], [0.2, 0.8, 0.2, 0.2]]], "float32"),
            "label": np.array([[1, 0], [0, 1]], "int32"),
            "score": np.ones((2, 2), "float32"), "size": np.full((2, 2), 32, "int32")}
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss])[0]) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0], losses
    s, = exe.run(main, feed=feed, fetch_list=[scores])
    assert s.shape == (2, 3 * 8 * 8, 2)
    best_cell = int(np.argmax(s[0, :, 1])) % 64
    assert best_cell == 2 * 8 + 2, best_cell  # the cell of (0.3, 0.3) on the 8 x 8 grid
