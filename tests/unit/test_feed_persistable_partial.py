"""A persistable data variable fed to a data-parallel program, as fluid 1.8.5 (Paddle's
test_parallel_executor_inference_feed_partial_data): it needs no value from the startup
program (the first run's broadcast skips a persistable the scope has no value for, as fluid's
BCastParamsToDevices), one row goes whole to every place, more rows are split as the other
feeds. The fetched values are fluid 1.8.5's for the same feeds."""
import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.executor.feed import split_feed


def _program(persistable: bool):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        lr = fluid.data(name="lr", shape=[1] if persistable else [None], dtype="float32")
        lr.persistable = persistable
        relu_x, relu_lr = fluid.layers.relu(x), fluid.layers.relu(lr)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    compiled = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(4))
    return exe, compiled, relu_x, relu_lr


# (rows of x, lr fed) -> relu(lr) per place, as fluid 1.8.5 fetches it with return_merged=False
FLUID_185 = [(1, [-1.0], [[0.0]]), (2, [-1.0, 0.0], [[0.0], [0.0]]),
             (4, [-1.0, 0.0, 1.0, 2.0], [[0.0], [0.0], [1.0], [2.0]])]


@pytest.mark.parametrize("rows, lr, expected", FLUID_185)
def test_a_persistable_feed_of_k_rows_over_k_places_is_split(rows, lr, expected):
    exe, compiled, relu_x, relu_lr = _program(persistable=True)
    xs, lrs = exe.run(compiled, feed={"x": np.ones((rows, 3), "float32"),
                                      "lr": np.array(lr, "float32")},
                      fetch_list=[relu_x, relu_lr], return_merged=False)
    assert [v.tolist() for v in lrs] == expected
    assert sum(v.shape[0] for v in xs) == rows


def test_a_persistable_feed_of_one_row_goes_to_every_place():
    exe, compiled, relu_x, relu_lr = _program(persistable=True)
    lrs, = exe.run(compiled, feed={"x": np.ones((9, 3), "float32"),
                                   "lr": np.array([0.5], "float32")},
                   fetch_list=[relu_lr], return_merged=False)
    # every place gets it whole (fluid 1.8.5 deals 9 rows to 3 of the 4 places, spmd to all 4)
    assert len(lrs) == 4 and all(v.tolist() == [0.5] for v in lrs)
    merged, = exe.run(compiled, feed={"x": np.ones((9, 3), "float32"),
                                      "lr": np.array([-2.0], "float32")}, fetch_list=[relu_lr])
    assert merged.tolist() == [0.0] * 4


def test_split_feed_replicates_one_row_and_splits_more():
    shards = split_feed({"lr": np.arange(4.0), "x": np.zeros((4, 2))}, 2, replicated={"lr"})
    assert [s["lr"].tolist() for s in shards] == [[0.0, 1.0], [2.0, 3.0]]
    shards = split_feed({"lr": np.ones(1), "x": np.zeros((4, 2))}, 2, replicated={"lr"})
    assert [s["lr"].tolist() for s in shards] == [[1.0], [1.0]]


def test_layers_data_is_fed_without_a_shape_check_as_fluid():
    """fluid 1.8.5: a fluid.layers.data variable (need_check_feed False) takes a feed of any
    shape (Paddle's test_memory_reuse_exclude_feed_var feeds [28, 28] to [-1, 28, 28]);
    fluid.data's is checked, in a data-parallel clone too."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.data(name="a", shape=[3], dtype="float32")
        b = fluid.data(name="b", shape=[None, 3], dtype="float32")
        out_a, out_b = fluid.layers.relu(a), fluid.layers.relu(b)
    assert not a.need_check_feed and b.need_check_feed
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    ok = np.ones((2, 3), "float32")
    for value in (np.full((2, 4), -1.0, "float32"), np.arange(5, dtype="float32")):
        got, = exe.run(main, feed={"a": value, "b": ok}, fetch_list=[out_a])
        np.testing.assert_array_equal(got, np.maximum(value, 0))  # fluid: the same
    compiled = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(2))
    for program in (main, compiled):
        with pytest.raises(fluid.core.EnforceNotMet, match=r"feed 'b': expected shape"):
            exe.run(program, feed={"a": ok, "b": np.ones((2, 4), "float32")},
                    fetch_list=[out_b])


@pytest.mark.parametrize("make", [fluid.data, fluid.layers.data])
def test_data_layers_type_checks_are_type_errors_as_fluid(make):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match="name must be a str"):
            make(name=1, shape=[2, 25], dtype="bool")
        with pytest.raises(TypeError, match="shape must be a list or tuple"):
            make(name="data1", shape=2, dtype="bool")
