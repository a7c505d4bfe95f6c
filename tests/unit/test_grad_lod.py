"""A gradient keeps its input's LoD where fluid 1.8.5's grad kernel shares it:
reorder_lod_tensor_by_rank's X@GRAD has X's LoD (Paddle's test_reorder_lod_tensor.py checks
`x_grad.recursive_sequence_lengths()` against X's, and passes on fluid 1.8.5)."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid


def test_reorder_lod_tensor_by_rank_gradient_has_the_inputs_lod():
    x_lens = [[2, 1, 3], [1, 2, 1, 2, 1, 1]]   # 3 sequences: rows 0-2, 3, 4-7
    ref_lens = [[1, 3, 2]]                     # the rank table: lengths 3, 2, 1 -> 1, 2, 0
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2], "float32", lod_level=2)
        x.stop_gradient = False
        ref = fluid.data("ref", [-1, 1], "float32", lod_level=1)
        table = fluid.layers.control_flow.lod_rank_table(ref)
        out = fluid.layers.reorder_lod_tensor_by_rank(x, table)
        w = fluid.layers.assign(np.arange(16, dtype="float32").reshape(8, 2))
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, w))
        fluid.backward.append_backward(loss)
    place = fluid.CPUPlace()
    xv = np.random.RandomState(0).rand(8, 2).astype("float32")
    feed = {"x": fluid.create_lod_tensor(xv, x_lens, place),
            "ref": fluid.create_lod_tensor(np.zeros((6, 1), "float32"), ref_lens, place)}
    exe = fluid.Executor(place)
    exe.run(startup)
    o, g = exe.run(main, feed=feed, fetch_list=[out, "x@GRAD"], return_numpy=False)
    # sequences of x in the table's order: 1 (row 3), 2 (rows 4-7), 0 (rows 0-2)
    order = [3, 4, 5, 6, 7, 0, 1, 2]
    np.testing.assert_array_equal(np.array(o), xv[order])
    assert o.recursive_sequence_lengths() == [[1, 3, 2], [1, 2, 1, 1, 1, 2]]
    dx = np.zeros((8, 2), "float32")
    dx[order] = np.arange(16, dtype="float32").reshape(8, 2)
    np.testing.assert_array_equal(np.array(g), dx)
    assert g.recursive_sequence_lengths() == x_lens


def test_a_fed_multi_level_lod_goes_through_a_tensor_array_and_back():
    # Paddle's test_lod_tensor_array_ops.py (passes on fluid 1.8.5): x declared without LoD,
    # fed 3 levels; the rank table splits level 0, each element keeps the levels below and
    # array_to_lod_tensor gives x back with its whole LoD
    lens = [[2, 3, 1], [2, 3, 1, 4, 2, 1], [3, 4, 4, 6, 4, 1, 1, 4, 4, 8, 6, 1, 4]]
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1], dtype="int32")
        cf = fluid.layers.control_flow
        table = cf.lod_rank_table(x, level=0)
        array = cf.lod_tensor_to_array(x, table)
        back = cf.array_to_lod_tensor(array, table)
    place = fluid.CPUPlace()
    xv = np.arange(50, dtype="int32").reshape(50, 1)
    feed = {"x": fluid.create_lod_tensor(xv, lens, place)}
    got, = fluid.Executor(place).run(main, feed=feed, fetch_list=[back], return_numpy=False)
    np.testing.assert_array_equal(np.array(got), xv)
    assert got.recursive_sequence_lengths() == lens
