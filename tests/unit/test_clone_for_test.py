"""A test clone taken after minimize, run between training steps, leaves training as it was:
clone(for_test=True) drops the learning-rate schedule (and its step counter), EMA's decay and
updates and ModelAverage's accumulation, as fluid does. Expected values from
tests/oracle/make_test_clone.py (fluid 1.8.5)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("clone_for_test")
L = fluid.layers


@pytest.mark.parametrize("kind", ["schedule", "ema", "model_average"])
def test_running_the_test_clone_changes_no_training_state(kind):
    want = ORACLE[kind]
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
    assert [op.type for op in test.global_block().ops] == want["test_ops"]
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    xb = np.arange(8, dtype="float32").reshape(2, 4) / 8
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(3):
            exe.run(main, feed={"x": xb})
            for _ in range(2):
                exe.run(test, feed={"x": xb})
        np.testing.assert_allclose(np.array(scope.get("w")), want["w"], rtol=1e-6)
        if kind == "ema":
            with extra.apply(exe):
                np.testing.assert_allclose(np.array(scope.get("w")), want["applied"], rtol=1e-6)
        if kind == "model_average":
            for v in main.list_vars():
                for key in ("old_num_accumulates", "num_accumulates", "num_updates"):
                    if "_" + key in v.name and not ("_old_" in v.name and key[:3] != "old"):
                        np.testing.assert_array_equal(np.array(scope.get(v.name)), want[key])
