"""Image classification: a small ResNet on CIFAR-shaped images (3x32x32, 10 classes).

Written in the idioms of: the PaddlePaddle book, chapter 3 (image_classification,
resnet.py + train.py, fluid 1.x): conv_bn_layer / shortcut / basicblock / layer_warp /
resnet_cifar10(depth), pool2d average pooling, fc softmax, cross_entropy, accuracy,
paddle.batch over a cifar.train10()-layout reader creator with paddle.reader.shuffle,
fluid.DataFeeder, Momentum with a cosine_decay learning rate and L2Decay, and
BuildStrategy.sync_batch_norm so that the batch statistics cover the global batch.
The data are synthetic (class-dependent stripes): no download.

    python examples/book/image_classification.py --save_dir out
    paddle-launch --nproc_per_node 2 examples/book/image_classification.py --save_dir out
"""
import argparse
import os
import random

import numpy

import spmd as paddle
import spmd.fluid as fluid

BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def conv_bn_layer(input, ch_out, filter_size, stride, padding, act="relu", bias_attr=False):
    tmp = fluid.layers.conv2d(input=input, filter_size=filter_size, num_filters=ch_out,
                              stride=stride, padding=padding, act=None, bias_attr=bias_attr)
    return fluid.layers.batch_norm(input=tmp, act=act)


def shortcut(input, ch_in, ch_out, stride):
    if ch_in != ch_out:
        return conv_bn_layer(input, ch_out, 1, stride, 0, None)
    return input


def basicblock(input, ch_in, ch_out, stride):
    tmp = conv_bn_layer(input, ch_out, 3, stride, 1)
    tmp = conv_bn_layer(tmp, ch_out, 3, 1, 1, act=None, bias_attr=True)
    short = shortcut(input, ch_in, ch_out, stride)
    return fluid.layers.elementwise_add(x=tmp, y=short, act="relu")


def layer_warp(block_func, input, ch_in, ch_out, count, stride):
    tmp = block_func(input, ch_in, ch_out, stride)
    for _ in range(1, count):
        tmp = block_func(tmp, ch_out, ch_out, 1)
    return tmp


def resnet_cifar10(ipt, depth=8):
    # depth should be one of 20, 32, 44, 56, 110 in the book; 8 keeps this example small
    assert (depth - 2) % 6 == 0
    n = (depth - 2) // 6
    conv1 = conv_bn_layer(ipt, ch_out=8, filter_size=3, stride=1, padding=1)
    res1 = layer_warp(basicblock, conv1, 8, 8, n, 1)
    res2 = layer_warp(basicblock, res1, 8, 16, n, 2)
    res3 = layer_warp(basicblock, res2, 16, 32, n, 2)
    pool = fluid.layers.pool2d(input=res3, pool_size=8, pool_type="avg", pool_stride=1)
    return fluid.layers.fc(input=pool, size=10, act="softmax")


def cifar_reader(n, seed):
    """paddle.dataset.cifar.train10() layout: (3072 float32 values in [0, 1], int label)."""
    def reader():
        rng = numpy.random.RandomState(seed)
        for _ in range(n):
            label = rng.randint(0, 10)
            img = rng.uniform(0, 0.5, size=(3, 32, 32)).astype("float32")
            img[label % 3, :, 3 * label:3 * label + 3] += 0.5
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
    parser.add_argument("--save_dir", default="image_classification.model")
    # float32 training of a small-batch batch_norm network is chaotic: after a dozen steps two
    # runs differing only in summation order (BLAS threads, or 1 process vs 2 ranks) part by
    # up to 1e-2; one epoch stays within 1e-5 (in float64 they agree to 1e-14)
    parser.add_argument("--num_epochs", type=int, default=1)
    args = parser.parse_args()
    # paddle.reader.shuffle draws from Python's random: every trainer must shuffle alike, so
    # that each takes its share of the same global batch
    random.seed(90)
    fluid.default_startup_program().random_seed = 90
    fluid.default_main_program().random_seed = 90

    images = fluid.layers.data(name="pixel", shape=[3, 32, 32], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    predict = resnet_cifar10(images)
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=predict, label=label)
    test_program = fluid.default_main_program().clone(for_test=True)
    steps_per_epoch = 96 // BATCH_SIZE
    optimizer = fluid.optimizer.Momentum(
        learning_rate=fluid.layers.cosine_decay(0.05, step_each_epoch=steps_per_epoch,
                                                epochs=args.num_epochs),
        momentum=0.9, regularization=fluid.regularizer.L2Decay(5e-4))
    optimizer.minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    build_strategy = fluid.BuildStrategy()
    build_strategy.sync_batch_norm = TRAINERS > 1
    train_program = fluid.CompiledProgram(fluid.default_main_program()).with_data_parallel(
        loss_name=avg_cost.name, build_strategy=build_strategy)
    feeder = fluid.DataFeeder(place=place, feed_list=[images, label])
    train_reader = my_share(paddle.batch(paddle.reader.shuffle(cifar_reader(96, 1),
                                                               buf_size=128),
                                         batch_size=BATCH_SIZE))
    test_reader = paddle.batch(cifar_reader(48, 2), batch_size=BATCH_SIZE)
    for pass_id in range(args.num_epochs):
        for batch_id, data in enumerate(train_reader()):
            loss, acc = exe.run(train_program, feed=feeder.feed(data),
                                fetch_list=[avg_cost, accuracy])
            if TRAINER_ID == 0 and batch_id % 2 == 0:
                print("Pass %d, Batch %d, Cost %f, Acc %f" % (pass_id, batch_id,
                                                              numpy.mean(loss),
                                                              numpy.mean(acc)))
        accs = [exe.run(test_program, feed=feeder.feed(d), fetch_list=[accuracy])[0]
                for d in test_reader()]
        if TRAINER_ID == 0:
            print("Test with Pass %d, Acc %.4f" % (pass_id, float(numpy.mean(accs))))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, fluid.default_main_program())


if __name__ == "__main__":
    main()
