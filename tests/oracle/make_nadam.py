"""Reference outputs of PaddlePaddle 3.3.1 (static mode, legacy IR) for paddle.optimizer.NAdam
(fluid 1.8.5 has no NAdam), read by tests/unit/test_nadam.py:

- "train/<case>": an MLP (fc 4->5 tanh, fc 5->2, mean square error) with fixed parameters
  trained 3 steps with NAdam; after each step every parameter and every accumulator
  (`<param>_<acc>_0`), and the losses; the op's slot and attribute names;
- "op/<case>": one nadam op run on fixed inputs (state as after a few steps), all outputs.

Run with the oracle's Python from outside the checkout:
    python3 -m venv /tmp/pd33 && /tmp/pd33/bin/pip install paddlepaddle==3.3.1
    cd /tmp && /tmp/pd33/bin/python /work/main/tests/oracle/make_nadam.py
"""
import os
import sys

os.environ["FLAGS_enable_pir_api"] = "0"  # the legacy static IR: Program, Block, append_op

import numpy as np  # noqa: E402
import paddle  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

STEPS = 3
PARAMS = ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")
ACCS = ("momentum_decay_pow", "beta2_pow", "mu_product", "moment1", "moment2")

# constructor arguments of each training case; "grad_clip" is a per-parameter norm bound
# (ClipGradByNorm: 3.3.1's ClipGradByGlobalNorm fails in the legacy IR, "sqrt(): argument must
# be Value")
CASES = {
    "defaults": {},
    "hyper": {"learning_rate": 0.05, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6,
              "momentum_decay": 0.01},
    "decay_clip": {"learning_rate": 0.02, "weight_decay": 0.01, "grad_clip": 0.5},
}


def net_data():
    rng = np.random.RandomState(5)

    def rand(*shape):
        return rng.uniform(-1.0, 1.0, size=shape).astype("float32")

    init = {"fc_0.w_0": rand(4, 5), "fc_0.b_0": rand(5), "fc_1.w_0": rand(5, 2),
            "fc_1.b_0": rand(2)}
    return init, [(rand(6, 4), rand(6, 2)) for _ in range(STEPS)]


def make_opt(args):
    args = dict(args)
    if "grad_clip" in args:
        args["grad_clip"] = paddle.nn.ClipGradByNorm(args["grad_clip"])
    return paddle.optimizer.NAdam(**args)


def train(args):
    init, batches = net_data()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [None, 4], "float32")
        y = paddle.static.data("y", [None, 2], "float32")

        def attr(name):
            return paddle.ParamAttr(name=name,
                                    initializer=paddle.nn.initializer.Assign(init[name]))

        h = paddle.static.nn.fc(x, 5, activation="tanh", weight_attr=attr("fc_0.w_0"),
                                bias_attr=attr("fc_0.b_0"))
        out = paddle.static.nn.fc(h, 2, weight_attr=attr("fc_1.w_0"),
                                  bias_attr=attr("fc_1.b_0"))
        loss = paddle.mean(paddle.nn.functional.square_error_cost(out, y))
        make_opt(args).minimize(loss)
    op = [o for o in main.global_block().ops if o.type == "nadam"][0]
    names = list(PARAMS) + [f"{p}_{a}_0" for p in PARAMS for a in ACCS]
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    exe.run(startup, scope=scope)
    steps, losses = [], []
    for bx, by in batches:
        got = exe.run(main, feed={"x": bx, "y": by}, fetch_list=[loss] + names, scope=scope)
        losses.append(float(np.array(got[0]).reshape(-1)[0]))
        steps.append({n: np.array(v) for n, v in zip(names, got[1:])})
    return {"args": args, "init": init, "batches": [list(b) for b in batches],
            "losses": losses, "steps": steps,
            "slots": {"inputs": sorted(op.input_names), "outputs": sorted(op.output_names)},
            "attrs": {k: op.attr(k) for k in ("beta1", "beta2", "epsilon", "momentum_decay",
                                              "multi_precision")}}


def op_case(attrs, shape, step):
    """The nadam op alone, its state as after `step` steps of constant-ish gradients."""
    rng = np.random.RandomState(11)
    beta1, beta2, psi = attrs["beta1"], attrs["beta2"], attrs["momentum_decay"]
    mu = [beta1 * (1 - 0.5 * 0.96 ** (t * psi)) for t in range(1, step + 1)]
    full = np.ones(shape, "float32")
    ins = {"param": rng.uniform(-1, 1, shape).astype("float32"),
           "grad": rng.uniform(-1, 1, shape).astype("float32"),
           "learning_rate": np.array([0.01], "float32"),
           "momentum_decay_pow": full * np.float32(0.96 ** step),
           "beta2_pow": full * np.float32(beta2 ** step),
           "mu_product": full * np.float32(np.prod(mu)),
           "moment1": rng.uniform(-0.5, 0.5, shape).astype("float32"),
           "moment2": rng.uniform(0.0, 0.5, shape).astype("float32")}
    outs = ["param_out", "momentum_decay_pow_out", "beta2_pow_out", "mu_product_out",
            "moment1_out", "moment2_out"]
    main = paddle.static.Program()
    with paddle.static.program_guard(main, paddle.static.Program()):
        block = main.global_block()
        in_vars = {k: block.create_var(name=k, shape=v.shape, dtype="float32")
                   for k, v in ins.items()}
        out_vars = {k: block.create_var(name=k, dtype="float32") for k in outs}
        block.append_op(type="nadam", inputs={k: [v] for k, v in in_vars.items()},
                        outputs={k: [v] for k, v in out_vars.items()}, attrs=dict(attrs))
    exe = paddle.static.Executor(paddle.CPUPlace())
    got = exe.run(main, feed=ins, fetch_list=outs, scope=paddle.static.Scope())
    return {"attrs": attrs, "inputs": ins, "outputs": {k: np.array(v) for k, v in
                                                       zip(outs, got)}}


def main():
    paddle.enable_static()
    cases = {f"train/{name}": train(args) for name, args in CASES.items()}
    base = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "momentum_decay": 0.004}
    cases["op/defaults_step4"] = op_case(base, (3, 4), 4)
    cases["op/hyper_step1"] = op_case(
        {"beta1": 0.7, "beta2": 0.95, "epsilon": 1e-3, "momentum_decay": 0.05}, (7,), 1)
    save("nadam", cases, meta={"paddle": paddle.__version__, "ir": "legacy",
                               "script": "tests/oracle/make_nadam.py"})


if __name__ == "__main__":
    main()
