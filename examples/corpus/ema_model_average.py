"""Exponential moving average and model average of the parameters, evaluated after training.

Written in the idioms of: the model zoo's PaddleCV image_classification train.py (fluid 1.6-1.8)
and Paddle's unit tests test_ema.py / test_model_average: fluid.optimizer.LambOptimizer
with exclude_from_weight_decay_fn, ExponentialMovingAverage(decay, thres_steps) with
ema.update() after minimize and `with ema.apply(exe):` around the evaluation,
ModelAverage(average_window_rate, min/max_average_window) with apply/restore, a batch_norm
network in test mode through clone(for_test=True), and BuildStrategy.sync_batch_norm.

    python ema_model_average.py --save_dir out
    paddle-launch --nproc_per_node 2 ema_model_average.py --save_dir out
"""
import argparse
import os

import numpy

import spmd.fluid as fluid

BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def net(x, label):
    hidden = fluid.layers.fc(input=x, size=32, bias_attr=False)  # batch_norm adds the bias
    hidden = fluid.layers.batch_norm(input=hidden, act="relu")
    logits = fluid.layers.fc(input=hidden, size=5)
    loss = fluid.layers.softmax_with_cross_entropy(logits=logits, label=label)
    return fluid.layers.mean(loss), logits


def batch(step):
    rng = numpy.random.RandomState(step)
    xs = rng.normal(size=(BATCH_SIZE, 10)).astype("float32")
    ys = xs[:, :5].argmax(axis=1).reshape(-1, 1).astype("int64")
    return xs, ys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="ema.model")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    main_prog, startup = fluid.Program(), fluid.Program()
    main_prog.random_seed = startup.random_seed = 4
    with fluid.program_guard(main_prog, startup):
        x = fluid.data(name="x", shape=[None, 10], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="int64")
        avg_cost, logits = net(x, label)
        test_prog = main_prog.clone(for_test=True)
        optimizer = fluid.optimizer.LambOptimizer(
            learning_rate=0.01, lamb_weight_decay=0.01,
            exclude_from_weight_decay_fn=lambda param: param.name.endswith(".b_0"))
        optimizer.minimize(avg_cost)
        ema = fluid.optimizer.ExponentialMovingAverage(0.9, thres_steps=None)
        ema.update()
        model_average = fluid.optimizer.ModelAverage(0.15, min_average_window=2,
                                                     max_average_window=4)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    build_strategy = fluid.BuildStrategy()
    build_strategy.sync_batch_norm = TRAINERS > 1
    program = fluid.CompiledProgram(main_prog).with_data_parallel(
        loss_name=avg_cost.name, build_strategy=build_strategy)
    per = BATCH_SIZE // TRAINERS
    mine = slice(TRAINER_ID * per, (TRAINER_ID + 1) * per)
    for step in range(args.steps):
        xs, ys = batch(step)
        cost, = exe.run(program, feed={"x": xs[mine], "label": ys[mine]},
                        fetch_list=[avg_cost.name])
        if TRAINER_ID == 0:
            print("step %d cost %.6f" % (step, numpy.mean(cost)))
    xs, ys = batch(1000)
    feed = {"x": xs, "label": ys}
    plain, = exe.run(test_prog, feed=feed, fetch_list=[avg_cost.name])
    with ema.apply(exe):
        averaged, = exe.run(test_prog, feed=feed, fetch_list=[avg_cost.name])
    with model_average.apply(exe):
        windowed, = exe.run(test_prog, feed=feed, fetch_list=[avg_cost.name])
    after, = exe.run(test_prog, feed=feed, fetch_list=[avg_cost.name])
    if TRAINER_ID == 0:
        print("test cost %.6f, with EMA %.6f, with ModelAverage %.6f, restored %.6f" % (
            plain, averaged, windowed, after))
        fluid.io.save_persistables(exe, args.save_dir, main_prog)


if __name__ == "__main__":
    main()
