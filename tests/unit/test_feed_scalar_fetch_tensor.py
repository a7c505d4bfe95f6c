"""fluid 1.8.5's feeding of Python scalars (executor._as_lodtensor: np.array([value]) in the
variable's dtype) and a data-parallel run's fetches with return_numpy=False (a LoDTensor per
fetch merged over the places, or with return_merged=False one per place)."""
import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import FeedError


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 1], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="float32")
        lr = fluid.data(name="lr", shape=[1], dtype="float32")
        cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
        fluid.optimizer.Adam(learning_rate=lr).minimize(cost)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, lr, cost


@pytest.mark.parametrize("value", [0.01, 1, np.float64(0.5)])
def test_a_scalar_is_fed_as_one_element_of_the_variables_dtype(value, monkeypatch):
    monkeypatch.setenv("CPU_NUM", "1")
    main, exe, lr, cost = _net()
    feed = {"x": np.ones((4, 1), "float32"), "y": np.ones((4, 1), "float32"), "lr": value}
    for program in (main, fluid.CompiledProgram(main).with_data_parallel(loss_name=cost.name)):
        got, _ = exe.run(program, feed=feed, fetch_list=[lr, cost], return_numpy=False)
        assert isinstance(got, fluid.LoDTensor)
        assert got._dtype() == lr.dtype and np.array(got).dtype == np.float32  # as fluid
        np.testing.assert_array_equal(np.array(got), np.array([value], "float32"))


def test_a_scalar_over_several_places_of_a_training_program_is_a_feed_error(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")  # fluid 1.8.5 refuses it too (EnforceNotMet)
    main, exe, lr, cost = _net()
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=cost.name)
    with pytest.raises(FeedError, match="'lr' has a batch of 1 but there are 2 places"):
        exe.run(compiled, feed={"x": np.ones((4, 1), "float32"),
                                "y": np.ones((4, 1), "float32"), "lr": 0.01}, fetch_list=[cost])


@pytest.mark.parametrize("places", [2, 1])
def test_data_parallel_fetches_with_return_numpy_false_are_lodtensors(places):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 1], dtype="float32")
        r = fluid.layers.relu(x)
    exe = fluid.Executor(fluid.CPUPlace())
    compiled = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(places))
    feed = {"x": np.arange(-1, 3, dtype="float32").reshape(4, 1)}
    merged, = exe.run(compiled, feed=feed, fetch_list=[r], return_numpy=False)
    assert isinstance(merged, fluid.LoDTensor)
    np.testing.assert_array_equal(np.array(merged), np.maximum(feed["x"], 0))
    per_place, = exe.run(compiled, feed=feed, fetch_list=[r], return_numpy=False,
                         return_merged=False)
    assert len(per_place) == places and all(isinstance(t, fluid.LoDTensor) for t in per_place)
    assert [np.array(t).shape for t in per_place] == [(4 // places, 1)] * places  # as fluid
