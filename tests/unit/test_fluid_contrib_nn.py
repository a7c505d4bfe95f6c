"""fluid.contrib.layers' composed layers: fused_elemwise_activation, partial_concat and
partial_sum equal fluid 1.8.5; gradients flow through them (finite differences);
fused_embedding_seq_pool is the summed embedding of each sequence; shuffle_batch permutes the
rows anew each run."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid
from spmd.fluid.contrib import layers as contrib

STORED = load("contrib_nn")  # tests/oracle/make_contrib_nn.py, run in fluid 1.8.5
_MAKER = pathlib.Path(__file__).parents[1] / "oracle" / "make_contrib_nn.py"


def _maker():
    import types

    source = _MAKER.read_text()
    body = source[source.index("rng = np.random"):source.index("if __name__")]
    module = types.ModuleType("make_contrib_nn_body")
    module.__dict__.update(np=np, fluid=fluid)
    exec(compile(body, str(_MAKER), "exec"), module.__dict__)
    return module


def test_values_equal_fluid():
    maker = _maker()
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        outs = maker.build(contrib.fused_elemwise_activation, contrib.partial_concat,
                           contrib.partial_sum)
    names = sorted(outs)
    assert names == sorted(STORED)
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={k: maker.FEED[k] for k in ("x", "y")}, fetch_list=[outs[n] for n in names])
    for name, value in zip(names, got):
        np.testing.assert_allclose(value, STORED[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_gradient_of_fused_and_partial_against_finite_differences():
    rng = np.random.RandomState(0)
    xv = rng.uniform(0.2, 1.0, (3, 4))
    yv = rng.uniform(-1.0, 1.0, (3, 4))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 4], "float64")
        y = fluid.data("y", [3, 4], "float64")
        x.stop_gradient = False
        out = contrib.fused_elemwise_activation(x, y, ["elementwise_mul", "tanh"])
        loss = fluid.layers.reduce_sum(contrib.partial_sum([out, x], 1, 2))
        (grad,) = fluid.gradients(loss, [x])
    exe = fluid.Executor(fluid.CPUPlace())

    def f(xx):
        return float(exe.run(main, feed={"x": xx, "y": yv}, fetch_list=[loss])[0])

    g = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[grad])[0]
    num = np.zeros_like(xv)
    for idx in np.ndindex(*xv.shape):
        d = np.zeros_like(xv)
        d[idx] = 1e-6
        num[idx] = (f(xv + d) - f(xv - d)) / 2e-6
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-7)


def test_fused_embedding_seq_pool_sums_each_sequence():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.data("ids", [None, 1], "int64", lod_level=1)
        out = contrib.fused_embedding_seq_pool(ids, [10, 3],
                                               param_attr=fluid.ParamAttr(name="emb"))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    table = np.arange(30, dtype="float32").reshape(10, 3)
    with fluid.scope_guard(scope):
        exe.run(startup)
        scope.find_var("emb").get_tensor().set(table, fluid.CPUPlace())
        feed = fluid.create_lod_tensor(np.array([[1], [4], [7]], "int64"), [[2, 1]],
                                       fluid.CPUPlace())
        got = exe.run(main, feed={"ids": feed}, fetch_list=[out])[0]
    np.testing.assert_array_equal(got, [table[1] + table[4], table[7]])
    with pytest.raises(ValueError, match="combiner"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            contrib.fused_embedding_seq_pool(ids, [10, 3], combiner="mean")


def test_shuffle_batch_permutes_rows_each_run():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        out = contrib.shuffle_batch(x, seed=1)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = np.arange(40, dtype="float32").reshape(20, 2)
    runs = [exe.run(main, feed={"x": xv}, fetch_list=[out])[0] for _ in range(2)]
    for r in runs:
        assert sorted(map(tuple, r)) == sorted(map(tuple, xv))
    assert not np.array_equal(runs[0], xv) and not np.array_equal(runs[0], runs[1])


def test_fused_functor_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 2], "float32")
        with pytest.raises(ValueError, match="length should be 2"):
            contrib.fused_elemwise_activation(x, x, ["relu"])
        with pytest.raises(ValueError, match="elementwise_add or elementwise_mul"):
            contrib.fused_elemwise_activation(x, x, ["relu", "tanh"])


def test_ctr_metric_bundle_totals_equal_fluid():
    stored = load("ctr_metric")  # tests/oracle/make_ctr_metric.py, run in fluid 1.8.5
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = fluid.data("p", [None, 1], "float32")
        y = fluid.data("y", [None, 1], "float32")
        totals = contrib.ctr_metric_bundle(p, y)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for batch, want in zip(stored["batches"], stored["after"]):
        got = exe.run(main, feed=batch, fetch_list=list(totals))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g).reshape(-1), w.reshape(-1), rtol=1e-5)
