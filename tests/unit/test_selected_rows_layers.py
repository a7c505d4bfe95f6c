"""fluid.layers.merge_selected_rows and get_tensor_from_selected_rows on an embedding's sparse
gradient (numpy references)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError


def test_merge_and_get_tensor_of_a_sparse_gradient():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[6, 2], is_sparse=True)
        loss = fluid.layers.reduce_sum(emb * emb)
        fluid.optimizer.SGD(0.0).minimize(loss)
        grad = main.global_block().var(main.global_block().all_parameters()[0].name + "@GRAD")
        merged = fluid.layers.merge_selected_rows(grad)
        values = fluid.layers.get_tensor_from_selected_rows(merged)
        raw = fluid.layers.get_tensor_from_selected_rows(grad)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    table = np.array(scope.find_var(main.global_block().all_parameters()[0].name).get_tensor())
    got_values, got_raw = exe.run(main, feed={"ids": np.array([[3], [1], [3]])},
                                  fetch_list=[values, raw], scope=scope)
    np.testing.assert_allclose(got_raw, 2 * table[[3, 1, 3]], rtol=1e-6)  # a row per id
    np.testing.assert_allclose(got_values, 2 * np.stack([table[1], 2 * table[3]]), rtol=1e-6)


def test_a_dense_input_is_refused_naming_what_it_takes():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32")
        out = fluid.layers.merge_selected_rows(x)
    with pytest.raises(ExecutionError, match="takes a sparse gradient"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones((2, 2), "float32")},
                                             fetch_list=[out])
