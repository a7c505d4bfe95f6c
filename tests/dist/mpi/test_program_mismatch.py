"""Ranks that build different programs fail before their first step, every rank naming the
first differing op with each rank's shapes of its variables: here the last rank's hidden layer
is 16 wide where the others' is 32 (at one rank there is nothing to differ from: it trains)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.errors import PreconditionError

pytestmark = pytest.mark.mpi(min_size=1)


def test_a_layer_size_that_differs_is_named_with_both_shapes():
    t = detect()
    hidden = 16 if t.size > 1 and t.rank == t.size - 1 else 32
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 8], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(fluid.layers.fc(x, hidden, act="relu"), 1))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    feed = {"x": np.ones((2, 8), "float32")}
    if t.size == 1:
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
        return
    with pytest.raises(PreconditionError) as caught:
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    message = str(caught.value)
    assert f"[rank {t.rank}/{t.size}] the ranks compiled different programs" in message
    assert "first difference at op #0" in message
    for r in range(t.size):
        width = 16 if r == t.size - 1 else 32
        assert f"rank {r} (" in message and f"fc_0.w_0 [8, {width}] float32" in message
