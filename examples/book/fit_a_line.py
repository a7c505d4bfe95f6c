"""Fit a line: linear regression on 13 housing-style features.

Written in the idioms of: the PaddlePaddle book, chapter 1 (fit_a_line/train.py, fluid 1.x):
a reader creator, paddle.reader.shuffle + paddle.batch, fluid.DataFeeder, fluid.layers.fc +
square_error_cost + mean, a polynomial_decay learning rate with the Momentum optimizer, a test
program cloned for_test, save_inference_model and load_inference_model for inference.

    python examples/book/fit_a_line.py --save_dir out          # one process
    paddle-launch --nproc_per_node 2 examples/book/fit_a_line.py --save_dir out
"""
import argparse
import os
import random

import numpy

import spmd as paddle
import spmd.fluid as fluid

BATCH_SIZE = 20
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def housing_reader(n, seed):
    """A reader creator in uci_housing's sample layout: (13 float32 features, [price])."""
    def reader():
        rng = numpy.random.RandomState(seed)
        w = numpy.linspace(-1.0, 1.0, 13).astype("float32")
        for _ in range(n):
            x = rng.uniform(-1, 1, size=13).astype("float32")
            yield x, numpy.array([x.dot(w) + 0.5], dtype="float32")
    return reader


def my_share(batch_reader):
    """Each trainer takes its contiguous 1/TRAINERS of every global batch."""
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="fit_a_line.model")
    parser.add_argument("--num_epochs", type=int, default=3)
    args = parser.parse_args()
    # paddle.reader.shuffle draws from Python's random: every trainer must shuffle alike, so
    # that each takes its share of the same global batch
    random.seed(90)

    main_program = fluid.default_main_program()
    startup_program = fluid.default_startup_program()
    main_program.random_seed = startup_program.random_seed = 90

    x = fluid.layers.data(name="x", shape=[13], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    y_predict = fluid.layers.fc(input=x, size=1, act=None)
    cost = fluid.layers.square_error_cost(input=y_predict, label=y)
    avg_loss = fluid.layers.mean(cost)
    test_program = main_program.clone(for_test=True)
    learning_rate = fluid.layers.polynomial_decay(learning_rate=0.01, decay_steps=60,
                                                  end_learning_rate=0.001, power=1.0)
    optimizer = fluid.optimizer.Momentum(learning_rate=learning_rate, momentum=0.5)
    optimizer.minimize(avg_loss)

    train_reader = my_share(paddle.batch(
        paddle.reader.shuffle(housing_reader(400, 1), buf_size=500), batch_size=BATCH_SIZE))
    test_reader = paddle.batch(housing_reader(100, 2), batch_size=BATCH_SIZE)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(startup_program)
    program = main_program
    if TRAINERS > 1:
        program = fluid.CompiledProgram(main_program).with_data_parallel(loss_name=avg_loss.name)
    feeder = fluid.DataFeeder(place=place, feed_list=[x, y])

    for pass_id in range(args.num_epochs):
        for step, data in enumerate(train_reader()):
            avg_loss_value, = exe.run(program, feed=feeder.feed(data), fetch_list=[avg_loss])
            if step % 10 == 0 and TRAINER_ID == 0:
                print("Pass %d, Batch %d, Cost %f" % (pass_id, step, avg_loss_value))
        losses = [exe.run(test_program, feed=feeder.feed(d), fetch_list=[avg_loss])[0]
                  for d in test_reader()]
        if TRAINER_ID == 0:
            print("Pass %d, test cost %.6f" % (pass_id, numpy.mean(losses)))

    if TRAINER_ID == 0:
        fluid.io.save_inference_model(os.path.join(args.save_dir, "inference"), ["x"],
                                      [y_predict], exe)
        fluid.io.save_persistables(exe, args.save_dir, main_program)
        infer_exe = fluid.Executor(place)
        inference_scope = fluid.core.Scope()
        with fluid.scope_guard(inference_scope):
            [inference_program, feed_target_names, fetch_targets] = \
                fluid.io.load_inference_model(os.path.join(args.save_dir, "inference"),
                                              infer_exe)
            batch = next(test_reader())
            tensor_x = numpy.array([d[0] for d in batch]).astype("float32")
            results = infer_exe.run(inference_program, feed={feed_target_names[0]: tensor_x},
                                    fetch_list=fetch_targets)
            print("infer results: ", results[0][:3].ravel())


if __name__ == "__main__":
    main()
