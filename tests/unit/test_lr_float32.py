"""fluid.layers decay schedules give fluid 1.8.5's float32 values bit for bit
(tests/oracle/make_lr_float32.py, Paddle's test_learning_rate_scheduler.py configuration).

Paddle's test compares them with a Python float within 7 places: under numpy >= 2 (NEP 50)
`python_float - np.float32` is a float32 difference, so exponential_decay's step 3
(0.6597539553864471 against float32 0.6597539, 3.7e-8 apart) comes out as one float32 ulp,
5.96e-8 > 5e-8, while numpy 1.x subtracts in float64. The values themselves are fluid's
(natural_exp_decay's within one ulp: its `exp` op is numpy's float32 exp, fluid's rounds the
exact value)."""
import numpy as np
import pytest

import spmd.fluid as fluid
from tests.oracle_io import load

CASES = load("lr_float32")


@pytest.mark.parametrize("name", sorted(CASES))
def test_decay_values_are_fluids_float32_bits(name):
    schedule, staircase = name.split("/")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = getattr(fluid.layers, schedule)(learning_rate=1.0, decay_steps=5, decay_rate=0.5,
                                             staircase=staircase == "True")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    got = np.concatenate([exe.run(main, fetch_list=[lr], scope=scope)[0] for _ in range(10)])
    assert got.dtype == np.float32
    if schedule == "natural_exp_decay":
        np.testing.assert_array_max_ulp(got, CASES[name], maxulp=1)
    else:
        np.testing.assert_array_equal(got, CASES[name])
