"""MNIST-style CNN trained with fleet's collective mode.

Written in the idioms of: Paddle 1.x's distributed unit-test model dist_mnist.py as the
fleet collective tests run it (test_dist_mnist_fleet*, fluid 1.6-1.8): role_maker
.PaddleCloudRoleMaker(is_collective=True), fleet.init, DistributedStrategy, an optimizer
wrapped by fleet.distributed_optimizer, exe.run(fleet.main_program), fleet.worker_index()/
worker_num() to pick the data shard, fleet.save_persistables on the first worker. The
network: conv2d + pool2d (fluid.nets.simple_img_conv_pool), fc softmax, Momentum.

    python dist_mnist_fleet.py --save_dir out
    paddle-launch --nproc_per_node 2 dist_mnist_fleet.py --save_dir out
"""
import argparse

import numpy

import spmd.fluid as fluid
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.collective import DistributedStrategy, fleet

BATCH_SIZE = 32


def cnn_model(data):
    conv_pool_1 = fluid.nets.simple_img_conv_pool(
        input=data, filter_size=3, num_filters=6, pool_size=2, pool_stride=2, act="relu",
        param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(value=0.05)))
    conv_pool_2 = fluid.nets.simple_img_conv_pool(
        input=conv_pool_1, filter_size=3, num_filters=8, pool_size=2, pool_stride=2,
        act="relu",
        param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(value=0.02)))
    return fluid.layers.fc(
        input=conv_pool_2, size=10, act="softmax",
        param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(value=0.01)))


def synthetic_mnist(n, seed):
    rng = numpy.random.RandomState(seed)
    labels = rng.randint(0, 10, size=(n, 1)).astype("int64")
    images = rng.normal(0, 0.3, size=(n, 1, 14, 14)).astype("float32")
    for i, lab in enumerate(labels[:, 0]):
        images[i, 0, lab:lab + 3, :] += 1.0
    return images, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="dist_mnist.model")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()

    role = role_maker.PaddleCloudRoleMaker(is_collective=True)
    fleet.init(role)

    images = fluid.layers.data(name="pixel", shape=[1, 14, 14], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    predict = cnn_model(images)
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(x=cost)
    batch_acc = fluid.layers.accuracy(input=predict, label=label)

    strategy = DistributedStrategy()
    strategy.nccl_comm_num = 1
    optimizer = fluid.optimizer.Momentum(learning_rate=0.01, momentum=0.9)
    optimizer = fleet.distributed_optimizer(optimizer, strategy=strategy)
    optimizer.minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fleet.startup_program)

    x, y = synthetic_mnist(BATCH_SIZE * args.steps, seed=5)
    per = BATCH_SIZE // fleet.worker_num()
    lo = fleet.worker_index() * per
    for step in range(args.steps):
        start = step * BATCH_SIZE + lo
        loss, acc = exe.run(fleet.main_program,
                            feed={"pixel": x[start:start + per], "label": y[start:start + per]},
                            fetch_list=[avg_cost.name, batch_acc.name])
        if fleet.is_first_worker():
            print("step %d loss %.6f acc %.3f" % (step, loss, acc))
    if fleet.is_first_worker():
        fleet.save_persistables(exe, args.save_dir)


if __name__ == "__main__":
    main()
