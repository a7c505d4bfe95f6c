"""Half-async parameter-server mode (DistributeTranspilerConfig.half_async, as Paddle 1.8's
test_communicator_half_async.py sets it up with fleet): fluid.communicator names the modes
(DistributedMode, imported there as in fluid 1.8), the pserver program runs in mode
HALF_ASYNC, and one half-async trainer trains as local SGD does (each step's gradient is
applied before the next step receives the parameters)."""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fleet.ps_strategy import transpiler_config
from spmd.fluid.communicator import DistributedMode

pytest.importorskip("grpc")
pytestmark = pytest.mark.timeout(120)
STEPS, LR = 4, 0.1


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 13], "float32")
        y = fluid.data("y", [None, 1], "float32")
        pred = fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w"),
                               bias_attr=fluid.ParamAttr(name="b"))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(LR).minimize(loss)
    return main, startup, loss


def _batches():
    rng = np.random.default_rng(3)
    return [{"x": rng.random((8, 13), dtype=np.float32),
             "y": rng.random((8, 1), dtype=np.float32)} for _ in range(STEPS)]


def _local():
    main, startup, _ = _model()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for feed in _batches():
            exe.run(main, feed=feed)
    return {n: np.array(scope.get(n)) for n in ("w", "b")}


def test_one_half_async_trainer_trains_as_local_sgd():
    assert DistributedMode.HALF_ASYNC == 2 and DistributedMode.SYNC == 0
    endpoint = f"127.0.0.1:{_port()}"
    main, startup, _ = _model()
    strategy = fluid.DistributeTranspilerConfig()  # as the Paddle test gives it to fleet
    strategy.sync_mode = False
    strategy.runtime_split_send_recv = True
    strategy.half_async = True
    config = transpiler_config(strategy)  # what fleet's distributed_optimizer transpiles
    t = fluid.DistributeTranspiler(config)
    t.transpile(0, program=main, pservers=endpoint, trainers=1, sync_mode=False,
                startup_program=startup)
    ps_main, ps_startup = t.get_pserver_programs(endpoint)
    serv = [op for op in ps_main.global_block().ops if op.type == "listen_and_serv"][0]
    assert serv.attr("distributed_mode") == DistributedMode.HALF_ASYNC

    ps_scope, ps_exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(ps_scope):
        ps_exe.run(ps_startup)
    errors = []

    def serve():
        try:
            with fluid.scope_guard(ps_scope):
                ps_exe.run(ps_main)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    trainer = t.get_trainer_program(wait_port=True)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for feed in _batches():
            exe.run(trainer, feed=feed)
        exe.close()
    thread.join(timeout=60)
    assert not thread.is_alive() and not errors, errors
    expected = _local()
    for name in ("w", "b"):
        np.testing.assert_allclose(np.array(ps_scope.get(name)), expected[name], rtol=1e-5,
                                   atol=1e-6)
