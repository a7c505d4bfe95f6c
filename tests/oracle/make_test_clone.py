"""Oracle: a test clone taken after minimize, run between training steps, must not move the
learning-rate schedule, EMA or ModelAverage (fluid's clone(for_test=True) drops their ops).
Three training steps, each followed by two runs of the test clone; the parameter after, the
EMA-applied parameter, ModelAverage's counters.

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_test_clone.py
"""
import os
import sys

import numpy as np
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

KINDS = ("schedule", "ema", "model_average")


def run(kind):
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    w0 = np.linspace(-1, 1, 4).reshape(4, 1).astype("float32")
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        loss = L.mean(L.square(L.fc(x, 1, bias_attr=False, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(w0)))))
        lr = L.exponential_decay(0.1, 1, 0.5) if kind == "schedule" else 0.1
        fluid.optimizer.SGD(lr).minimize(loss)
        extra = None
        if kind == "ema":
            extra = fluid.optimizer.ExponentialMovingAverage(0.5)
            extra.update()
        if kind == "model_average":
            extra = fluid.optimizer.ModelAverage(1.0, min_average_window=1,
                                                 max_average_window=100)
        test = main.clone(for_test=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    xb = np.arange(8, dtype="float32").reshape(2, 4) / 8
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(3):
            exe.run(main, feed={"x": xb})
            for _ in range(2):
                exe.run(test, feed={"x": xb})
        out = {"w": np.array(scope.find_var("w").get_tensor()),
               "test_ops": [op.type for op in test.global_block().ops]}
        if kind == "ema":
            with extra.apply(exe):
                out["applied"] = np.array(scope.find_var("w").get_tensor())
        if kind == "model_average":
            for v in main.list_vars():
                for key in ("old_num_accumulates", "num_accumulates", "num_updates"):
                    if "_" + key in v.name and not ("_old_" in v.name and key[:3] != "old"):
                        out[key] = np.array(scope.find_var(v.name).get_tensor())
    return out


if __name__ == "__main__":
    save("clone_for_test", {kind: run(kind) for kind in KINDS})
