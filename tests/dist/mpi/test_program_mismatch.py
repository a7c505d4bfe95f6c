"""Ranks that build different programs fail before their first step, every rank with the same
error naming the first differing op (or variable) and each rank's value of the first field that
differs; nobody hangs. The last rank builds something different: a layer size, an activation,
one more op at the end, one more variable, another shape of a variable no op uses. At one rank
there is nothing to differ from: it trains."""
from __future__ import annotations

import re

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.errors import PreconditionError

pytestmark = pytest.mark.mpi(min_size=1)


def _build(differs: str, odd: bool):
    """The model; `odd` (the last rank) changes what `differs` names."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 8], "float32")
        hidden = 16 if odd and differs == "size" else 32
        act = "tanh" if odd and differs == "activation" else "relu"
        loss = fluid.layers.mean(fluid.layers.fc(fluid.layers.fc(x, hidden, act=act), 1))
        fluid.optimizer.SGD(0.1).minimize(loss)
        if odd and differs == "extra-op":
            fluid.layers.scale(loss, 2.0)
        if odd and differs == "extra-variable":
            main.global_block().create_var(name="zz_unused", shape=[3], dtype="float32")
        if differs == "unused-variable-shape":  # a variable no op reads or writes
            main.global_block().create_var(name="zz_unused", shape=[4 if odd else 3],
                                           dtype="float32")
    return main, startup, loss


def _expected(differs: str, size: int) -> str:
    """A regular expression for the summary every rank's error holds."""
    last = size - 1
    others = "rank 0 has" if size == 2 else f"ranks 0-{last - 1} have"
    return {
        "size": rf"op #0 mul: {others} Y=fc_0\.w_0 \[8, 32\] float32, rank {last} has "
                rf"Y=fc_0\.w_0 \[8, 16\] float32\.",
        "activation": rf"op #2: {others} type relu, rank {last} has type tanh\.",
        "extra-op": rf"op #(\d+): {others} no op #\1 \(\1 ops in all\), rank {last} has "
                    rf"type scale\.",
        "extra-variable": rf"variable #(\d+) \(in name order\): {others} no variable #\1 "
                          rf"\(\1 variables in all\), rank {last} has name=zz_unused\.",
        "unused-variable-shape": rf"variable zz_unused: {others} shape=\[3\], rank {last} has "
                                 rf"shape=\[4\]\.",
    }[differs]


@pytest.mark.parametrize("differs", ["size", "activation", "extra-op", "extra-variable",
                                     "unused-variable-shape"])
def test_the_first_difference_is_named_with_every_ranks_value(differs):
    t = detect()
    main, startup, loss = _build(differs, odd=t.size > 1 and t.rank == t.size - 1)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    feed = {"x": np.ones((2, 8), "float32")}
    if t.size == 1:
        value, = exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
        assert np.isfinite(value).all()
        return
    with pytest.raises(PreconditionError) as caught:
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    message = str(caught.value)
    assert message.startswith(f"[rank {t.rank}/{t.size}] the ranks compiled different "
                              f"programs, so their collectives would not match: first "
                              f"difference at ")
    assert re.search(_expected(differs, t.size), message), message
    if differs == "size":  # and the listing: each distinct op once, with the ranks holding it
        lines = message.split("The first differing op on each rank:\n")[1].splitlines()
        others = "rank 0" if t.size == 2 else f"ranks 0-{t.size - 2}"
        assert lines == [
            f"    {others}: mul(X=x [-1, 8] float32, Y=fc_0.w_0 [8, 32] float32) -> "
            f"Out=fc_0.tmp_0 [-1, 32] float32; x_num_col_dims=1, y_num_col_dims=1",
            f"    rank {t.size - 1}: mul(X=x [-1, 8] float32, Y=fc_0.w_0 [8, 16] float32) -> "
            f"Out=fc_0.tmp_0 [-1, 16] float32; x_num_col_dims=1, y_num_col_dims=1"]

