"""Where fluid 1.8.5 rounds: schedules at staircase and cycle boundaries for decay_steps whose
float32 quotient floors or ceils differently from the exact one (7, 41, 47), and
ErrorClipByValue on a variable two ops use (fluid clips the summed gradient only). Expected
values from tests/oracle/make_lr_boundaries.py."""
from __future__ import annotations

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("lr_boundaries")
L = fluid.layers
SCHEDULES = {
    "exponential_staircase_41": lambda: L.exponential_decay(0.1, 41, 0.5, staircase=True),
    "inverse_time_staircase_41": lambda: L.inverse_time_decay(0.1, 41, 0.5, staircase=True),
    "natural_exp_staircase_47": lambda: L.natural_exp_decay(0.1, 47, 0.5, staircase=True),
    "cosine_41": lambda: L.cosine_decay(0.1, 41, 10),
    "polynomial_cycle_7": lambda: L.polynomial_decay(0.1, 7, 0.001, power=1.0, cycle=True),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_matches_fluid_across_boundaries(name):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        lr = SCHEDULES[name]()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    got = np.array([exe.run(main, fetch_list=[lr], scope=scope)[0].reshape(-1)[0]
                    for _ in range(ORACLE["steps"])], dtype="float32")
    np.testing.assert_allclose(got, ORACLE["schedules"][name], rtol=2e-6)


def test_error_clip_on_a_variable_used_twice_clips_the_summed_gradient_only():
    case = ORACLE["error_clip_twice"]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 3], "float32")
        h = L.fc(x, 5, param_attr=fluid.ParamAttr(
            name="w0", initializer=fluid.initializer.NumpyArrayInitializer(case["w0_init"])),
            bias_attr=False)
        h.error_clip = fluid.clip.ErrorClipByValue(0.001)
        both = L.elementwise_add(h, L.elementwise_mul(h, h))
        out = L.fc(both, 1, param_attr=fluid.ParamAttr(
            name="w1", initializer=fluid.initializer.NumpyArrayInitializer(case["w1_init"])),
            bias_attr=False)
        fluid.optimizer.SGD(0.5).minimize(L.mean(out))
    clips = [op for op in main.global_block().ops if op.type == "clip"]
    assert len(clips) == 1, [op.output_arg_names for op in clips]
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(6):
        exe.run(main, feed={"x": case["x"]}, scope=scope)
    for name in ("w0", "w1"):
        np.testing.assert_allclose(np.array(scope.get(name)), case[name], rtol=1e-5, atol=1e-7)
