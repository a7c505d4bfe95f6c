"""The pserver at run time in one process: `exe.run(pserver_program)` in a thread, the
trainers played by PServerClients (so the steps and the bad requests are under the test's
control): a sync step averages the trainers' gradients into one SGD update, a sparse
gradient updates only its rows, parameters are given out only after their step, bad
requests are refused naming the fix while the pserver keeps serving, a checkpoint restores,
and a trainer whose pserver is not there fails naming it."""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import CommunicationError

pytest.importorskip("grpc")
from spmd.ps.rpc import PServerClient, RequestRejected  # noqa: E402

pytestmark = pytest.mark.timeout(60)
LR = 0.5


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _transpiled(endpoint: str, sync: bool = True, dc_asgd: bool = False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        ids = fluid.data("ids", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[10, 4], is_sparse=True)
        loss = fluid.layers.mean(fluid.layers.fc(fluid.layers.elementwise_add(x, emb), 3))
        fluid.optimizer.SGD(LR).minimize(loss)
    config = fluid.DistributeTranspilerConfig()
    config.enable_dc_asgd = dc_asgd
    t = fluid.DistributeTranspiler(config)
    t.transpile(0, program=main, pservers=endpoint, trainers=2, sync_mode=sync,
                startup_program=startup)
    return t.get_pserver_programs(endpoint)


class Serving:
    """exe.run(pserver program) in a thread on its own scope."""

    def __init__(self, sync=True, restore=None, dc_asgd=False):
        self.endpoint = f"127.0.0.1:{_port()}"
        self.program, startup = _transpiled(self.endpoint, sync, dc_asgd)
        self.scope = fluid.Scope()
        self.exe = fluid.Executor(fluid.CPUPlace())
        with fluid.scope_guard(self.scope):
            self.exe.run(startup)
            if restore:
                fluid.io.load_persistables(self.exe, restore, self.program)
        self.initial = {n: np.array(self.scope.get(n)) for n in ("fc_0.w_0", "embedding_0.w_0")}
        self.error = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.trainers = [PServerClient(self.endpoint, i, deadline=20) for i in range(2)]

    def _serve(self):
        try:
            self.exe.run(self.program, scope=self.scope)
        except Exception as e:  # noqa: BLE001 - the test reads it
            self.error = e

    def both(self, call):
        """call(client) for both trainers at once (a barrier needs both)."""
        results = [None, None]
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(
            i, call(self.trainers[i]))) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(20)
        return results

    def finish(self):
        for c in self.trainers:
            c.complete()
            c.close()
        self.thread.join(20)
        assert not self.thread.is_alive() and self.error is None, self.error


