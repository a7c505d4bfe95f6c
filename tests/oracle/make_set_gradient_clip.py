"""Oracle: fluid 1.8's legacy set_gradient_clip path where it is subtle: need_clip is not read
there, and with a value clip on some parameters and a global-norm clip on others, the last
parameter's clip makes the ops for all, its norm summed over its group only. A 4-5-2 tanh MLP,
SGD 0.5, 4 steps.

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_set_gradient_clip.py
"""
import os
import sys

import numpy as np
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

NAMES = ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")


def data():
    rng = np.random.RandomState(7)
    init = {n: rng.uniform(-1, 1, s).astype("float32")
            for n, s in zip(NAMES, ((4, 5), (5,), (5, 2), (2,)))}
    batches = [(rng.uniform(-1, 1, (6, 4)).astype("float32"),
                rng.uniform(-1, 1, (6, 2)).astype("float32")) for _ in range(4)]
    return init, batches


def train(kind):
    init, batches = data()
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        def attr(n):
            return fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(
                init[n]))
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 2], "float32")
        h = L.fc(x, 5, act="tanh", param_attr=attr("fc_0.w_0"), bias_attr=attr("fc_0.b_0"))
        out = L.fc(h, 2, param_attr=attr("fc_1.w_0"), bias_attr=attr("fc_1.b_0"))
        loss = L.mean(L.square_error_cost(out, y))
        if kind == "mixed":
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(0.01),
                                         param_list=["fc_0.w_0", "fc_0.b_0"])
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(0.05),
                                         param_list=["fc_1.w_0", "fc_1.b_0"])
        else:
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(
                0.05, need_clip=lambda p: p.name.startswith("fc_1")))
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for xb, yb in batches:
            exe.run(main, feed={"x": xb, "y": yb})
        return {n: np.array(scope.find_var(n).get_tensor()) for n in NAMES}


if __name__ == "__main__":
    init, batches = data()
    save("set_gradient_clip", {"init": init, "batches": batches,
                               "mixed": train("mixed"), "need_clip": train("need_clip")})
