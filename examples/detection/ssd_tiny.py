"""A tiny SSD, written as the model zoo writes it (PaddlePaddle/models release/1.8,
PaddleCV/ssd: mobilenet_ssd.py, train.py): a shrunk MobileNet v1 (conv_bn, depthwise
separable blocks) with extra stride-2 layers, fluid.layers.multi_box_head on three feature
maps (the first without a max size, as the zoo's), fluid.layers.ssd_loss summed over the
batch, RMSProp on piecewise_decay with L2Decay, batch_norm synchronized across ranks, and
detection_output (box_coder + multiclass_nms) for inference. The data are synthetic: 32x32
images holding 1-3 coloured rectangles of 3 classes, ground truth as LoD tensors (boxes per
image), no download.

    python examples/detection/ssd_tiny.py --steps 30
    mpiexec -n 2 python examples/detection/ssd_tiny.py --steps 30   # 1/2 of each batch each

The zoo's loss (ssd_loss's normalize=True) divides each rank's sum by the positives that rank
matched, so N ranks train a slightly different sum than one process does; --mean_loss
(normalize=False, the mean over images) is the form where N ranks on 1/N of the batch equal
one process on all of it. The initial parameters come from numpy (init_parameters: seeded by
each parameter's name); with its import line switched to `import paddle.fluid as fluid` this
file runs unchanged in PaddlePaddle 1.8.5 (tests/oracle/make_detection_ssd.py does so and
stores its first losses).
"""
from __future__ import annotations

import argparse
import os
import zlib

import numpy as np

import spmd.fluid as fluid
from spmd.fluid.param_attr import ParamAttr
from spmd.fluid.regularizer import L2Decay

IMAGE_SIZE = 32
CLASS_NUM = 4  # background + 3 kinds of rectangle
ORACLE_STEPS = 6
ORACLE_BATCH = 4


def conv_bn(input, filter_size, num_filters, stride, padding, num_groups=1, act="relu",
            name=None):
    conv = fluid.layers.conv2d(
        input=input, num_filters=num_filters, filter_size=filter_size, stride=stride,
        padding=padding, groups=num_groups, act=None, use_cudnn=False,
        param_attr=ParamAttr(name=name + "_weights"), bias_attr=False)
    return fluid.layers.batch_norm(
        input=conv, act=act, param_attr=ParamAttr(name=name + "_bn_scale"),
        bias_attr=ParamAttr(name=name + "_bn_offset"), moving_mean_name=name + "_bn_mean",
        moving_variance_name=name + "_bn_variance")


def depthwise_separable(input, num_filters1, num_filters2, num_groups, stride, name):
    depthwise = conv_bn(input, 3, int(num_filters1), stride, 1, int(num_groups),
                        name=name + "_dw")
    return conv_bn(depthwise, 1, int(num_filters2), 1, 0, name=name + "_sep")


def extra_block(input, num_filters1, num_filters2, num_groups, stride, name):
    pointwise = conv_bn(input, 1, int(num_filters1), 1, 0, int(num_groups), name=name + "_1")
    return conv_bn(pointwise, 3, int(num_filters2), stride, 1, name=name + "_2")


def mobilenet_ssd(image, num_classes):
    """(locs, confs, prior boxes, prior variances) of the zoo's MobileNet-SSD, shrunk."""
    tmp = conv_bn(image, 3, 8, 2, 1, name="conv1")  # 16x16
    tmp = depthwise_separable(tmp, 8, 16, 8, 1, name="conv2_1")
    module8 = depthwise_separable(tmp, 16, 16, 16, 2, name="conv2_2")  # 8x8
    module4 = depthwise_separable(module8, 16, 32, 16, 2, name="conv3_1")  # 4x4
    module2 = extra_block(module4, 16, 32, 1, 2, name="conv4")  # 2x2
    return fluid.layers.multi_box_head(
        inputs=[module8, module4, module2], image=image, num_classes=num_classes,
        min_ratio=20, max_ratio=90, min_sizes=[6.0, 12.0, 20.0],
        max_sizes=[[], 20.0, 30.0], aspect_ratios=[[2.0], [2.0, 3.0], [2.0]],
        steps=[4.0, 8.0, 16.0], base_size=IMAGE_SIZE, offset=0.5, flip=True, clip=True)


