"""A tiny YOLOv3, written as the model zoo writes it (PaddlePaddle/models release/1.8,
PaddleCV/yolov3: models/darknet.py, models/yolov3.py, train.py): a shrunk DarkNet of
conv_bn_layer / downsample / basicblock stages, a yolo_detection_block per scale with route
and nearest upsample + concat between scales, yolov3_loss on 2 scales (gt_score and label
smoothing on), Momentum with linear_lr_warmup over piecewise_decay and L2Decay, batch_norm
synchronized across ranks (the zoo's syncbn), yolo_box for inference. The data are
synthetic: 64x64 images holding 1-3 coloured rectangles of 3 classes; no download.

    python examples/detection/yolov3_tiny.py --steps 40
    mpiexec -n 2 python examples/detection/yolov3_tiny.py --steps 40   # 1/2 of each batch each

The initial parameters come from numpy (init_parameters: seeded by each parameter's name), so
a run starts from the same point in any framework: with its import line switched to
`import paddle.fluid as fluid` this file runs unchanged in PaddlePaddle 1.8.5
(tests/oracle/make_detection_roi.py does so and stores its first losses).
"""
from __future__ import annotations

import argparse
import os
import zlib

import numpy as np

import spmd.fluid as fluid
from spmd.fluid.param_attr import ParamAttr
from spmd.fluid.regularizer import L2Decay

IMAGE_SIZE = 64
CLASS_NUM = 3
MAX_BOXES = 4
ANCHORS = [6, 8, 10, 14, 16, 12, 22, 28, 32, 24, 40, 44]
ANCHOR_MASKS = [[3, 4, 5], [0, 1, 2]]  # stride 32 takes the large anchors, 16 the small
IGNORE_THRESH = 0.7
# DarkNet's stages, shrunk: (channels, residual blocks) after each stride-2 downsample
STAGES = [(16, 1), (16, 1), (32, 1), (32, 1), (64, 1)]


def conv_bn_layer(input, ch_out, filter_size, stride, padding, name):
    conv = fluid.layers.conv2d(
        input=input, num_filters=ch_out, filter_size=filter_size, stride=stride,
        padding=padding, act=None,
        param_attr=ParamAttr(initializer=fluid.initializer.Normal(0.0, 0.02),
                             name=name + ".conv.weights"),
        bias_attr=False)
    bn_name = name + ".bn"
    out = fluid.layers.batch_norm(
        input=conv, act=None,
        param_attr=ParamAttr(initializer=fluid.initializer.Constant(1.0),
                             regularizer=L2Decay(0.0), name=bn_name + ".scale"),
        bias_attr=ParamAttr(initializer=fluid.initializer.Constant(0.0),
                            regularizer=L2Decay(0.0), name=bn_name + ".offset"),
        moving_mean_name=bn_name + ".mean", moving_variance_name=bn_name + ".var")
    return fluid.layers.leaky_relu(x=out, alpha=0.1)


def downsample(input, ch_out, name):
    return conv_bn_layer(input, ch_out, 3, 2, 1, name)


