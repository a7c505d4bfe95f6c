"""DynamicRNN's compile-time lod_levels as fluid 1.8.5's (tests/oracle/make_dynamic_rnn_levels.py):
lod_tensor_to_array's array has x's lod_level - 1 (fluid's InferShape), so a step input of a
1-level sequence has none and drnn() has the input's; and at run time drnn() carries the
input's LoD."""
import os
import sys

import numpy as np

import spmd.fluid as fluid
from tests.oracle_io import load

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "oracle"))
from dynamic_rnn_levels_net import levels, nested_levels  # noqa: E402

CASES = load("dynamic_rnn_levels")


def test_one_and_two_level_inputs_get_fluids_levels():
    assert levels(fluid, 1) == CASES["lod1"]
    assert levels(fluid, 2) == CASES["lod2"]


def test_a_nested_dynamic_rnn_gets_fluids_levels():
    assert nested_levels(fluid) == CASES["nested"]


def test_the_result_carries_the_inputs_lod_at_run_time():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float32", lod_level=1)
        drnn = fluid.layers.DynamicRNN()
        with drnn.block():
            step = drnn.step_input(x)
            mem = drnn.memory(shape=[3], dtype="float32")
            out = fluid.layers.elementwise_add(step, mem)  # a running sum per sequence
            drnn.update_memory(mem, out)
            drnn.output(out)
        result = drnn()
    assert result.lod_level == x.lod_level == 1
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(startup)
    xv = np.arange(18, dtype="float32").reshape(6, 3)
    lens = [[2, 3, 1]]
    got, = exe.run(main, feed={"x": fluid.create_lod_tensor(xv, lens, place)},
                   fetch_list=[result], return_numpy=False)
    want = np.concatenate([np.cumsum(xv[0:2], 0), np.cumsum(xv[2:5], 0), xv[5:6]])
    np.testing.assert_array_equal(np.array(got), want)
    assert got.recursive_sequence_lengths() == lens
