"""Reference outputs of PaddlePaddle 1.8.5 for the loader, LoDTensor and feed behaviours that
Paddle 1.8's own unit tests use: the places' `_type()` codes, LoDTensor `_dtype()` and
`_place()`, sequence lengths given as ranges, the loaders' `_check_input_array`, and what a
fluid.layers.data variable computes when fed another dtype than its own.

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle/venv37/bin/python /work/main/tests/oracle/make_loader_feed.py
"""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402


def place_cases():
    cpu = fluid.CPUPlace()
    p = fluid.core.Place()
    p.set_place(cpu)
    t = fluid.LoDTensor()
    t.set(np.ones((2, 3), "float32"), cpu)
    return {
        "cpu_type": cpu._type(),
        "set_place_type": p._type(),
        "set_place_is_cpu": p.is_cpu_place(),
        "tensor_place_equals_cpu": t._place()._equals(cpu),
    }


def dtype_cases():
    out = {}
    for name in ["float32", "float64", "int32", "int64", "bool", "uint8"]:
        t = fluid.LoDTensor()
        t.set(np.zeros((1,), name), fluid.CPUPlace())
        out[name] = str(t._dtype())
    return out


def range_lengths():
    t = fluid.LoDTensor()
    t.set(np.arange(6, dtype="float32").reshape(6, 1), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([range(1, 4)])
    return {"lengths": t.recursive_sequence_lengths(), "lod": t.lod()}


def check_input_array():
    good = fluid.reader.GeneratorLoader._check_input_array([[1, 2], [3, 4]])
    try:
        fluid.reader.GeneratorLoader._check_input_array([[1, 2], [3]])
        ragged = "accepted"
    except TypeError:
        ragged = "TypeError"
    return {"good": good, "ragged": ragged}


def fed_other_dtype():
    """layers.data float32 fed float64 and int32 rows: fluid checks no dtype there."""
    out = {}
    for fed in ["float64", "int32"]:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.layers.data(name="x", shape=[3])
            y = fluid.layers.scale(x, scale=0.5, bias=1.0)
            s = fluid.layers.reduce_sum(y)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        value = (np.arange(6).reshape(2, 3) + 0.25).astype(fed)
        got_y, got_s = exe.run(main, feed={"x": value}, fetch_list=[y, s])
        out[fed] = {"fed": value, "y": got_y, "sum": got_s}
    return out


if __name__ == "__main__":
    save("loader_feed", {
        "meta": {"fluid": paddle.__version__},
        "places": place_cases(),
        "dtypes": dtype_cases(),
        "range_lengths": range_lengths(),
        "check_input_array": check_input_array(),
        "fed_other_dtype": fed_other_dtype(),
    })