def basicblock(input, ch_out, name):
    conv1 = conv_bn_layer(input, ch_out // 2, 1, 1, 0, name + ".0")
    conv2 = conv_bn_layer(conv1, ch_out, 3, 1, 1, name + ".1")
    return fluid.layers.elementwise_add(x=input, y=conv2, act=None)


def darknet(image):
    """The feature maps of the last two stages (strides 32 and 16), deepest first."""
    x = conv_bn_layer(image, 8, 3, 1, 1, "yolo_input")
    blocks = []
    for i, (ch, count) in enumerate(STAGES):
        x = downsample(x, ch, f"stage.{i}.downsample")
        for j in range(count):
            x = basicblock(x, ch, f"stage.{i}.{j}")
        blocks.append(x)
    return blocks[-1:-3:-1]


def yolo_detection_block(input, channel, name):
    route = conv_bn_layer(input, channel, 1, 1, 0, name + ".route")
    tip = conv_bn_layer(route, channel * 2, 3, 1, 1, name + ".tip")
    return route, tip


def yolov3_outputs(image):
    outputs, route = [], None
    for i, block in enumerate(darknet(image)):
        if i > 0:
            block = fluid.layers.concat(input=[route, block], axis=1)
        route, tip = yolo_detection_block(block, 32 // (2 ** i), f"yolo_block.{i}")
        out = fluid.layers.conv2d(
            input=tip, num_filters=len(ANCHOR_MASKS[i]) * (CLASS_NUM + 5), filter_size=1,
            stride=1, padding=0, act=None,
            param_attr=ParamAttr(initializer=fluid.initializer.Normal(0.0, 0.02),
                                 name=f"yolo_output.{i}.conv.weights"),
            bias_attr=ParamAttr(initializer=fluid.initializer.Constant(0.0),
                                regularizer=L2Decay(0.0),
                                name=f"yolo_output.{i}.conv.bias"))
        outputs.append(out)
        if i < 1:
            route = conv_bn_layer(route, 16, 1, 1, 0, f"yolo_transition.{i}")
            route = fluid.layers.resize_nearest(route, scale=2.0)
    return outputs


def build(learning_rate=0.01, warmup_steps=4, boundaries=(30,)):
    """(main, startup, test program, feed names, loss, boxes, scores): the zoo's YOLOv3
    train program, and its inference clone (made before the optimizer, as the zoo does)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        image = fluid.data(name="image", shape=[None, 3, IMAGE_SIZE, IMAGE_SIZE],
                           dtype="float32")
        gt_box = fluid.data(name="gt_box", shape=[None, MAX_BOXES, 4], dtype="float32")
        gt_label = fluid.data(name="gt_label", shape=[None, MAX_BOXES], dtype="int32")
        gt_score = fluid.data(name="gt_score", shape=[None, MAX_BOXES], dtype="float32")
        im_size = fluid.data(name="im_size", shape=[None, 2], dtype="int32")
        outputs = yolov3_outputs(image)
        losses, boxes, scores = [], [], []
        ratio = 32
        for i, out in enumerate(outputs):
            loss = fluid.layers.yolov3_loss(
                x=out, gt_box=gt_box, gt_label=gt_label, gt_score=gt_score, anchors=ANCHORS,
                anchor_mask=ANCHOR_MASKS[i], class_num=CLASS_NUM, ignore_thresh=IGNORE_THRESH,
                downsample_ratio=ratio, use_label_smooth=True)
            losses.append(fluid.layers.reduce_mean(loss))
            mask_anchors = []
            for m in ANCHOR_MASKS[i]:
                mask_anchors += ANCHORS[2 * m:2 * m + 2]
            b, s = fluid.layers.yolo_box(x=out, img_size=im_size, anchors=mask_anchors,
                                         class_num=CLASS_NUM, conf_thresh=0.01,
                                         downsample_ratio=ratio)
            boxes.append(b)
            scores.append(s)
            ratio //= 2
        loss = fluid.layers.sum(losses)
        boxes = fluid.layers.concat(boxes, axis=1)
        scores = fluid.layers.concat(scores, axis=1)
        test_program = main.clone(for_test=True)
        lr = fluid.layers.linear_lr_warmup(
            fluid.layers.piecewise_decay(boundaries=list(boundaries),
                                         values=[learning_rate, learning_rate * 0.1]),
            warmup_steps, learning_rate * 0.1, learning_rate)
        optimizer = fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9,
                                             regularization=L2Decay(5e-4))
        optimizer.minimize(loss)
    feeds = ["image", "gt_box", "gt_label", "gt_score", "im_size"]
    return main, startup, test_program, feeds, loss, boxes, scores


def synthetic_batch(rng, n):
    """n images with 1-3 rectangles each: class c brightens channel c; boxes as the zoo's
    reader gives them (cx, cy, w, h divided by the image size, zero rows padding), labels,
    scores (mixup's weights: 1, some 0.8) and the image sizes (height, width)."""
    image = rng.uniform(0.0, 0.3, (n, 3, IMAGE_SIZE, IMAGE_SIZE)).astype("float32")
    box = np.zeros((n, MAX_BOXES, 4), "float32")
    label = np.zeros((n, MAX_BOXES), "int32")
    score = np.zeros((n, MAX_BOXES), "float32")
    for i in range(n):
        for t in range(rng.randint(1, 4)):
            w, h = rng.randint(10, 40, 2)
            x0, y0 = rng.randint(0, IMAGE_SIZE - w), rng.randint(0, IMAGE_SIZE - h)
            c = rng.randint(0, CLASS_NUM)
            image[i, c, y0:y0 + h, x0:x0 + w] += 0.7
            box[i, t] = [(x0 + w / 2) / IMAGE_SIZE, (y0 + h / 2) / IMAGE_SIZE,
                         w / IMAGE_SIZE, h / IMAGE_SIZE]
            label[i, t] = c
            score[i, t] = 1.0 if rng.uniform() < 0.75 else 0.8
    size = np.full((n, 2), IMAGE_SIZE, "int32")
    return {"image": image, "gt_box": box, "gt_label": label, "gt_score": score,
            "im_size": size}


def init_parameters(program, scope, place):
    """Every parameter from numpy, seeded by its name: conv weights N(0, 1/sqrt(fan_in)),
    batch_norm scales 1, offsets and biases 0 (a start that does not depend on the
    framework's random generator)."""
    values = {}
    for p in sorted(program.global_block().all_parameters(), key=lambda v: v.name):
        shape = [int(d) for d in p.shape]
        if p.name.endswith(".weights"):
            rng = np.random.RandomState(zlib.crc32(p.name.encode()) % (2 ** 31))
            fan_in = int(np.prod(shape[1:]))
            value = rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape)
        elif p.name.endswith(".scale"):
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        values[p.name] = value.astype("float32")
        scope.find_var(p.name).get_tensor().set(values[p.name], place)
    return values


def trainer():
    return int(os.getenv("PADDLE_TRAINER_ID", "0")), int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def train(steps, batch_size=8, seed=0, log=print):
    """Train `steps` steps on fresh synthetic batches (the same global batches on every rank;
    each rank feeds its 1/N); returns (losses, final parameters, (test program, boxes,
    scores))."""
    rank, ranks = trainer()
    main, startup, test_program, feeds, loss, boxes, scores = build()
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    scope = fluid.global_scope()
    exe.run(startup)
    init_parameters(main, scope, place)
    build_strategy = fluid.BuildStrategy()
    build_strategy.sync_batch_norm = ranks > 1
    program = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                             build_strategy=build_strategy)
    rng = np.random.RandomState(seed)
    per = batch_size // ranks
    losses = []
    for step in range(steps):
        batch = synthetic_batch(rng, batch_size)
        mine = {k: v[rank * per:(rank + 1) * per] for k, v in batch.items()}
        (value,) = exe.run(program, feed=mine, fetch_list=[loss.name])
        losses.append(float(np.mean(value)))
        if rank == 0:
            log(f"step {step:3d}  loss {losses[-1]:.5f}")
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.global_block().all_parameters()}
    return losses, params, (test_program, boxes, scores)


