"""A parameter updated by two optimizer ops (minimize called twice on one program, as Paddle
1.8's test_fleet_api_input.py does): as fluid 1.8's transpiler, the trainer sends the first
(param, grad) pair's gradient, and the pserver runs both updates, in program order, on it."""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

import spmd.fluid as fluid

pytest.importorskip("grpc")
from spmd.ps.rpc import PServerClient  # noqa: E402

pytestmark = pytest.mark.timeout(60)
LR1, LR2 = 0.5, 0.25


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _transpiled(endpoint: str):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        y = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="w"), bias_attr=False)
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(LR1).minimize(loss)
        fluid.optimizer.SGD(LR2).minimize(loss)
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=endpoint, trainers=1, startup_program=startup)
    return t


def test_the_trainer_sends_the_first_gradient_and_the_pserver_runs_both_updates():
    endpoint = f"127.0.0.1:{_port()}"
    t = _transpiled(endpoint)
    trainer = t.get_trainer_program(wait_port=False)
    sends = [op for op in trainer.global_block().ops if op.type == "send"]
    assert [op.input("X") for op in sends] == [["w@GRAD"]]  # the first pair's gradient
    assert not [op for op in trainer.global_block().ops if op.type == "sgd"]
    program, startup = t.get_pserver_programs(endpoint)
    serv = program.global_block().ops[-1]
    assert serv.type == "listen_and_serv" and serv.input("X") == ["w@GRAD.trainer_0"]
    blocks = [program.block(b) for b in serv.attr("optimize_blocks")]
    sgds = [op for b in blocks for op in b.ops if op.type == "sgd"]
    assert len(sgds) == 2
    assert {op.input("Grad")[0] for op in sgds} == {"w@GRAD"}  # both read the merged gradient
    assert [op.input("LearningRate")[0] for op in sgds] == ["learning_rate_0",
                                                            "learning_rate_1"]

    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
    w0 = np.array(scope.get("w"))
    errors = []

    def serve():
        try:
            with fluid.scope_guard(scope):
                exe.run(program)
        except Exception as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    grad = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    with PServerClient(endpoint, 0, deadline=30) as client:
        client.send_variables({"w@GRAD.trainer_0": grad}, step=0, then_barrier=True)
        got = client.get_variables(["w"], min_step=0)["w"]
        client.complete()
    thread.join(timeout=30)
    assert not thread.is_alive() and not errors, errors
    np.testing.assert_allclose(np.asarray(got), w0 - LR1 * grad - LR2 * grad, rtol=1e-6)
