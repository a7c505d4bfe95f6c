"""Oracle: fluid 1.8 initializes a float16 parameter through a float32 stand-in
("<prefix>.<param>.tmp_0") and an appended cast: the startup program's ops and variables for
each initializer, and the values of the deterministic ones after the startup program runs.

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_initializer_fp16.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

ARRAY = (np.arange(12, dtype="float32").reshape(2, 1, 2, 3) - 5.5) / 3


def initializers(fluid):
    """name -> (initializer, parameter shape); the builders take the fluid they build with."""
    init = fluid.initializer
    return {
        "constant": (init.Constant(0.3), [2, 3]),
        "uniform": (init.Uniform(-0.5, 0.5, seed=7), [2, 3]),
        "normal": (init.Normal(0.0, 1.0, seed=7), [2, 3]),
        "truncated_normal": (init.TruncatedNormal(0.0, 1.0, seed=7), [2, 3]),
        "xavier": (init.Xavier(seed=7), [2, 3]),
        "msra": (init.MSRA(seed=7), [2, 3]),
        "bilinear": (init.Bilinear(), [2, 1, 3, 3]),
        "numpy_array": (init.NumpyArrayInitializer(ARRAY), list(ARRAY.shape)),
    }


def startup_of(fluid, name):
    initializer, shape = initializers(fluid)[name]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        fluid.layers.create_parameter(shape, "float16", name="p",
                                      default_initializer=initializer)
    return startup


def main():
    import paddle
    import paddle.fluid as fluid

    cases = {}
    for name in initializers(fluid):
        startup = startup_of(fluid, name)
        block = startup.global_block()
        case = {"ops": [op.type for op in block.ops],
                "cast": [[op.input("X")[0], op.output("Out")[0]] for op in block.ops
                         if op.type == "cast"],
                "stand_in_dtype": [str(block.var(op.input("X")[0]).dtype) for op in block.ops
                                   if op.type == "cast"]}
        if name in ("constant", "bilinear", "numpy_array"):
            scope = fluid.Scope()
            with fluid.scope_guard(scope):
                fluid.Executor(fluid.CPUPlace()).run(startup)
                case["value"] = np.array(scope.find_var("p").get_tensor())
        cases[name] = case
    save("initializer_fp16", cases, meta={"fluid": paddle.__version__})


if __name__ == "__main__":
    main()
