"""Store fluid 1.8.5's fluid.contrib.layers fused_elemwise_activation (each functor order),
partial_concat and partial_sum outputs, for tests/unit/test_fluid_contrib_nn.py. Run with
PaddlePaddle 1.8.5 outside the checkout."""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid
from paddle.fluid.contrib.layers import fused_elemwise_activation, partial_concat, partial_sum

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

rng = np.random.RandomState(11)
FEED = {"x": rng.uniform(-2, 2, (4, 5)).astype("float32"),
        "y": rng.uniform(-2, 2, (4, 5)).astype("float32"),
        "b": rng.uniform(-2, 2, (5,)).astype("float32")}
FUSED = [(["elementwise_add", "relu"], 0.0), (["relu", "elementwise_add"], 0.0),
         (["elementwise_mul", "scale"], 2.5), (["scale", "elementwise_add"], 0.5)]
# (fluid's kernel implements these pairings; spmd composes any binary with any unary)
PARTIAL = [(0, -1), (1, 2), (3, 1)]


def build(fused, pconcat, psum):
    x = fluid.data("x", [None, 5], "float32")
    y = fluid.data("y", [None, 5], "float32")
    outs = {}
    for functors, scale in FUSED:
        outs["fused_" + "_".join(functors)] = fused(x, y, functors, scale=scale)
    for start, length in PARTIAL:
        outs[f"concat_{start}_{length}"] = pconcat([x, y], start, length)
        outs[f"sum_{start}_{length}"] = psum([x, y], start, length)
    return outs


if __name__ == "__main__":
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build(fused_elemwise_activation, partial_concat, partial_sum)
    exe = fluid.Executor(fluid.CPUPlace())
    names = sorted(outs)
    got = exe.run(main, feed={k: FEED[k] for k in ("x", "y")},
                  fetch_list=[outs[n] for n in names])
    save("contrib_nn", dict(zip(names, got)), meta={"paddle": paddle.__version__})
