"""exponential_decay and its kin compute the rate in the main program (no startup op, as fluid
1.8.5): a checkpoint saved right after the startup program holds no rate, as fluid's (the
rate is a temporary there), and loads back; after a run the rate is saved and loaded."""
from __future__ import annotations

import os

import numpy as np
import pytest

import spmd.fluid as fluid


def build(kind):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        lr = getattr(fluid.layers, kind)(0.1, 10, 0.5)
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, loss, lr


@pytest.mark.parametrize("kind", ["exponential_decay", "natural_exp_decay",
                                  "inverse_time_decay"])
def test_a_save_before_the_first_run_has_fluids_files_and_loads(tmp_path, kind):
    main, startup, loss, lr = build(kind)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.save_persistables(exe, str(tmp_path / "before"), main)
        # fluid 1.8.5 saves the counter and the parameters, no rate
        saved = sorted(f for f in os.listdir(tmp_path / "before") if f.endswith(".npy"))
        assert saved == ["@LR_DECAY_COUNTER@.npy", "fc_0.b_0.npy", "fc_0.w_0.npy"]
        w = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.load_persistables(exe, str(tmp_path / "before"), main)
        np.testing.assert_array_equal(
            np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor()), w)
        rate = exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[lr])[0]
        assert rate.reshape(-1)[0] == pytest.approx(0.1)  # step 0 of the schedule
        fluid.io.save_persistables(exe, str(tmp_path / "after"), main)
    assert os.path.exists(tmp_path / "after" / f"{lr.name}.npy")


def test_a_parameter_without_a_value_is_still_an_error(tmp_path):
    main, startup, loss, lr = build("exponential_decay")
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()), pytest.raises(Exception, match="fc_0"):
        fluid.io.save_persistables(exe, str(tmp_path), main)  # the startup never ran
