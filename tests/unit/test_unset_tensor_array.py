"""A tensor array declared in the program but read before any op writes it (array_write
into an array declared outside a While loop, as a DynamicRNN step does) starts every run
empty, as fluid 1.8's executor creates the program's variables before the first op."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import FeedError
from spmd.fluid import core


def _program(steps=3):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[2], dtype="float32", append_batch_size=False)
        array = main.global_block().create_var(
            name="written_in_the_loop", type=core.VarDesc.VarType.LOD_TENSOR_ARRAY,
            dtype="float32")
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", steps)
        cond = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(cond)
        with loop.block():
            step = fluid.layers.scale(x, scale=1.0) * fluid.layers.cast(i, "float32")
            fluid.layers.array_write(step, i, array=array)
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
        length = fluid.layers.array_length(array)
        last = fluid.layers.array_read(array, fluid.layers.fill_constant([1], "int64", steps - 1))
    return main, length, last


def test_an_array_written_in_a_loop_starts_each_run_empty():
    main, length, last = _program(steps=3)
    exe = fluid.Executor(fluid.CPUPlace())
    x = np.array([1.0, -2.0], "float32")
    for _ in range(2):  # a second run does not see the first run's elements
        got_length, got_last = exe.run(main, feed={"x": x}, fetch_list=[length, last],
                                       scope=fluid.Scope())
        assert int(np.asarray(got_length).reshape(-1)[0]) == 3
        np.testing.assert_array_equal(np.asarray(got_last), 2 * x)
    scope = fluid.Scope()
    for _ in range(2):  # also in one scope: the array is not persistable, nothing kept
        (got_length,) = exe.run(main, feed={"x": x}, fetch_list=[length], scope=scope)
        assert int(np.asarray(got_length).reshape(-1)[0]) == 3


def test_an_unset_tensor_is_still_an_error_naming_it():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = main.global_block().create_var(name="never_set", shape=[2], dtype="float32")
        out = fluid.layers.scale(v, scale=2.0)
    with pytest.raises(FeedError, match="'never_set' is read before any op writes it"):
        fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out], scope=fluid.Scope())
