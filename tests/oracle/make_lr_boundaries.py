"""Oracle: fluid 1.8.5's learning-rate schedules across staircase and cycle boundaries, for
decay_steps where float32 `step * (1/n)` and exact `step / n` floor or ceil differently (7, 41),
and an ErrorClipByValue on a variable used twice (fluid clips only the summed gradient).

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/spmd/tests/oracle/make_lr_boundaries.py
"""
import os
import sys

import numpy as np
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

L = fluid.layers
SCHEDULES = {
    "exponential_staircase_41": lambda: L.exponential_decay(0.1, 41, 0.5, staircase=True),
    "inverse_time_staircase_41": lambda: L.inverse_time_decay(0.1, 41, 0.5, staircase=True),
    "natural_exp_staircase_47": lambda: L.natural_exp_decay(0.1, 47, 0.5, staircase=True),
    "cosine_41": lambda: L.cosine_decay(0.1, 41, 10),
    "polynomial_cycle_7": lambda: L.polynomial_decay(0.1, 7, 0.001, power=1.0, cycle=True),
}
STEPS = 100


def schedules():
    out = {}
    for name, make in SCHEDULES.items():
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            lr = make()
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        with fluid.scope_guard(scope):
            exe.run(startup)
            out[name] = np.array([np.array(exe.run(main, fetch_list=[lr])[0]).reshape(-1)[0]
                                  for _ in range(STEPS)], dtype="float32")
    return out


def error_clip_twice():
    """x -> fc (h) -> h used by two ops; ErrorClipByValue(0.001) on h; SGD 0.5, 6 steps."""
    rng = np.random.RandomState(3)
    x_value = rng.randn(4, 3).astype("float32")
    w0 = (rng.randn(3, 5) * 0.5).astype("float32")
    w1 = (rng.randn(5, 1) * 0.5).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 3], "float32")
        h = L.fc(x, 5, param_attr=fluid.ParamAttr(
            name="w0", initializer=fluid.initializer.NumpyArrayInitializer(w0)), bias_attr=False)
        h.error_clip = fluid.clip.ErrorClipByValue(0.001)
        both = L.elementwise_add(h, L.elementwise_mul(h, h))
        out = L.fc(both, 1, param_attr=fluid.ParamAttr(
            name="w1", initializer=fluid.initializer.NumpyArrayInitializer(w1)), bias_attr=False)
        loss = L.mean(out)
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(6):
            exe.run(main, feed={"x": x_value})
        return {"x": x_value, "w0_init": w0, "w1_init": w1,
                "w0": np.array(scope.find_var("w0").get_tensor()),
                "w1": np.array(scope.find_var("w1").get_tensor())}


if __name__ == "__main__":
    save("lr_boundaries", {"steps": STEPS, "schedules": schedules(),
                           "error_clip_twice": error_clip_twice()})
