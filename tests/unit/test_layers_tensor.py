"""fluid.layers tensor creation / manipulation / indexing builders against stored outputs of
real fluid (PaddlePaddle 1.8.5, tests/oracle/make_tensor.py), plus builder-level checks."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_tensor import CASES, _f
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("tensor")


def _run(build, feeds):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
        fetch = build(fluid.layers, vs)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(prog, feed=feeds, fetch_list=fetch)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    feed_name, build = CASES[name]
    got = _run(build, _f(feed_name))
    want = ORACLE[name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape} != fluid's {w.shape}"
        assert g.dtype == w.dtype, f"{name}[{i}]: dtype {g.dtype} != fluid's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"{name}[{i}]")


def test_builder_errors_name_the_problem():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [3, 4], "float32")
        with pytest.raises(InvalidArgumentError, match="float32, int32 or int64"):
            fluid.layers.assign(np.zeros(2, "float64"))
        with pytest.raises(InvalidArgumentError, match="rank >= 2"):
            fluid.layers.tril(fluid.data("v", [3], "float32"))
        with pytest.raises(InvalidArgumentError, match="mode"):
            fluid.layers.pad2d(x, mode="wrap")
        with pytest.raises(InvalidArgumentError, match="shard_id"):
            fluid.layers.shard_index(fluid.data("i", [2, 1], "int64"), 8, 2, 2)
        with pytest.raises(InvalidArgumentError, match="pass num"):
            fluid.layers.unstack(fluid.data("u", [-1, 2], "float32"))


def test_fill_constant_writes_out_and_keeps_int64_exact():
    big = 2 ** 53 + 1
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        out = fluid.layers.create_tensor("int64")
        res = fluid.layers.fill_constant([2], "int64", big, force_cpu=True, out=out)
    assert res is out
    (got,) = fluid.Executor(fluid.CPUPlace()).run(prog, fetch_list=[out])
    assert got.tolist() == [big, big]


def test_paddle_gather_sums_the_gradients_of_repeated_indices():
    """paddle 2.x's gather (overwrite=False); fluid 1.8's layers.gather keeps the last."""
    import spmd as paddle

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 2], "float32")
        x.stop_gradient = False
        index = fluid.data("i", [3], "int64")
        grads = [fluid.backward.gradients(fluid.layers.reduce_sum(out), [x])[0]
                 for out in (paddle.gather(x, index), fluid.layers.gather(x, index))]
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": np.ones((3, 2), "float32"), "i": np.array([1, 1, 0])},
        fetch_list=grads, scope=fluid.Scope())
    np.testing.assert_array_equal(got[0], [[1, 1], [2, 2], [0, 0]])
    np.testing.assert_array_equal(got[1], [[1, 1], [1, 1], [0, 0]])
