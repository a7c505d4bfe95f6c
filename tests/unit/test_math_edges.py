"""Edge cases of the elementwise, reduce and normalization layers against stored outputs of
real fluid (PaddlePaddle 1.8.5, tests/oracle/make_edges.py): fluid's axis broadcasting, X
broadcast against a larger Y, reductions over negative, repeated and all dims with keep_dim,
integer reductions, layer_norm / instance_norm (with gradients), lrn, data_norm. Where fluid
refuses a case spmd raises InvalidArgumentError.

Two fluid 1.8.5 answers are garbage, and spmd does not follow them: a reduction naming every
dim explicitly (fluid never writes Out: zeros, or values that are not even elements of X, from
stale memory; spmd reduces everything, as with dim=None), and a dim named twice (spmd refuses
it)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_edges import CASES, FEEDS, declare, names
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError

ORACLE = load("edges")
X3 = FEEDS["x3"]
# (case, output index) -> spmd's answer where fluid's stored one is garbage (see above)
FLUID_GARBAGE = {("reduce_dims", 2): X3.max().reshape(1),
                 ("reduce_dims", 3): X3.min().reshape(1, 1, 1),
                 ("reduce_every_dim_named", 0): X3.sum(dtype="float32").reshape(1),
                 ("reduce_every_dim_named", 1): X3.mean(dtype="float32").reshape(1),
                 ("reduce_every_dim_named", 2): X3.sum(dtype="float32").reshape(1, 1, 1)}


def _run(build):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        fetch = build(fluid, declare(fluid))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(prog, feed=FEEDS, fetch_list=fetch)


@pytest.mark.parametrize("name", sorted(set(CASES) - {"reduce_repeated_dim"}))
def test_matches_fluid(name):
    want = ORACLE[name]
    if isinstance(want, dict):  # fluid refused it
        with pytest.raises((InvalidArgumentError, ExecutionError)):
            _run(CASES[name])
        return
    got = _run(CASES[name])
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        w = FLUID_GARBAGE.get((name, i), w)
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape} != fluid's {w.shape}"
        assert g.dtype == w.dtype, f"{name}[{i}]: dtype {g.dtype} != fluid's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{name}[{i}]")


def test_a_dim_named_twice_is_refused():
    # fluid 1.8.5 returns stale memory here (values of another tensor)
    (got,) = ORACLE["reduce_repeated_dim"]
    assert not np.allclose(got, FEEDS["m"].sum(axis=1))
    with pytest.raises(InvalidArgumentError, match="names an axis twice"):
        _run(CASES["reduce_repeated_dim"])


def test_named_outputs_as_fluid():
    assert names(fluid) == ORACLE["names"]


def test_operator_with_batch_sized_right_operand_aligns_from_dim_0():
    """fluid 1.8.5's `x + y` passes axis=0 when y's first dim is the batch dim: y [N, 3] is
    added to x [N, 3, 4] along its first two dims (numpy broadcasting would refuse it)."""
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [-1, 3, 4], "float32")
        y = fluid.data("y", [-1, 3], "float32")
        out = x + y
    xv = np.ones((2, 3, 4), "float32")
    yv = np.arange(6, dtype="float32").reshape(2, 3)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": xv, "y": yv},
                                                  fetch_list=[out])
    np.testing.assert_array_equal(got, xv + yv[:, :, None])


def test_fluid_never_writes_a_reduction_naming_every_dim():
    # what fluid 1.8.5 stored is whatever memory Out got (here: an element of another
    # tensor, -0.0, nan), never the sum or mean spmd gives
    right = [X3.sum(), X3.mean(), X3.sum()]
    for w, r in zip(ORACLE["reduce_every_dim_named"], right):
        assert not np.allclose(w.ravel(), r, rtol=1e-3)


def test_integer_pow_with_a_negative_factor_says_to_cast():
    """fluid 1.8.5 hangs there; spmd names the fix."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3], "int64")
        out = fluid.layers.pow(x, factor=-1.0)
    with pytest.raises(ExecutionError, match=r"integer X takes a factor >= 0.*cast X to float"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.array([1, 2, 3])},
                                             fetch_list=[out], scope=fluid.Scope())
