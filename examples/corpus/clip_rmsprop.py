"""A regression MLP trained with RMSProp under global-norm gradient clipping.

Written in the idioms of: Paddle 1.x's unit tests test_gradient_clip.py and
test_regularizer.py (fluid 1.6-1.8): fluid.clip.set_gradient_clip with
GradientClipByGlobalNorm over a named parameter list, a per-parameter ParamAttr regularizer
(L1Decay) beside the optimizer's L2Decay, ParamAttr(learning_rate=...) multipliers,
ErrorClipByValue on a hidden variable, fluid.optimizer.RMSPropOptimizer(centered=True),
fluid.program_guard with explicit programs, and fluid.io.save_persistables / load_persistables
round trip.

    python clip_rmsprop.py --save_dir out
    paddle-launch --nproc_per_node 2 clip_rmsprop.py --save_dir out
"""
import argparse
import os

import numpy

import spmd.fluid as fluid

BATCH_SIZE = 24
TRAINER_ID = int(os.getenv("PADDLE_TRAINER_ID", "0"))
TRAINERS = int(os.getenv("PADDLE_TRAINERS_NUM", "1"))


def network(x, y):
    hidden = fluid.layers.fc(
        input=x, size=32, act="tanh",
        param_attr=fluid.ParamAttr(name="h.w", regularizer=fluid.regularizer.L1Decay(1e-4)),
        bias_attr=fluid.ParamAttr(name="h.b"))
    hidden.error_clip = fluid.clip.ErrorClipByValue(max=0.5)
    out = fluid.layers.fc(input=hidden, size=1,
                          param_attr=fluid.ParamAttr(name="o.w", learning_rate=0.5),
                          bias_attr=fluid.ParamAttr(name="o.b"))
    return fluid.layers.mean(fluid.layers.square_error_cost(input=out, label=y))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save_dir", default="clip_rmsprop.model")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    prog, startup = fluid.Program(), fluid.Program()
    prog.random_seed = startup.random_seed = 5
    with fluid.program_guard(prog, startup):
        x = fluid.layers.data(name="x", shape=[10], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        avg_cost = network(x, y)
        fluid.clip.set_gradient_clip(
            clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=0.5),
            param_list=["h.w", "o.w"])
        optimizer = fluid.optimizer.RMSPropOptimizer(
            learning_rate=0.01, rho=0.9, epsilon=1e-6, momentum=0.1, centered=True,
            regularization=fluid.regularizer.L2DecayRegularizer(regularization_coeff=1e-3))
        optimizer.minimize(avg_cost)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    program = prog
    if TRAINERS > 1:
        program = fluid.CompiledProgram(prog).with_data_parallel(loss_name=avg_cost.name)
    rng = numpy.random.RandomState(0)
    w = rng.normal(size=(10, 1)).astype("float32")
    per = BATCH_SIZE // TRAINERS
    for step in range(args.steps):
        xs = rng.normal(size=(BATCH_SIZE, 10)).astype("float32")
        ys = (xs.dot(w) * 3).astype("float32")  # large targets: the clip is active
        mine = slice(TRAINER_ID * per, (TRAINER_ID + 1) * per)
        cost, = exe.run(program, feed={"x": xs[mine], "y": ys[mine]}, fetch_list=[avg_cost])
        if TRAINER_ID == 0:
            print("step %d cost %.6f" % (step, cost))
    if TRAINER_ID == 0:
        fluid.io.save_persistables(exe, args.save_dir, prog)
        restored = fluid.Scope()
        with fluid.scope_guard(restored):
            fluid.io.load_persistables(exe, args.save_dir, prog)
            same = numpy.array_equal(numpy.array(restored.find_var("h.w").get_tensor()),
                                     numpy.array(fluid.global_scope().find_var("h.w")
                                                 .get_tensor()))
        print("reloaded h.w equal: %s" % same)


if __name__ == "__main__":
    main()
