"""A reader pipeline built from paddle.reader decorators, fed through PyReader and DataFeeder.

Written in the idioms of: the model zoo's reader.py files (PaddleCV image_classification
reader.py, PaddleNLP readers, fluid 1.5-1.8) and Paddle's unit tests test_data_feeder.py /
test_decorator.py / test_pyreader.py: paddle.reader.compose + map_readers + xmap_readers
(with process_num and order=True) + chain + cache + firstn + buffered + shuffle +
multiprocess_reader, paddle.batch(drop_last=True), fluid.io.PyReader(iterable=True) with
decorate_sample_list_generator, DataFeeder.decorate_reader, and a plain DataFeeder.feed
for evaluation; the RMSProp optimizer on a small regression network.

    python reader_pipeline.py --save_dir out
    paddle-launch --nproc_per_node 2 reader_pipeline.py --save_dir out
"""
import argparse
import os

import numpy

import spmd as paddle
import spmd.fluid as fluid

BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def features(start, n):
    def reader():
        rng = numpy.random.RandomState(start)
        for _ in range(n):
            yield rng.normal(size=5).astype("float32")
    return reader


def targets(start, n):
    def reader():
        for x in features(start, n)():
            yield numpy.array([x.sum() * 0.5], dtype="float32")
    return reader


def scale(sample):
    x, y = sample
    return x * 2.0, y * 2.0


def train_samples():
    part_a = paddle.reader.compose(features(1, 64), targets(1, 64), check_alignment=True)
    part_b = paddle.reader.compose(features(2, 64), targets(2, 64))
    chained = paddle.reader.chain(part_a, part_b)
    mapped = paddle.reader.xmap_readers(scale, chained, process_num=2, buffer_size=8,
                                        order=True)
    return paddle.reader.cache(paddle.reader.firstn(mapped, 128))


def my_share(batch_reader):
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="reader_pipeline.model")
    parser.add_argument("--num_epochs", type=int, default=2)
    args = parser.parse_args()
    main_prog, startup = fluid.Program(), fluid.Program()
    main_prog.random_seed = startup.random_seed = 6
    with fluid.program_guard(main_prog, startup):
        x = fluid.layers.data(name="x", shape=[5], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        hidden = fluid.layers.fc(input=x, size=10, act="relu")
        pred = fluid.layers.fc(input=hidden, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        test_prog = main_prog.clone(for_test=True)
        fluid.optimizer.RMSProp(learning_rate=0.01).minimize(cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(startup)
    program = main_prog
    if TRAINERS > 1:
        program = fluid.CompiledProgram(main_prog).with_data_parallel(loss_name=cost.name)
    py_reader = fluid.io.PyReader(feed_list=[x, y], capacity=4, iterable=True)
    py_reader.decorate_sample_list_generator(
        my_share(paddle.batch(paddle.reader.buffered(train_samples(), size=16),
                              batch_size=BATCH_SIZE, drop_last=True)), places=place)
    for epoch in range(args.num_epochs):
        for step, data in enumerate(py_reader()):
            loss, = exe.run(program, feed=data, fetch_list=[cost])
            if TRAINER_ID == 0 and step % 4 == 0:
                print("epoch %d step %d cost %.6f" % (epoch, step, loss))

    feeder = fluid.DataFeeder(feed_list=[x, y], place=place)
    eval_reader = feeder.decorate_reader(
        paddle.batch(paddle.reader.compose(features(9, 32), targets(9, 32)), batch_size=16),
        multi_devices=False)
    costs = [exe.run(test_prog, feed=d, fetch_list=[cost])[0] for d in eval_reader()]
    shuffled = paddle.batch(paddle.reader.shuffle(
        paddle.reader.multiprocess_reader([features(3, 8), features(4, 8)], use_pipe=False),
        buf_size=16), batch_size=4)
    seen = sum(len(b) for b in shuffled())
    if TRAINER_ID == 0:
        print("eval cost %.6f over %d batches; multiprocess_reader gave %d samples" % (
            numpy.mean(costs), len(costs), seen))
        fluid.io.save_persistables(exe, args.save_dir, main_prog)


if __name__ == "__main__":
    main()
