"""One MLP, trained a few steps by each of fluid's optimizers in turn.

Written in the idioms of: Paddle 1.x's unit tests test_optimizer.py / test_imperative_optimizer
(static part) and the model zoo's optimizer factories (PaddleCV utility/optimizer.py,
PaddleNLP optimization.py, fluid 1.6-1.8): fluid.optimizer.AdagradOptimizer,
DecayedAdagradOptimizer, FtrlOptimizer, LarsMomentumOptimizer, AdamaxOptimizer,
AdadeltaOptimizer, RMSPropOptimizer, LookaheadOptimizer wrapping SGD, Adam with
regularization=L2Decay and a natural_exp_decay rate, each built in its own
fluid.program_guard with fluid.unique_name.guard(), run on its own fluid.Scope.

    python optimizer_zoo.py --save_dir out
    paddle-launch --nproc_per_node 2 optimizer_zoo.py --save_dir out
"""
import argparse
import os

import numpy

import spmd.fluid as fluid

BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))

OPTIMIZERS = {
    "adagrad": lambda: fluid.optimizer.AdagradOptimizer(learning_rate=0.1, epsilon=1e-6),
    "decayed_adagrad": lambda: fluid.optimizer.DecayedAdagradOptimizer(learning_rate=0.1,
                                                                        decay=0.95),
    "ftrl": lambda: fluid.optimizer.FtrlOptimizer(learning_rate=0.1, l1=0.01, l2=0.01,
                                                  lr_power=-0.5),
    "lars_momentum": lambda: fluid.optimizer.LarsMomentumOptimizer(
        learning_rate=0.1, momentum=0.9, lars_coeff=0.001, lars_weight_decay=0.0005),
    "adamax": lambda: fluid.optimizer.AdamaxOptimizer(learning_rate=0.05, beta1=0.9,
                                                      beta2=0.999),
    "adadelta": lambda: fluid.optimizer.AdadeltaOptimizer(learning_rate=1.0, epsilon=1e-6,
                                                          rho=0.95),
    "rmsprop": lambda: fluid.optimizer.RMSPropOptimizer(learning_rate=0.01, rho=0.9),
    "lookahead": lambda: fluid.optimizer.LookaheadOptimizer(
        fluid.optimizer.SGD(learning_rate=0.1), alpha=0.5, k=2),
    "adam_l2": lambda: fluid.optimizer.AdamOptimizer(
        learning_rate=fluid.layers.natural_exp_decay(0.05, decay_steps=2, decay_rate=0.3),
        regularization=fluid.regularizer.L2Decay(regularization_coeff=0.01)),
}


def train(name, steps, save_dir):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 21
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[12], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        hidden = fluid.layers.fc(input=x, size=24, act="relu")
        logits = fluid.layers.fc(input=hidden, size=3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        OPTIMIZERS[name]().minimize(loss)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        program = main
        if TRAINERS > 1:
            program = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
        rng = numpy.random.RandomState(12)
        per = BATCH_SIZE // TRAINERS
        mine = slice(TRAINER_ID * per, (TRAINER_ID + 1) * per)
        losses = []
        for _ in range(steps):
            xs = rng.normal(size=(BATCH_SIZE, 12)).astype("float32")
            ys = (xs[:, :3].argmax(axis=1)).reshape(-1, 1).astype("int64")
            value, = exe.run(program, feed={"x": xs[mine], "y": ys[mine]}, fetch_list=[loss])
            losses.append(float(value))
        if TRAINER_ID == 0:
            print("%-16s loss %.5f -> %.5f" % (name, losses[0], losses[-1]))
            fluid.io.save_persistables(exe, os.path.join(save_dir, name), main)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="optimizer_zoo.model")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    for name in sorted(OPTIMIZERS):
        train(name, args.steps, args.save_dir)


if __name__ == "__main__":
    main()
