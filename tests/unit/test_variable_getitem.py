"""`x[...]` on a Variable as fluid 1.8.5's Variable.__getitem__: static shape, value and the
gradient of sum(x[...] * w), against stored fluid outputs (tests/oracle/make_getitem.py builds
the same cases) and numpy; refusals name what to use instead."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
import make_getitem as cases  # noqa: E402 - the oracle's own case list, run here in spmd

ORACLE = load("getitem")


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_indexing_matches_fluid(name):
    main, startup, out, grad, shape = cases.build(fluid, name)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    value, dx = exe.run(main, feed={"x": cases.X}, fetch_list=[out, grad], scope=scope)
    want = ORACLE[name]
    assert shape == want["shape"]
    np.testing.assert_array_equal(value, want["value"])
    np.testing.assert_array_equal(dx, want["grad"])
    expected = cases.X[cases.numpy_index(name)]
    np.testing.assert_array_equal(value, expected.reshape(value.shape))


def test_a_step_with_open_bounds_goes_beyond_fluid():
    """fluid 1.8.5 asserts on x[::2]; spmd takes it as numpy does."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4, 6], "float32")
        out = x[:, ::2, 1::3]
    value, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": cases.X}, fetch_list=[out],
                                                   scope=fluid.Scope())
    np.testing.assert_array_equal(value, cases.X[:, ::2, 1::3])


@pytest.mark.parametrize("index,message", [
    ((0, 1, 2, 3), r"4 indices for a Variable of 3 dimensions"),
    ((Ellipsis, 0), r"Ellipsis \(\.\.\.\) and None \(newaxis\) are not supported"),
    ((None,), r"Ellipsis \(\.\.\.\) and None \(newaxis\) are not supported"),
    ((slice(None, 2, -1),), r"a negative step needs both bounds"),
    (("a",), r"index 'a' of dimension 0 is a str"),
])
def test_unsupported_indices_say_what_to_use(index, message):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 4, 6], "float32")
        with pytest.raises(ValueError, match=message + r".*fluid\.layers\.unsqueeze"):
            x[index]


def test_a_variable_is_not_iterable():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3], "float32")
        with pytest.raises(TypeError, match=r"is not iterable.*fluid\.layers\.split"):
            list(x)


def test_numpy_integers_index_as_ints():
    """fluid 1.8.5 takes numpy ints too (x[np.int64(1)], x[:, np.int32(1):np.int32(3)])."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4, 6], "float32")
        outs = [x[np.int64(1)], x[:, np.int64(1):np.int32(3)], x[np.int32(-1)]]
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": cases.X}, fetch_list=outs,
                                               scope=fluid.Scope())
    for value, want in zip(got, [cases.X[1], cases.X[:, 1:3], cases.X[-1]]):
        np.testing.assert_array_equal(value, want)


def test_indexing_outside_the_guard_appends_to_the_variables_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4, 6], "float32")
    row = x[1]  # as fluid 1.8: the slice op goes into x's program
    assert main.global_block().ops[-1].type == "slice"
    value, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": cases.X}, fetch_list=[row],
                                                  scope=fluid.Scope())
    np.testing.assert_array_equal(value, cases.X[1])
