"""fluid.layers.io.ListenAndServ / Send / Recv: a pserver built with the program-building API
(as Paddle 1.8's test_dist_train.py builds one), served by spmd's pserver runtime on a port
it picks, stopped by SIGINT / SIGTERM with status 0 (fluid's listen_and_serv does both)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import spmd.fluid as fluid
import spmd.fluid.layers.ops as ops
from spmd.fluid.layers.io import ListenAndServ, Recv, Send

SERVER = textwrap.dedent("""
    import spmd.fluid as fluid
    import spmd.fluid.layers.ops as ops
    from spmd.fluid.layers.io import ListenAndServ

    main = fluid.Program()
    with fluid.program_guard(main):
        serv = ListenAndServ("127.0.0.1:0", ["X"], optimizer_mode=False)
        with serv.do():
            out = main.global_block().create_var(name="Y", dtype="float32", shape=[4, 3])
            x = fluid.layers.data("X", [4, 3], dtype="float32", append_batch_size=False)
            fluid.initializer.Constant(value=1.0)(x, main.global_block())
            ops._scale(x=x, scale=10.0, bias=0.5, out=out)
    fluid.Executor(fluid.CPUPlace()).run(main)
""")


def _client_program(port: int, x_value: np.ndarray):
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.layers.data("X", list(x_value.shape), dtype="float32", append_batch_size=False)
        x.persistable = True
        y = main.global_block().create_var(name="Y", dtype="float32", shape=[4, 3])
        Send(f"127.0.0.1:{port}", [x])
        got = Recv(f"127.0.0.1:{port}", [y])
    return main, got


def _start_server(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    port_file = f"/tmp/paddle.{proc.pid}.port"
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out = proc.communicate(timeout=10)[0].decode(errors="replace")
            pytest.fail(f"the pserver wrote no {port_file}: {out[-2000:]}")
        time.sleep(0.1)
    with open(port_file) as f:
        return proc, port_file, int(f.read())


def test_served_block_runs_on_what_the_trainer_sends(tmp_path):
    proc, port_file, port = _start_server(tmp_path)
    try:
        x_value = np.arange(12, dtype=np.float32).reshape(4, 3)
        main, got = _client_program(port, x_value)
        exe = fluid.Executor(fluid.CPUPlace())
        for step in range(2):  # each run: X sent, the block run on it, Y received
            out, = exe.run(main, feed={"X": x_value + step}, fetch_list=got,
                           scope=fluid.Scope())
            np.testing.assert_allclose(out, (x_value + step) * 10.0 + 0.5)
        exe.close()  # the only trainer is done: the pserver stops serving
        assert proc.wait(timeout=60) == 0
        assert not os.path.exists(port_file)  # removed when it stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_server_with_status_0(tmp_path, stop_signal):
    proc, port_file, port = _start_server(tmp_path)
    try:
        assert port > 0  # "127.0.0.1:0": the port it picked
        proc.send_signal(stop_signal)
        assert proc.wait(timeout=60) == 0
        assert not os.path.exists(port_file)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_the_layers_build_fluids_ops():
    main = fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main):
        serv = ListenAndServ("127.0.0.1:6170", ["X"], fan_in=2)
        with serv.do():
            x = fluid.layers.data("X", [3], dtype="float32", append_batch_size=False)
            fluid.layers.scale(x, scale=2.0)
        assert main.current_block().idx == 0
        a = fluid.layers.data("A", [3], dtype="float32", append_batch_size=False)
        Send("127.0.0.1:1,127.0.0.1:2", [a, a], sync=False)
        Send("127.0.0.1:1", [a])
        Recv("127.0.0.1:1,127.0.0.1:1", [a])
    serv_op = main.global_block().ops[0]
    assert serv_op.type == "listen_and_serv" and serv_op.input("X") == ["X"]
    assert serv_op.attr("Fanin") == 2 and serv_op.attr("distributed_mode") == 0
    assert serv_op.attr("endpoint") == "127.0.0.1:6170"
    assert [op.type for op in main.block(1).ops] == ["scale"]
    types = [op.type for op in main.global_block().ops[1:]]
    assert types == ["send", "send", "send_barrier", "recv", "fetch_barrier"]
    first, second = main.global_block().ops[1:3]
    assert first.attr("epmap") == ["127.0.0.1:1", "127.0.0.1:2"]
    assert second.attr("epmap") == ["127.0.0.1:1"]
    recv = main.global_block().ops[4]
    assert recv.attr("epmap") == ["127.0.0.1:1", "127.0.0.1:1"]
    assert main.global_block().ops[5].attr("endpoints") == ["127.0.0.1:1"]  # each once


def test_get_params_and_grads_reads_the_block_being_built():
    main = fluid.Program()
    with fluid.program_guard(main):
        serv = ListenAndServ("127.0.0.1:6170", ["X"], optimizer_mode=False)
        with serv.do():
            x = fluid.layers.data("X", [3], dtype="float32", append_batch_size=False)
            fluid.layers.scale(x, scale=2.0)
            params, grads = serv.get_params_and_grads()
    assert [p.name for p in params] == ["X"] and [g.name for g in grads] == ["X"]


def test_scale_into_an_existing_variable_and_unknown_variable_keywords():
    main = fluid.Program()
    with fluid.program_guard(main):
        # fluid's Variable ignores a keyword it does not know (Paddle's tests misspell one)
        out = main.global_block().create_var(name="out", psersistable=True, dtype="float32",
                                             shape=[2])
        x = fluid.layers.data("x", [2], dtype="float32", append_batch_size=False)
        ret = ops._scale(x=x, scale=3.0, out=out)
    assert ret is out and not out.persistable
    got, = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": np.array([1.0, -2.0], np.float32)}, fetch_list=[out],
        scope=fluid.Scope())
    np.testing.assert_allclose(got, [3.0, -6.0])


def test_bad_arguments_are_refused():
    with fluid.program_guard(fluid.Program()):
        with pytest.raises(ValueError, match="ip:port"):
            ListenAndServ("6170", ["X"])
        with pytest.raises(ValueError, match="fan_in"):
            ListenAndServ("127.0.0.1:6170", ["X"], fan_in=0)
        a = fluid.layers.data("A", [3], dtype="float32", append_batch_size=False)
        with pytest.raises(TypeError, match="send_vars"):
            Send("127.0.0.1:1", a)
        with pytest.raises(TypeError, match="get_vars"):
            Recv("127.0.0.1:1", a)