def build(learning_rate=0.01, boundaries=(20,), mean_loss=False, optimizer="rmsprop"):
    """(main, startup, test program, feed names, loss, nmsed detections): the zoo's SSD
    train program and its inference program (detection_output, cloned for test). The zoo
    trains with RMSProp; optimizer="momentum" is for comparing frameworks over several steps
    (RMSProp's first steps move a parameter by about lr whatever its gradient's size, so a
    gradient of rounding-noise size moves it as much as a real one)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        image = fluid.data(name="image", shape=[None, 3, IMAGE_SIZE, IMAGE_SIZE],
                           dtype="float32")
        gt_box = fluid.data(name="gt_box", shape=[None, 4], dtype="float32", lod_level=1)
        gt_label = fluid.data(name="gt_label", shape=[None, 1], dtype="int32", lod_level=1)
        locs, confs, box, box_var = mobilenet_ssd(image, CLASS_NUM)
        nmsed_out = fluid.layers.detection_output(locs, confs, box, box_var,
                                                  nms_threshold=0.45, score_threshold=0.1)
        test_program = main.clone(for_test=True)
        loss = fluid.layers.ssd_loss(locs, confs, gt_box, gt_label, box, box_var,
                                     normalize=not mean_loss)
        loss = fluid.layers.reduce_mean(loss) if mean_loss else fluid.layers.reduce_sum(loss)
        lr = fluid.layers.piecewise_decay(boundaries=list(boundaries),
                                          values=[learning_rate, learning_rate * 0.1])
        if optimizer == "rmsprop":
            opt = fluid.optimizer.RMSProp(learning_rate=lr, regularization=L2Decay(0.00005))
        else:
            opt = fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9,
                                           regularization=L2Decay(0.00005))
        opt.minimize(loss)
    return main, startup, test_program, ["image", "gt_box", "gt_label"], loss, nmsed_out


def synthetic_images(rng, n):
    """n images with 1-3 rectangles each: class c (1..3) brightens channel c - 1; boxes as
    the zoo's reader gives them (xmin, ymin, xmax, ymax over the image size), per image."""
    image = rng.uniform(0.0, 0.3, (n, 3, IMAGE_SIZE, IMAGE_SIZE)).astype("float32")
    boxes, labels = [], []
    for i in range(n):
        b, lab = [], []
        for _ in range(rng.randint(1, 4)):
            w, h = rng.randint(6, 24, 2)
            x0, y0 = rng.randint(0, IMAGE_SIZE - w), rng.randint(0, IMAGE_SIZE - h)
            c = rng.randint(1, CLASS_NUM)
            image[i, c - 1, y0:y0 + h, x0:x0 + w] += 0.7
            b.append([x0 / IMAGE_SIZE, y0 / IMAGE_SIZE, (x0 + w) / IMAGE_SIZE,
                      (y0 + h) / IMAGE_SIZE])
            lab.append([c])
        boxes.append(np.array(b, "float32"))
        labels.append(np.array(lab, "int32"))
    return image, boxes, labels


def feed_of(image, boxes, labels, place):
    """The feed of some images: ground truth as LoD tensors of their boxes per image."""
    lengths = [[len(b) for b in boxes]]
    return {"image": image,
            "gt_box": fluid.create_lod_tensor(np.concatenate(boxes), lengths, place),
            "gt_label": fluid.create_lod_tensor(np.concatenate(labels), lengths, place)}


