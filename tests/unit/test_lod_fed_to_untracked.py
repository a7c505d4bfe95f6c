"""A LoDTensor fed to a variable declared lod_level=0 that an op reads as LoD
(shrink_rnn_memory on fluid.layers.data('x', shape=[4])): fluid 1.8's LoD travels with the
tensor at run time, so the op sees the sequences. spmd runs a copy of the program whose
variables carry that LoD. The expected rows and LoDs are fluid 1.8.5's (its executor run
of this program: Out rows 6, 5, 2 with LoDs [[2, 3, 1]], [[2, 3]], [[2]]; x@GRAD sums to 1)."""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid
from spmd.fluid import core, layers
from spmd.fluid.layers.control_flow import lod_rank_table, shrink_memory

FLUID_ROWS = [6, 5, 2]
FLUID_LODS = [[[2, 3, 1]], [[2, 3]], [[2]]]


def _program(x_lod_level):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = layers.data("x", shape=[4], dtype="float32", lod_level=x_lod_level)
        x.stop_gradient = False
        table = lod_rank_table(x=layers.data("rt", shape=[1], dtype="float32", lod_level=1))
        i = layers.zeros(dtype="int64", shape=[1])
        mems = [shrink_memory(x=x, i=i, table=table)]
        for _ in range(2):
            i = layers.increment(x=i)
            i.stop_gradient = True
            mems.append(shrink_memory(x=mems[-1], i=i, table=table))
        fluid.backward.append_backward(layers.mean(mems[-1]))
    return main, mems


def _feed():
    x = core.LoDTensor()
    x.set(np.arange(24, dtype="float32").reshape(6, 4), fluid.CPUPlace())
    x.set_recursive_sequence_lengths([[2, 3, 1]])
    rt = core.LoDTensor()
    rt.set(np.zeros((6, 1), "float32"), fluid.CPUPlace())
    rt.set_recursive_sequence_lengths([[1, 2, 3]])
    return {"x": x, "rt": rt}


def test_the_fed_lod_reaches_the_ops_as_in_fluid():
    main, mems = _program(x_lod_level=0)
    exe = fluid.Executor(fluid.CPUPlace())
    data = np.arange(24, dtype="float32").reshape(6, 4)
    for _ in range(2):  # the copy is made once and reused
        outs = exe.run(main, feed=_feed(), fetch_list=mems + ["x@GRAD"], return_numpy=False)
        for out, rows, lod in zip(outs, FLUID_ROWS, FLUID_LODS):
            np.testing.assert_array_equal(np.array(out), data[:rows])
            assert out.recursive_sequence_lengths() == lod
        grad = np.array(outs[3])
        assert grad.shape == (6, 4) and abs(grad.sum() - 1.0) < 1e-6
        np.testing.assert_allclose(grad[:2], 1 / 8)
        np.testing.assert_array_equal(grad[2:], 0)
    assert main.global_block().var("x").lod_level == 0  # the caller's program is unchanged
    declared, declared_mems = _program(x_lod_level=1)  # the same as a declared LoD
    want = exe.run(declared, feed=_feed(), fetch_list=declared_mems, return_numpy=False)
    for g, w in zip(outs, want):
        np.testing.assert_array_equal(np.array(g), np.array(w))
