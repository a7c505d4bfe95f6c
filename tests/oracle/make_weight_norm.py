"""Store what fluid (PaddlePaddle 1.8.5) computes for an fc with WeightNormParamAttr along
each dim: the output and g, v before and after one SGD step. Run with the oracle's Python;
tests/unit/test_weight_norm.py builds the same program (build() below) in spmd."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from oracle_io import save  # noqa: E402

DIMS = {"none": None, "0": 0, "1": 1}
X = np.array([[1, 2, 3], [0.5, -1, 2]], dtype="float32")
V0 = np.arange(12, dtype="float32").reshape(3, 4) / 10 - 0.5


def build(fluid, dim):
    """(main, startup, output) of fc(x, 4) weight-normalized along `dim`, trained by SGD."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3], dtype="float32")
        attr = fluid.WeightNormParamAttr(
            dim=dim, name="w", initializer=fluid.initializer.NumpyArrayInitializer(V0))
        y = fluid.layers.fc(x, 4, param_attr=attr, bias_attr=False)
        loss = fluid.layers.reduce_sum(fluid.layers.square(y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, y


def run(fluid, dim):
    main, startup, y = build(fluid, dim)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        first = exe.run(main, feed={"x": X}, fetch_list=[y, "w_g", "w_v"])
        second = exe.run(main, feed={"x": X}, fetch_list=[y, "w_g", "w_v"])
    return [np.array(a) for a in first + second]


if __name__ == "__main__":
    import paddle
    import paddle.fluid

    save("weight_norm", {k: run(paddle.fluid, d) for k, d in DIMS.items()},
         meta={"paddle": paddle.__version__})