def init_parameters(program, scope, place):
    """Every parameter from numpy, seeded by its name: conv weights N(0, 1/sqrt(fan_in)),
    batch_norm scales 1, offsets and biases 0 (a start independent of the framework's
    random generator)."""
    for p in sorted(program.global_block().all_parameters(), key=lambda v: v.name):
        shape = [int(d) for d in p.shape]
        if p.name.endswith("_weights") or p.name.endswith(".w_0"):
            rng = np.random.RandomState(zlib.crc32(p.name.encode()) % (2 ** 31))
            value = rng.normal(0.0, 1.0 / np.sqrt(int(np.prod(shape[1:]))), shape)
        elif p.name.endswith("_scale"):
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        scope.find_var(p.name).get_tensor().set(value.astype("float32"), place)


def trainer():
    return int(os.getenv("PADDLE_TRAINER_ID", "0")), int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def train(steps, batch_size=8, seed=0, mean_loss=False, log=print, data_parallel=True,
          optimizer="rmsprop", learning_rate=0.01):
    """Train `steps` steps on fresh synthetic batches (the same global batches on every rank;
    each rank feeds its 1/N); returns (losses, final parameters, (test program, nmsed, the
    scope holding the trained parameters))."""
    scope = fluid.Scope()  # each run its own, so that runs in one process start alike
    with fluid.scope_guard(scope):
        return _train(scope, steps, batch_size, seed, log, data_parallel,
                      dict(mean_loss=mean_loss, optimizer=optimizer,
                           learning_rate=learning_rate))


def _train(scope, steps, batch_size, seed, log, data_parallel, options):
    rank, ranks = trainer()
    main, startup, test_program, _, loss, nmsed = build(**options)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(startup)
    init_parameters(main, scope, place)
    program = main
    if data_parallel:
        build_strategy = fluid.BuildStrategy()
        build_strategy.sync_batch_norm = ranks > 1
        program = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=build_strategy)
    rng = np.random.RandomState(seed)
    per = batch_size // ranks
    losses = []
    for step in range(steps):
        image, boxes, labels = synthetic_images(rng, batch_size)
        mine = slice(rank * per, (rank + 1) * per)
        feed = feed_of(image[mine], boxes[mine], labels[mine], place)
        (value,) = exe.run(program, feed=feed, fetch_list=[loss.name])
        losses.append(float(np.mean(value)))
        if rank == 0:
            log(f"step {step:3d}  loss {losses[-1]:.5f}")
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.global_block().all_parameters()}
    return losses, params, (test_program, nmsed, scope)


def first_losses(steps=ORACLE_STEPS, batch_size=ORACLE_BATCH, optimizer="rmsprop"):
    """The first losses of one process on the whole batch, without data parallelism (what
    the oracle stores: fluid 1.8.5's single-place Executor runs the plain program)."""
    losses, _, _ = train(steps, batch_size, log=lambda line: None, data_parallel=False,
                         optimizer=optimizer)
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--mean_loss", action="store_true",
                        help="ssd_loss without normalize, the mean over images (N ranks == "
                             "1 process)")
    parser.add_argument("--optimizer", default="rmsprop", choices=["rmsprop", "momentum"])
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--save_params", default="",
                        help="write the final parameters (.npz); ranks > 1 add .rank<r>")
    args = parser.parse_args()
    losses, params, (test_program, nmsed, scope) = train(args.steps, args.batch_size,
                                                         mean_loss=args.mean_loss,
                                                         optimizer=args.optimizer,
                                                         learning_rate=args.learning_rate)
    rank, ranks = trainer()
    if args.save_params:
        path = args.save_params if ranks == 1 else f"{args.save_params}.rank{rank}.npz"
        np.savez(path, **params)
    if rank == 0:
        place = fluid.CPUPlace()
        image, boxes, labels = synthetic_images(np.random.RandomState(99), 4)
        (out,) = fluid.Executor(place).run(test_program, feed=feed_of(image, boxes, labels,
                                                                      place),
                                           fetch_list=[nmsed], scope=scope,
                                           return_numpy=False)
        print("first loss {:.4f}  last loss {:.4f}  detections {}  ({} rank{})".format(
            losses[0], losses[-1], np.array(out).shape[0], ranks, "s" if ranks > 1 else ""))


if __name__ == "__main__":
    main()
