"""One small classifier, one learning-rate schedule at a time, the rate fetched every step.

Written in the idioms of: Paddle 1.x's unit test test_learning_rate_scheduler.py and the model
zoo's optimizer helpers (PaddleCV image_classification utility/optimizer.py, fluid 1.6-1.8):
fluid.layers.exponential_decay / natural_exp_decay / inverse_time_decay / polynomial_decay
(cycle) / piecewise_decay / noam_decay / cosine_decay / linear_lr_warmup, the global step
counter, the rate fetched as a variable, and the paddle 2.x static spelling
paddle.optimizer.lr.StepDecay driven by scheduler.step(). The schedule is picked with
--schedule; by default all of them run, one program each.

    python lr_schedules.py --save_dir out
    paddle-launch --nproc_per_node 2 lr_schedules.py --save_dir out
"""
import argparse
import os

import numpy

import spmd as paddle
import spmd.fluid as fluid

BATCH_SIZE = 16
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))

SCHEDULES = {
    "exponential": lambda: fluid.layers.exponential_decay(0.1, decay_steps=3, decay_rate=0.5),
    "natural_exp": lambda: fluid.layers.natural_exp_decay(0.1, decay_steps=3, decay_rate=0.5,
                                                          staircase=True),
    "inverse_time": lambda: fluid.layers.inverse_time_decay(0.1, decay_steps=2,
                                                            decay_rate=0.5),
    "polynomial": lambda: fluid.layers.polynomial_decay(0.1, decay_steps=4,
                                                        end_learning_rate=0.01, power=2.0,
                                                        cycle=True),
    "piecewise": lambda: fluid.layers.piecewise_decay(boundaries=[2, 5],
                                                      values=[0.1, 0.05, 0.01]),
    "noam": lambda: fluid.layers.noam_decay(d_model=16, warmup_steps=3),
    "cosine": lambda: fluid.layers.cosine_decay(0.1, step_each_epoch=2, epochs=4),
    "warmup": lambda: fluid.layers.linear_lr_warmup(
        fluid.layers.exponential_decay(0.1, decay_steps=3, decay_rate=0.5),
        warmup_steps=3, start_lr=0.0, end_lr=0.1),
    "paddle2_step_decay": lambda: paddle.optimizer.lr.StepDecay(learning_rate=0.1,
                                                                 step_size=3, gamma=0.5),
}


def train(name, steps, save_dir):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        hidden = fluid.layers.fc(input=x, size=16, act="relu")
        predict = fluid.layers.fc(input=hidden, size=4, act="softmax")
        avg_cost = fluid.layers.mean(fluid.layers.cross_entropy(input=predict, label=label))
        learning_rate = SCHEDULES[name]()
        optimizer = fluid.optimizer.Momentum(learning_rate=learning_rate, momentum=0.9)
        optimizer.minimize(avg_cost)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        program = main
        if TRAINERS > 1:
            program = fluid.CompiledProgram(main).with_data_parallel(loss_name=avg_cost.name)
        rng = numpy.random.RandomState(3)
        per = BATCH_SIZE // TRAINERS
        mine = slice(TRAINER_ID * per, (TRAINER_ID + 1) * per)
        rates = []
        for _ in range(steps):
            xs = rng.normal(size=(BATCH_SIZE, 8)).astype("float32")
            ys = (xs[:, :4].argmax(axis=1)).reshape(-1, 1).astype("int64")
            feed = {"x": xs[mine], "label": ys[mine]}
            if name == "paddle2_step_decay":  # 2.x: the scheduler object holds the rate
                exe.run(program, feed=feed, fetch_list=[avg_cost])
                rates.append(optimizer.get_lr())
                learning_rate.step()
            else:  # fluid 1.x: the rate is a variable of the program; fetch it
                _, lr = exe.run(program, feed=feed, fetch_list=[avg_cost, learning_rate])
                rates.append(float(lr))
        if TRAINER_ID == 0:
            print("%-18s lr: %s" % (name, " ".join("%.5f" % r for r in rates)))
            fluid.io.save_persistables(exe, os.path.join(save_dir, name), main)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="lr_schedules.model")
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default=None)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    for name in [args.schedule] if args.schedule else sorted(SCHEDULES):
        train(name, args.steps, args.save_dir)


if __name__ == "__main__":
    main()
