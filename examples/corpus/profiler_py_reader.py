"""A profiled training loop fed by a py_reader, with a Python op and a Print in the graph.

Written in the idioms of: Paddle 1.x's unit tests test_profiler.py, test_py_reader_using_executor
and test_py_func_op.py (fluid 1.5-1.8): fluid.layers.py_reader(capacity, shapes, dtypes) +
double_buffer + read_file, reader.decorate_paddle_reader(paddle.batch(...)),
reader.start() / fluid.core.EOFException / reader.reset(), fluid.profiler.profiler('CPU',
'total', path) around the loop, fluid.layers.py_func with a backward function,
fluid.layers.Print(first_n=...), paddle.reader.buffered / map_readers / firstn decorators,
and fluid.dygraph imported beside a static program (many 1.8 scripts do so).

    python profiler_py_reader.py --save_dir out
    paddle-launch --nproc_per_node 2 profiler_py_reader.py --save_dir out
"""
import argparse
import os

import numpy

import spmd as paddle
import spmd.fluid as fluid
import spmd.fluid.profiler as profiler
from spmd.fluid.dygraph.base import to_variable  # noqa: F401 - imported, never used in static

BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def tanh(x):
    return numpy.tanh(numpy.array(x))


def tanh_grad(y, dy):
    return numpy.array(dy) * (1 - numpy.square(numpy.array(y)))


def sample_reader():
    rng = numpy.random.RandomState(8)
    w = rng.normal(size=(6, 1)).astype("float32")
    for _ in range(BATCH_SIZE * 6):
        x = rng.normal(size=6).astype("float32")
        yield x, x.dot(w).astype("float32")


def my_share(batch_reader):
    def reader():
        for batch in batch_reader():
            per = len(batch) // TRAINERS
            yield batch[TRAINER_ID * per:(TRAINER_ID + 1) * per]
    return reader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="profiled.model")
    parser.add_argument("--profile_path", default=None)
    args = parser.parse_args()
    main_prog, startup = fluid.Program(), fluid.Program()
    main_prog.random_seed = startup.random_seed = 2
    with fluid.program_guard(main_prog, startup):
        reader = fluid.layers.py_reader(capacity=4, shapes=[(-1, 6), (-1, 1)],
                                        dtypes=["float32", "float32"])
        x, y = fluid.layers.read_file(fluid.layers.double_buffer(reader))
        hidden = fluid.layers.fc(input=x, size=12)
        activated = main_prog.current_block().create_var(
            name="py_tanh_out", dtype="float32", shape=hidden.shape)
        fluid.layers.py_func(func=tanh, x=hidden, out=activated, backward_func=tanh_grad,
                             skip_vars_in_backward_input=hidden)
        pred = fluid.layers.fc(input=activated, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        fluid.layers.Print(cost, first_n=2, message="cost")
        fluid.optimizer.Adadelta(learning_rate=1.0, epsilon=1e-6, rho=0.95).minimize(cost)

    batches = my_share(paddle.batch(paddle.reader.buffered(paddle.reader.firstn(
        paddle.reader.map_readers(lambda s: (s[0], s[1] * 0.5), sample_reader),
        BATCH_SIZE * 5), size=8), batch_size=BATCH_SIZE, drop_last=True))
    reader.decorate_paddle_reader(batches)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    program = main_prog
    if TRAINERS > 1:
        program = fluid.CompiledProgram(main_prog).with_data_parallel(loss_name=cost.name)
    profile_path = args.profile_path or os.path.join(args.save_dir, "profile")
    os.makedirs(args.save_dir, exist_ok=True)
    with profiler.profiler("CPU", "total", profile_path):
        for epoch in range(2):
            reader.start()
            step = 0
            try:
                while True:
                    loss, = exe.run(program, fetch_list=[cost.name])
                    if TRAINER_ID == 0:
                        print("epoch %d step %d cost %.6f" % (epoch, step, loss))
                    step += 1
            except fluid.core.EOFException:
                reader.reset()
    if TRAINER_ID == 0:
        fluid.io.save_params(exe, args.save_dir, main_prog)


if __name__ == "__main__":
    main()