def _grads(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((4, 3)).astype("float32")


def test_a_sync_step_averages_the_trainers_gradients():
    from spmd.core.selected_rows import SelectedRows

    ps = Serving()
    g = [_grads(0), _grads(1)]
    rows = [np.array([1, 7, 1]), np.array([2])]
    vals = [np.ones((3, 4), "float32"), np.full((1, 4), 4.0, "float32")]
    for i, c in enumerate(ps.trainers):
        c.send_variables({f"fc_0.w_0@GRAD.trainer_{i}": g[i],
                          f"fc_0.b_0@GRAD.trainer_{i}": np.zeros(3, "float32"),
                          f"embedding_0.w_0@GRAD.trainer_{i}":
                              SelectedRows(rows[i], vals[i], 10)}, step=0)
    ps.both(lambda c: c.send_barrier(0))
    got = ps.trainers[0].get_variables(["fc_0.w_0", "embedding_0.w_0"], min_step=0)
    np.testing.assert_allclose(got["fc_0.w_0"],
                               ps.initial["fc_0.w_0"] - LR * (g[0] + g[1]) / 2, rtol=1e-6)
    table = ps.initial["embedding_0.w_0"].copy()
    table[1] -= LR * 2 / 2
    table[7] -= LR * 1 / 2
    table[2] -= LR * 4 / 2
    np.testing.assert_allclose(got["embedding_0.w_0"], table, rtol=1e-6)
    np.testing.assert_allclose(ps.trainers[1].prefetch("embedding_0.w_0", [7, 2]),
                               table[[7, 2]], rtol=1e-6)
    ps.both(lambda c: c.fetch_barrier(0))
    ps.finish()
    # the updated values are in the pserver's scope afterwards
    np.testing.assert_allclose(np.array(ps.scope.get("fc_0.w_0")), got["fc_0.w_0"])


def test_a_trainer_that_completed_adds_nothing_to_later_sync_steps():
    """Trainer 1 completes after step 0; in step 1 trainer 0's gradient alone is averaged
    over both (its stale step-0 gradient is not applied again)."""
    from spmd.core.selected_rows import SelectedRows

    ps = Serving()
    g = [_grads(0), _grads(1), _grads(2)]

    def send(c, grad, step):
        i = c.trainer_id
        c.send_variables({f"fc_0.w_0@GRAD.trainer_{i}": grad,
                          f"fc_0.b_0@GRAD.trainer_{i}": np.zeros(3, "float32"),
                          f"embedding_0.w_0@GRAD.trainer_{i}":
                              SelectedRows(np.array([3]), np.ones((1, 4), "float32"), 10)},
                         step=step)
        c.send_barrier(step)

    ps.both(lambda c: send(c, g[c.trainer_id], 0))
    ps.both(lambda c: c.fetch_barrier(0))
    ps.trainers[1].complete()
    send(ps.trainers[0], g[2], 1)
    got = ps.trainers[0].get_variables(["fc_0.w_0"], min_step=1)["fc_0.w_0"]
    want = ps.initial["fc_0.w_0"] - LR * (g[0] + g[1]) / 2 - LR * g[2] / 2
    np.testing.assert_allclose(got, want, rtol=1e-6)
    ps.trainers[0].fetch_barrier(1)
    ps.trainers[0].complete()
    ps.thread.join(20)
    assert not ps.thread.is_alive() and ps.error is None, ps.error


def test_dc_asgd_compensates_a_stale_gradient():
    """Async DC-ASGD: each trainer's gradient gets + g * g * (param - the parameters that
    trainer last received) before the update (fluid's transpiled ops, run by the pserver)."""
    ps = Serving(sync=False, dc_asgd=True)
    w0 = ps.initial["fc_0.w_0"]
    for c in ps.trainers:  # both receive w0: each one's backup
        np.testing.assert_array_equal(c.get_variables(["fc_0.w_0"])["fc_0.w_0"], w0)
    g0, g1 = _grads(0), _grads(1)
    ps.trainers[0].send_variables({"fc_0.w_0@GRAD": g0})
    w1 = w0 - LR * g0  # trainer 0 was not stale: param == its backup
    np.testing.assert_allclose(ps.trainers[0].get_variables(["fc_0.w_0"])["fc_0.w_0"], w1,
                               rtol=1e-6)
    ps.trainers[1].send_variables({"fc_0.w_0@GRAD": g1})  # computed at w0, applied at w1
    w2 = w1 - LR * (g1 + g1 * g1 * (w1 - w0))
    np.testing.assert_allclose(ps.trainers[1].get_variables(["fc_0.w_0"])["fc_0.w_0"], w2,
                               rtol=1e-5)
    ps.trainers[0].send_variables({"fc_0.w_0@GRAD": g0})  # trainer 0's backup is w1
    w3 = w2 - LR * (g0 + g0 * g0 * (w2 - w1))
    np.testing.assert_allclose(ps.trainers[0].get_variables(["fc_0.w_0"])["fc_0.w_0"], w3,
                               rtol=1e-5)
    ps.finish()


def test_bad_requests_are_refused_and_the_pserver_keeps_serving():
    ps = Serving()
    c0 = ps.trainers[0]
    with pytest.raises(RequestRejected, match="PADDLE_TRAINER_ID"):
        c0.send_variables({"fc_0.w_0@GRAD.trainer_1": _grads(0)}, step=0)
    with pytest.raises(RequestRejected, match="not a gradient this pserver receives"):
        c0.send_variables({"fc_0.w_0": _grads(0)}, step=0)
    with pytest.raises(RequestRejected, match=r"should be float32 \[4, 3\]"):
        c0.send_variables({"fc_0.w_0@GRAD.trainer_0": np.zeros((3, 4), "float32")}, step=0)
    with pytest.raises(RequestRejected, match="gradients of step 5 sent while the pserver "
                                              "gathers step 0"):
        c0.send_variables({"fc_0.w_0@GRAD.trainer_0": _grads(0)}, step=5)
    with pytest.raises(RequestRejected, match="ids must be in"):
        c0.prefetch("embedding_0.w_0", [10])
    with pytest.raises(RequestRejected, match="no variable"):
        c0.get_variables(["nope"])
    # parameters after step 0 are not given out before its send barrier passed
    with pytest.raises(CommunicationError, match="not ready"):
        c0.get_variables(["fc_0.w_0"], min_step=0, timeout=1.5)
    np.testing.assert_array_equal(c0.get_variables(["fc_0.w_0"])["fc_0.w_0"],
                                  ps.initial["fc_0.w_0"])
    ps.finish()


def test_a_checkpoint_restores_the_pserver(tmp_path):
    ps = Serving(sync=False)
    c0 = ps.trainers[0]
    c0.send_variables({"fc_0.w_0@GRAD": _grads(3)})  # async: applied as it arrives
    after = c0.get_variables(["fc_0.w_0"])["fc_0.w_0"]
    np.testing.assert_allclose(after, ps.initial["fc_0.w_0"] - LR * _grads(3), rtol=1e-6)
    c0.checkpoint_notify(str(tmp_path))
    ps.finish()
    restored = Serving(sync=False, restore=str(tmp_path / "pserver_0"))
    np.testing.assert_array_equal(restored.initial["fc_0.w_0"], after)
    restored.finish()


def test_a_trainer_fails_fast_naming_a_missing_pserver(monkeypatch):
    monkeypatch.setenv("SPMD_PS_RPC_DEADLINE", "1")
    endpoint = f"127.0.0.1:{_port()}"
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(fluid.layers.fc(x, 3)))
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=endpoint, trainers=1, startup_program=startup)
    t.get_trainer_program(wait_port=False)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        with pytest.raises(CommunicationError, match=f"{endpoint}.*Start the pserver first"):
            exe.run(startup)
    with pytest.raises(CommunicationError, match=endpoint):
        exe.close()  # tells the pserver it is done: it is not there either
