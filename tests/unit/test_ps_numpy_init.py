"""A parameter given by value (NumpyArrayInitializer: an assign_value op in the startup
program) and cut into blocks across pservers starts, on each pserver, from the rows of the
whole value its blocks hold. Before, every block got the whole array (its first rows for the
wrong block) and a sliced job trained silently other numbers than one process; fluid 1.8.5
copies the whole array too and then fails in the block's optimizer op (Param and Grad of
different shapes)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid

pytest.importorskip("grpc")

EPS = ["127.0.0.1:1", "127.0.0.1:2"]
ROWS, DIM = 50_000, 9


def _transpiled(opt):
    rng = np.random.RandomState(7)
    table = rng.randn(ROWS, DIM).astype("float32")
    weight = rng.randn(DIM, 3000).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        emb = fluid.layers.embedding(
            ids, size=[ROWS, DIM], is_sparse=True, param_attr=fluid.ParamAttr(
                name="table", initializer=fluid.initializer.NumpyArrayInitializer(table)))
        out = fluid.layers.fc(emb, 3000, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(weight)))
        loss = fluid.layers.mean(out)
        opt().minimize(loss)
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=",".join(EPS), trainers=2, startup_program=startup)
    return t, {"table": table, "w": weight}


@pytest.mark.parametrize("opt", [lambda: fluid.optimizer.SGD(0.1),
                                 lambda: fluid.optimizer.Adam(0.1, lazy_mode=True)],
                         ids=["sgd", "lazy_adam"])
def test_each_block_starts_from_its_rows_of_the_given_value(opt):
    t, whole = _transpiled(opt)
    blocks = t.param_blocks()
    seen = {name: 0 for name in whole}
    for ep in EPS:
        _, pstartup = t.get_pserver_programs(ep)
        scope = fluid.Scope()
        fluid.Executor(fluid.CPUPlace()).run(pstartup, scope=scope)
        for name, value in whole.items():
            for block_name, begin, end, where in blocks[name]:
                if where != ep:
                    continue
                got = np.asarray(scope.find_var(block_name).get_tensor())
                np.testing.assert_array_equal(got, value[begin:end], err_msg=block_name)
                seen[name] += end - begin
    # both variables are cut in two, and together the blocks hold every row once
    assert all(len(blocks[n]) == 2 for n in whole)
    assert seen == {n: v.shape[0] for n, v in whole.items()}
