"""Reference outputs of fluid 1.8.5 for the fluid.optimizer names added late to spmd
(tests/unit/test_optimizer_extra.py): RecomputeOptimizer, DpsgdOptimizer, DGCMomentumOptimizer
and PipelineOptimizer.

- "recompute/<inner>": an MLP (fc 6->8 relu, fc 8->3 softmax, cross entropy) with fixed
  parameters trained 3 steps with RecomputeOptimizer(inner) and checkpoints [hidden, pred], and
  the same with the inner optimizer alone: the losses and the final parameters;
- "recompute/errors": what fluid says for minimize before _set_checkpoints and for load();
- "dpsgd/<seed>_<clip>_<batch>_<sigma>": a 3x2 matmul trained 3 steps with Dpsgd and a fixed
  seed (fluid's debugging knob `_seed`; with the default seed 0 the op seeds from the clock);
  the gradient and the parameter after each step;
- "dgc/cpu", "pipeline/cpu": what fluid does with them on this CPU-only build.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /tmp/pd18/bin/python /work/main/tests/oracle/make_optimizer_extra.py
"""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

STEPS = 3


def init(shape, offset):
    """Fixed parameter values: a smooth pattern, different per parameter."""
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * 0.7 + offset) * 0.5).astype("float32").reshape(shape)


def mlp_batches():
    rng = np.random.RandomState(3)
    return [(rng.uniform(-1, 1, (4, 6)).astype("float32"),
             rng.randint(0, 3, (4, 1)).astype("int64")) for _ in range(STEPS)]


def make_inner(name):
    if name == "adam":
        return fluid.optimizer.Adam(learning_rate=0.01)
    if name == "momentum":
        return fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9)
    return fluid.optimizer.SGD(learning_rate=0.1)


def train_mlp(inner_name, recompute):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 6], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="int64")
        attr = lambda shape, k: fluid.ParamAttr(  # noqa: E731
            initializer=fluid.initializer.NumpyArrayInitializer(init(shape, k)))
        hidden = fluid.layers.fc(x, 8, act="relu", param_attr=attr([6, 8], 0),
                                 bias_attr=attr([8], 1))
        pred = fluid.layers.fc(hidden, 3, act="softmax", param_attr=attr([8, 3], 2),
                               bias_attr=attr([3], 3))
        loss = fluid.layers.reduce_mean(fluid.layers.cross_entropy(pred, y))
        opt = make_inner(inner_name)
        if recompute:
            opt = fluid.optimizer.RecomputeOptimizer(opt)
            opt._set_checkpoints([hidden, pred])
        opt.minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for bx, by in mlp_batches():
        out, = exe.run(main, feed={"x": bx, "y": by}, fetch_list=[loss], scope=scope)
        losses.append(float(np.array(out).reshape(-1)[0]))
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.global_block().all_parameters()}
    return {"losses": losses, "params": params,
            "op_types": [op.type for op in main.global_block().ops]}


def recompute_errors():
    out = {}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 2], dtype="float32")
        loss = fluid.layers.reduce_mean(fluid.layers.fc(x, 1))
        opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1))
        try:
            opt.minimize(loss)
        except Exception as e:  # noqa: BLE001
            out["no_checkpoints"] = [type(e).__name__, str(e)]
        try:
            opt.load({})
        except Exception as e:  # noqa: BLE001
            out["load"] = [type(e).__name__, str(e)]
    return out


def dpsgd(seed, clip, batch_size, sigma, lr=0.1):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        w = fluid.layers.create_parameter(
            [3, 2], "float32", name="w",
            default_initializer=fluid.initializer.NumpyArrayInitializer(
                np.arange(6, dtype="float32").reshape(3, 2) / 10))
        loss = fluid.layers.reduce_mean(fluid.layers.matmul(x, w) ** 2)
        opt = fluid.optimizer.Dpsgd(learning_rate=lr, clip=clip, batch_size=batch_size,
                                    sigma=sigma)
        opt._seed = seed  # fluid's debugging knob: a fixed seed, the same noise every step
        opt.minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xs = np.array([[1.0, 2, 3], [-1, 0.5, 2]], "float32")
    grads, params = [], []
    for _ in range(STEPS):
        g, p = exe.run(main, feed={"x": xs}, fetch_list=["w@GRAD", "w"], scope=scope)
        grads.append(np.array(g))
        params.append(np.array(p))
    dp_op = main.global_block().ops[-1]
    return {"args": {"seed": seed, "clip": clip, "batch_size": batch_size, "sigma": sigma,
                     "learning_rate": lr, "x": xs},
            "grads": grads, "params": params, "op": dp_op.type,
            "attrs": {k: dp_op.attr(k) for k in ("clip", "batch_size", "sigma", "seed")}}


def dgc_cpu():
    try:
        fluid.optimizer.DGCMomentumOptimizer(learning_rate=0.1, momentum=0.9,
                                             rampup_begin_step=0)
    except Exception as e:  # noqa: BLE001
        return {"raises": [type(e).__name__, str(e)]}
    return {"raises": None}


def pipeline_cpu():
    try:
        fluid.optimizer.PipelineOptimizer(fluid.optimizer.SGD(0.1))
    except Exception as e:  # noqa: BLE001
        return {"raises": [type(e).__name__, str(e)]}
    return {"raises": None}


def main():
    cases = {}
    for inner in ("sgd", "momentum", "adam"):
        cases["recompute/" + inner] = {"recompute": train_mlp(inner, True),
                                       "plain": train_mlp(inner, False)}
    cases["recompute/errors"] = recompute_errors()
    for seed, clip, batch, sigma in [(5, 10.0, 16.0, 1.0), (5, 0.5, 2.0, 0.3),
                                     (123, 1.0, 1.0, 0.0), (7, 100.0, 4.0, 2.5),
                                     (2 ** 31 - 1, 3.0, 8.0, 1.0)]:
        cases[f"dpsgd/{seed}_{clip:g}_{batch:g}_{sigma:g}"] = dpsgd(seed, clip, batch, sigma)
    cases["dgc/cpu"] = dgc_cpu()
    cases["pipeline/cpu"] = pipeline_cpu()
    cases["all_names"] = sorted(fluid.optimizer.__all__)
    save("optimizer_extra", cases, meta={"paddle": paddle.__version__,
                                         "script": "tests/oracle/make_optimizer_extra.py"})


if __name__ == "__main__":
    main()
