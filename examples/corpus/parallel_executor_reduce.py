"""An MLP classifier trained through fluid.ParallelExecutor in Reduce mode.

Written in the idioms of: Paddle 1.x's ParallelExecutor unit tests
(test_parallel_executor_mnist.py / parallel_executor_test_base.py, fluid 1.5-1.8):
fluid.ParallelExecutor(use_cuda, loss_name, main_program, build_strategy, exec_strategy),
BuildStrategy.ReduceStrategy.Reduce with fuse_all_reduce_ops, ExecutionStrategy fields
(num_threads, allow_op_delay, num_iteration_per_drop_scope, use_experimental_executor),
pe.run(fetch_list, feed), a fed persistable learning rate, a ParallelExecutor for the test
program sharing the train one's variables (share_vars_from), and the Adamax optimizer.

    python parallel_executor_reduce.py --save_dir out
    paddle-launch --nproc_per_node 2 parallel_executor_reduce.py --save_dir out
"""
import argparse
import os

import numpy

import spmd.fluid as fluid

BATCH_SIZE = 32
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def simple_fc_net(img, label):
    hidden = img
    for _ in range(2):
        hidden = fluid.layers.fc(
            hidden, size=48, act="relu",
            bias_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(value=1.0)))
    prediction = fluid.layers.fc(hidden, size=10, act="softmax")
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    return fluid.layers.mean(loss), prediction


def data(step, seed=2):
    rng = numpy.random.RandomState(seed + step)
    label = rng.randint(0, 10, size=(BATCH_SIZE, 1)).astype("int64")
    img = rng.uniform(-1, 1, size=(BATCH_SIZE, 64)).astype("float32")
    img[numpy.arange(BATCH_SIZE), label[:, 0] * 6] += 2.0
    return img, label


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="pe_reduce.model")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    main_program, startup = fluid.Program(), fluid.Program()
    main_program.random_seed = startup.random_seed = 1
    with fluid.program_guard(main_program, startup):
        img = fluid.layers.data(name="image", shape=[64], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        loss, prediction = simple_fc_net(img, label)
        test_program = main_program.clone(for_test=True)
        lr = fluid.layers.create_global_var(shape=[1], value=0.01, dtype="float32",
                                            persistable=True, name="lr")
        fluid.optimizer.Adamax(learning_rate=lr).minimize(loss)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    build_strategy = fluid.BuildStrategy()
    build_strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    build_strategy.fuse_all_reduce_ops = True
    build_strategy.enable_inplace = True
    build_strategy.memory_optimize = False
    exec_strategy = fluid.ExecutionStrategy()
    exec_strategy.num_threads = 1
    exec_strategy.allow_op_delay = False
    exec_strategy.num_iteration_per_drop_scope = 10
    exec_strategy.use_experimental_executor = True
    train_exe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name,
                                       main_program=main_program,
                                       build_strategy=build_strategy,
                                       exec_strategy=exec_strategy)
    test_exe = fluid.ParallelExecutor(use_cuda=False, main_program=test_program,
                                      share_vars_from=train_exe)
    per = BATCH_SIZE // TRAINERS
    mine = slice(TRAINER_ID * per, (TRAINER_ID + 1) * per)
    for step in range(args.steps):
        x, y = data(step)
        lr_value = numpy.array([0.01 if step < 5 else 0.005], dtype="float32")
        loss_v, = train_exe.run(fetch_list=[loss.name],
                                feed={"image": x[mine], "label": y[mine], "lr": lr_value})
        if TRAINER_ID == 0:
            print("step %d loss %.6f" % (step, numpy.mean(loss_v)))
    x, y = data(100)
    test_loss, = test_exe.run(fetch_list=[loss.name], feed={"image": x[mine], "label": y[mine]})
    if TRAINER_ID == 0:
        print("test loss %.6f" % numpy.mean(test_loss))
    if TRAINER_ID == 0:
        # Reduce mode splits the optimizer state over the ranks; the parameters are whole
        fluid.io.save_params(exe, args.save_dir, main_program=main_program)

if __name__ == "__main__":
    main()
