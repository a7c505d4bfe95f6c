"""fluid.transpiler.collective's GradAllReduce and LocalSGD: the communicator's init and the
parameters' broadcast in the startup program, the gradient sum (or the parameter average)
in the main program; in a world of one process training equals the plain program's."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.transpiler.collective import GradAllReduce, LocalSGD

EP = "127.0.0.1:6170"


def _programs():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 1], "float32")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def _train(main, startup, loss):
    rng = np.random.RandomState(0)
    feed = {"x": rng.rand(8, 4).astype("float32"), "y": rng.rand(8, 1).astype("float32")}
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        return [float(exe.run(main, feed=feed, fetch_list=[loss])[0][0]) for _ in range(4)]


@pytest.mark.parametrize("cls", [GradAllReduce, LocalSGD])
def test_one_process_trains_as_the_plain_program(cls):
    plain = _train(*_programs())
    main, startup, loss = _programs()
    cls().transpile(startup, main, rank=0, endpoints=EP, current_endpoint=EP, wait_port=False)
    startup_types = [op.type for op in startup.global_block().ops]
    assert "c_comm_init" in startup_types and "c_broadcast" in startup_types
    main_types = [op.type for op in main.global_block().ops]
    assert "c_allreduce_sum" in main_types and main._trainers_endpoints == [EP]
    if cls is GradAllReduce:
        assert main_types.index("c_allreduce_sum") < main_types.index("sgd")
    else:
        assert main_types.index("c_allreduce_sum") > main_types.index("sgd")
    np.testing.assert_allclose(_train(main, startup, loss), plain, rtol=1e-6)


def test_transpile_checks_the_endpoints():
    main, startup, _ = _programs()
    with pytest.raises(ValueError, match="current_endpoint"):
        GradAllReduce().transpile(startup, main, 0, EP, "127.0.0.1:1", False)
    with pytest.raises(ValueError, match="rank 3"):
        GradAllReduce().transpile(startup, main, 3, EP, EP, False)
