"""A tiny SE-ResNeXt on CIFAR-shaped images (3x16x16, 10 classes).

Written in the idioms of: Paddle 1.x's distributed unit-test model dist_se_resnext.py and the
model zoo's PaddleCV/image_classification SE_ResNeXt: conv_bn_layer with grouped convs,
squeeze-excitation via pool2d(pool_size=0, pool_type="avg", global_pooling=True) + two fc
layers + elementwise_mul(axis=0), shortcut projections, a dropout-free classifier head,
Momentum with piecewise_decay and L2Decay regularization, BuildStrategy(sync_batch_norm) and
ExecutionStrategy on a CompiledProgram.

    python se_resnext_tiny.py --save_dir out
    paddle-launch --nproc_per_node 2 se_resnext_tiny.py --save_dir out
"""
import argparse
import os

import numpy

import spmd as paddle
import spmd.fluid as fluid

BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def conv_bn_layer(input, num_filters, filter_size, stride=1, groups=1, act=None):
    conv = fluid.layers.conv2d(input=input, num_filters=num_filters, filter_size=filter_size,
                               stride=stride, padding=(filter_size - 1) // 2, groups=groups,
                               act=None, bias_attr=False)
    return fluid.layers.batch_norm(input=conv, act=act)


def squeeze_excitation(input, num_channels, reduction_ratio):
    pool = fluid.layers.pool2d(input=input, pool_size=0, pool_type="avg", global_pooling=True)
    squeeze = fluid.layers.fc(input=pool, size=num_channels // reduction_ratio, act="relu")
    excitation = fluid.layers.fc(input=squeeze, size=num_channels, act="sigmoid")
    return fluid.layers.elementwise_mul(x=input, y=excitation, axis=0)


def shortcut(input, ch_out, stride):
    ch_in = input.shape[1]
    if ch_in != ch_out or stride != 1:
        return conv_bn_layer(input, ch_out, 1, stride)
    return input


def bottleneck_block(input, num_filters, stride, cardinality, reduction_ratio):
    conv0 = conv_bn_layer(input, num_filters, 1, act="relu")
    conv1 = conv_bn_layer(conv0, num_filters, 3, stride=stride, groups=cardinality, act="relu")
    conv2 = conv_bn_layer(conv1, num_filters * 2, 1, act=None)
    scale = squeeze_excitation(conv2, num_filters * 2, reduction_ratio)
    short = shortcut(input, num_filters * 2, stride)
    return fluid.layers.elementwise_add(x=short, y=scale, act="relu")


def se_resnext(img, class_dim=10):
    conv = conv_bn_layer(img, 16, 3, act="relu")
    conv = fluid.layers.pool2d(input=conv, pool_size=3, pool_stride=2, pool_padding=1,
                               pool_type="max")
    for block, filters in enumerate([8, 16]):
        conv = bottleneck_block(conv, filters, stride=2 if block else 1, cardinality=4,
                                reduction_ratio=4)
    pool = fluid.layers.pool2d(input=conv, pool_size=0, pool_type="avg", global_pooling=True)
    return fluid.layers.fc(input=pool, size=class_dim, act="softmax")


def cifar_like_reader(n, seed):
    """paddle.dataset.cifar.train10() layout: (3072 float32 values in [0, 1], int label)."""
    def reader():
        rng = numpy.random.RandomState(seed)
        for _ in range(n):
            label = rng.randint(0, 10)
            img = rng.uniform(0, 1, size=(3, 16, 16)).astype("float32") * 0.5
            img[label % 3, :, label:label + 4] += 0.5  # a class-dependent stripe
            yield img.reshape(-1), label
    return reader


def my_share(batch_reader):
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="se_resnext.model")
    parser.add_argument("--num_epochs", type=int, default=1)
    args = parser.parse_args()
    fluid.default_startup_program().random_seed = 7
    fluid.default_main_program().random_seed = 7

    image = fluid.layers.data(name="image", shape=[3, 16, 16], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    out = se_resnext(image)
    cost = fluid.layers.cross_entropy(input=out, label=label)
    avg_cost = fluid.layers.mean(x=cost)
    acc_top1 = fluid.layers.accuracy(input=out, label=label, k=1)
    steps_per_epoch = 64 // BATCH_SIZE
    lr = fluid.layers.piecewise_decay(boundaries=[steps_per_epoch // 2],
                                      values=[0.05, 0.01])
    optimizer = fluid.optimizer.Momentum(
        learning_rate=lr, momentum=0.9, regularization=fluid.regularizer.L2Decay(1e-4))
    optimizer.minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    build_strategy = fluid.BuildStrategy()
    build_strategy.sync_batch_norm = TRAINERS > 1
    exec_strategy = fluid.ExecutionStrategy()
    exec_strategy.num_threads = 1
    exec_strategy.num_iteration_per_drop_scope = 30
    train_program = fluid.CompiledProgram(fluid.default_main_program()).with_data_parallel(
        loss_name=avg_cost.name, build_strategy=build_strategy, exec_strategy=exec_strategy)
    feeder = fluid.DataFeeder(place=place, feed_list=[image, label])
    reader = my_share(paddle.batch(cifar_like_reader(64, 3), batch_size=BATCH_SIZE))
    for pass_id in range(args.num_epochs):
        for batch_id, data in enumerate(reader()):
            loss, acc = exe.run(train_program, feed=feeder.feed(data),
                                fetch_list=[avg_cost.name, acc_top1.name])
            if TRAINER_ID == 0:
                print("Pass {0}, batch {1}, loss {2:.5f}, acc1 {3:.3f}".format(
                    pass_id, batch_id, loss[0], acc[0]))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
