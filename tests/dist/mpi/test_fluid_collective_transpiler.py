"""fluid.transpiler.collective under mpiexec: with GradAllReduce (gradients summed, loss
gradient / N) and with LocalSGD (parameters averaged after each local SGD step), N ranks each
on 1/N of the batch train the same parameters as one process on the whole batch."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.fluid.transpiler.collective import GradAllReduce, LocalSGD

pytestmark = pytest.mark.mpi(min_size=1)


def _programs():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 1], "float32")
        pred = fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w"),
                               bias_attr=fluid.ParamAttr(name="b"))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(0.2).minimize(loss)
    return main, startup, loss


def _train(main, startup, loss, rows):
    rng = np.random.RandomState(1)
    x = rng.rand(8, 4).astype("float32")
    y = rng.rand(8, 1).astype("float32")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(3):
            exe.run(main, feed={"x": x[rows], "y": y[rows]}, fetch_list=[loss])
        return {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "b")}


@pytest.mark.parametrize("cls", [GradAllReduce, LocalSGD])
def test_n_ranks_equal_one_process(cls):
    t = detect()
    if 8 % t.size:
        pytest.skip(f"the batch of 8 does not split over {t.size} ranks")
    whole = _train(*_programs(), slice(None))
    main, startup, loss = _programs()
    endpoints = [f"127.0.0.1:{6170 + r}" for r in range(t.size)]
    cls().transpile(startup, main, rank=t.rank, endpoints=",".join(endpoints),
                    current_endpoint=endpoints[t.rank], wait_port=False)
    share = 8 // t.size
    mine = _train(main, startup, loss, slice(t.rank * share, (t.rank + 1) * share))
    for name in ("w", "b"):
        np.testing.assert_allclose(mine[name], whole[name], rtol=1e-5, atol=1e-6)
