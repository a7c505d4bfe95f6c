"""A LoDTensorArray fetched from a data-parallel program, as fluid 1.8.5 hands it out
(tests/oracle/make_loader_feed.py, 2 CPU places): return_merged=False gives each place's
array, return_merged=True each element concatenated over the places, return_numpy=False a
list of LoDTensors."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid
from tests.oracle_io import load

ORACLE = load("loader_feed")["fetched_tensor_array"]


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = fluid.layers.zeros(shape=[1], dtype="int64")
        img = fluid.data(name="image", shape=[-1, 4], dtype="float32")
        label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
        pred = fluid.layers.fc(img, 3, act="softmax",
                               param_attr=fluid.initializer.Constant(0.1),
                               bias_attr=fluid.initializer.Constant(0.0))
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
        fluid.optimizer.SGD(0.5).minimize(loss)
        array = fluid.layers.array_write(x=img, i=i)
        i = fluid.layers.increment(i)
        fluid.layers.array_write(x=label, i=i, array=array)
        i = fluid.layers.increment(i)
        fluid.layers.array_write(x=loss, i=i, array=array)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, loss, array


def test_a_fetched_tensor_array_over_two_places_is_fluids(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    main, exe, loss, array = _net()
    binary = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    feed = ORACLE["feed"]

    loss_v, array_v = exe.run(binary, feed=feed, fetch_list=[loss, array], return_merged=False)
    want = ORACLE["unmerged"]
    for got, w in zip(loss_v, want["loss"]):
        np.testing.assert_allclose(got, w, rtol=1e-5)
    assert len(array_v) == len(want["array"])
    for place, w_place in zip(array_v, want["array"]):
        assert len(place) == len(w_place)
        for got, w in zip(place, w_place):
            np.testing.assert_allclose(np.array(got), w, rtol=1e-5)
            assert np.array(got).dtype == w.dtype

    loss_v, array_v = exe.run(binary, feed=feed, fetch_list=[loss, array], return_merged=True)
    want = ORACLE["merged"]
    np.testing.assert_allclose(loss_v, want["loss"], rtol=1e-5)
    for got, w in zip(array_v, want["array"]):
        np.testing.assert_allclose(np.array(got), w, rtol=1e-5)
    np.testing.assert_allclose(loss_v, array_v[2], rtol=1e-6)

    _, tensors = exe.run(binary, feed=feed, fetch_list=[loss, array], return_numpy=False)
    assert isinstance(tensors, list) and len(tensors) == ORACLE["tensors"]["len"]
    assert all(isinstance(t, fluid.LoDTensor) for t in tensors)
    assert [t.shape() for t in tensors] == [[8, 4], [8, 1], [2]]


def test_a_persistable_tensor_array_reads_back_from_the_scope_with_its_lods():
    """var.get_lod_tensor_array() after a run: the array's elements, each with its LoD, as
    fluid 1.8.5's (the array variable has no lod_level of its own)."""
    from spmd.fluid.layers.control_flow import (
        array_to_lod_tensor,
        lod_rank_table,
        lod_tensor_to_array,
    )
    want = load("loader_feed")["persisted_tensor_array"]
    t = fluid.LoDTensor()
    t.set(want["rows"], fluid.CPUPlace())
    t.set_recursive_sequence_lengths(want["lengths"])
    program = fluid.Program()
    with fluid.program_guard(program):
        x = fluid.layers.data(name="x", shape=[1], lod_level=2)
        table = lod_rank_table(x, level=0)
        array = lod_tensor_to_array(x, table)
        array.persistable = True
        result = array_to_lod_tensor(array, table)
        result.persistable = True
    scope = fluid.core.Scope()
    fluid.Executor(fluid.CPUPlace()).run(program, feed={"x": t}, scope=scope)
    elements = scope.find_var(array.name).get_lod_tensor_array()
    assert len(elements) == len(want["elements"])
    for got, w, w_lengths in zip(elements, want["elements"], want["element_lengths"]):
        np.testing.assert_array_equal(np.array(got), w)
        assert got.recursive_sequence_lengths() == w_lengths
    back = scope.find_var(result.name).get_tensor()
    np.testing.assert_array_equal(np.array(back), want["result"])
    assert back.recursive_sequence_lengths() == want["result_lengths"]