def best_box_iou(boxes, scores, batch):
    """Per image: the IoU of its highest-scoring box with the ground truth it overlaps most."""
    out = []
    for i in range(boxes.shape[0]):
        k = int(np.argmax(scores[i].max(axis=1)))
        x1, y1, x2, y2 = boxes[i, k]
        best = 0.0
        for cx, cy, w, h in batch["gt_box"][i] * IMAGE_SIZE:
            if w <= 0:
                continue
            ix = max(0.0, min(x2, cx + w / 2) - max(x1, cx - w / 2))
            iy = max(0.0, min(y2, cy + h / 2) - max(y1, cy - h / 2))
            inter = ix * iy
            best = max(best, inter / ((x2 - x1) * (y2 - y1) + w * h - inter))
        out.append(best)
    return float(np.mean(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--save", default="", help="write the losses and final parameters "
                        "(an .npz: 'losses' and one array per parameter name)")
    args = parser.parse_args()
    losses, params, (test_program, boxes, scores) = train(args.steps, args.batch_size)
    rank, ranks = trainer()
    if rank == 0:
        test = fluid.Executor(fluid.CPUPlace())
        batch = synthetic_batch(np.random.RandomState(99), 4)
        b, s = test.run(test_program, feed=batch, fetch_list=[boxes, scores])
        print("first loss {:.4f}  last loss {:.4f}  top-box IoU {:.3f}  ({} rank{})".format(
            losses[0], losses[-1], best_box_iou(b, s, batch), ranks, "s" if ranks > 1 else ""))
        if args.save:
            np.savez(args.save, losses=np.array(losses), **params)


if __name__ == "__main__":
    main()
