"""Store what fluid (PaddlePaddle 1.8.5) gives for `x[...]` on a Variable: each case's static
shape, its value and the gradient of sum(out * w) with respect to x (w fixed per case). Run
with the oracle's Python; tests/unit/test_variable_getitem.py builds the same cases in spmd."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from oracle_io import save  # noqa: E402

X = (np.arange(3 * 4 * 6, dtype="float32").reshape(3, 4, 6) / 7.0 - 5.0)

# name -> the index, as numpy reads it; INDEX stands for an int32 Variable holding 2
INDEX = "index"
CASES = {
    "rows_cols_step": (slice(None), slice(1, 3), slice(0, 6, 2)),
    "first": 0,
    "last_then_int": (slice(None), -1, 2),
    "reverse": slice(None, None, -1),
    "all_colons": (slice(None), slice(None, 3), slice(None)),
    "mixed_negative": (slice(1, None), 2, slice(-3, -1)),
    "variable_index": (slice(None), INDEX),
    "every_axis": (1, 2, 3),
    "negative_step": (slice(None), slice(3, 0, -2)),
    "out_of_range": (slice(None), slice(1, 100)),
}


def numpy_index(name):
    item = CASES[name]
    items = item if isinstance(item, tuple) else (item,)
    return tuple(2 if v == INDEX else v for v in items)


def weight_for(name):
    """The fixed w of sum(out * w): as many values as the case's numpy result."""
    shape = X[numpy_index(name)].shape or (1,)
    return np.linspace(-1, 1, int(np.prod(shape)), dtype="float32").reshape(shape)


def build(fluid, name):
    """(main, startup, out, gradient of sum(out * w) w.r.t. x, out's static shape)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4, 6], "float32")
        x.stop_gradient = False
        index = fluid.layers.fill_constant([1], "int32", 2)  # fluid adds an int32 1 to it
        item = CASES[name]
        items = item if isinstance(item, tuple) else (item,)
        out = x[tuple(index if v == INDEX else v for v in items)]
        loss = fluid.layers.reduce_sum(out * fluid.layers.assign(weight_for(name)))
        grad, = fluid.backward.gradients([loss], [x])
    return main, startup, out, grad, list(out.shape)


def run(fluid, name):
    main, startup, out, grad, shape = build(fluid, name)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    value, dx = exe.run(main, feed={"x": X}, fetch_list=[out, grad])
    return {"shape": shape, "value": np.array(value), "grad": np.array(dx)}


if __name__ == "__main__":
    import paddle
    import paddle.fluid

    save("getitem", {name: run(paddle.fluid, name) for name in CASES},
         meta={"paddle": paddle.__version__})
