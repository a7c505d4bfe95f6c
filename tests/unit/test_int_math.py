"""Integer Variables under Python operators and the integer math kernels, against stored
outputs of real fluid (PaddlePaddle 1.8.5, tests/oracle/make_intmath.py): `/` and `**` stay
integer (truncated toward zero), `int_var * 2.5` is refused, mixed dtypes cast the right operand
to the left one's dtype, reduce_mean of ints truncates.

Where fluid fails, spmd raises InvalidArgumentError (a clear message instead of fluid's
AssertionError or run-time EnforceNotMet), except `2 / int_var` with a batch dim: fluid 1.8.5
makes the batch-size-like constant float32 and its elementwise_div then fails at run time;
spmd makes it in the Variable's dtype and gives the integer quotient fluid gives without a
batch dim (a documented decision, spmd/layers/math_op_patch.py)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_intmath import CASES, FEEDS, declare
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError

ORACLE = load("intmath")
DIVERGES = {"batch_rdiv_int"}  # fluid's bug, see the module docstring


def _run(build):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        fetch = build(fluid.layers, declare(fluid))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(prog, feed=FEEDS, fetch_list=fetch)


def _check(name, got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape} != fluid's {w.shape}"
        assert g.dtype == w.dtype, f"{name}[{i}]: dtype {g.dtype} != fluid's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=f"{name}[{i}]")


@pytest.mark.parametrize("name", sorted(set(CASES) - DIVERGES))
def test_matches_fluid(name):
    want = ORACLE[name]
    if isinstance(want, dict):  # fluid refused it: spmd too, when building or running
        with pytest.raises((InvalidArgumentError, ExecutionError), match="integer|zero"):
            _run(CASES[name])
        return
    _check(name, _run(CASES[name]), want)


def test_rdiv_int_with_batch_dim_gives_fluids_integer_quotient():
    assert ORACLE["batch_rdiv_int"] == {"error": "EnforceNotMet"}  # what fluid 1.8.5 did
    (got,) = _run(CASES["batch_rdiv_int"])
    ab = FEEDS["ab"]
    want = np.trunc(2 / ab).astype("int64")  # as fluid's 2 / int_var without a batch dim
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("expr, match", [
    (lambda a: a * 2.5, "not an integer"),
    (lambda a: 2.5 - a, "not an integer"),
    (lambda a: a / 0, "division by zero"),
    (lambda a: a / 0.5, "division by zero"),
])
def test_int_operator_errors_say_what_to_do(expr, match):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        a = fluid.data("a", [3], "int64")
        with pytest.raises(InvalidArgumentError, match=match):
            expr(a)
