"""Comparison, logical, isfinite/isinf/isnan, allclose and bool-reduce ops: forward against
numpy (they have no gradient, as in fluid)."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward

from spmd.core import Program
from spmd.errors import InvalidArgumentError, NotFoundError
from spmd.ops import get_op_def

A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
B = np.array([[1.0, 0.0, 3.0], [5.0, 5.0, 0.0]])
P = np.array([[True, False, True], [False, False, True]])
Q = np.array([[True, True, False], [False, True, True]])

CASES = [
    OpCase(op, {"X": A, "Y": B}, lambda X, Y, _f=f, **a: {"Out": _f(X, Y)}, name=op)
    for op, f in [("less_than", np.less), ("less_equal", np.less_equal),
                  ("greater_than", np.greater), ("greater_equal", np.greater_equal),
                  ("equal", np.equal), ("not_equal", np.not_equal)]
]
CASES += [
    OpCase("less_than", {"X": A, "Y": np.array([2.0, 5.0])}, attrs={"axis": 0},
           name="less_than_axis0", ref=lambda X, Y, **a: {"Out": X < Y.reshape(2, 1)}),
    OpCase("equal", {"X": A.astype("int64"), "Y": B.astype("int64")}, name="equal_int",
           ref=lambda X, Y, **a: {"Out": X == Y}),
    OpCase("logical_and", {"X": P, "Y": Q}, lambda X, Y: {"Out": X & Y}),
    OpCase("logical_or", {"X": P, "Y": Q}, lambda X, Y: {"Out": X | Y}),
    OpCase("logical_xor", {"X": P, "Y": Q}, lambda X, Y: {"Out": X ^ Y}),
    OpCase("logical_not", {"X": P}, lambda X: {"Out": ~X}),
    OpCase("isfinite", {"X": A}, lambda X: {"Out": np.array([True])}),
    OpCase("isfinite", {"X": np.array([1.0, np.inf])}, name="isfinite_inf",
           ref=lambda X: {"Out": np.array([False])}),
    OpCase("isinf", {"X": np.array([1.0, -np.inf])}, lambda X: {"Out": np.array([True])}),
    OpCase("isnan", {"X": np.array([1.0, 2.0])}, lambda X: {"Out": np.array([False])}),
    OpCase("isnan", {"X": np.array([1.0, np.nan])}, name="isnan_nan",
           ref=lambda X: {"Out": np.array([True])}),
    OpCase("allclose", {"Input": A, "Other": A + 1e-9}, name="allclose_true",
           ref=lambda Input, Other, **a: {"Out": np.array([True])}),
    OpCase("allclose", {"Input": A, "Other": A + 1e-3}, attrs={"rtol": 1e-5, "atol": 1e-8},
           name="allclose_false", ref=lambda Input, Other, **a: {"Out": np.array([False])}),
    OpCase("allclose", {"Input": np.array([np.nan]), "Other": np.array([np.nan])},
           attrs={"equal_nan": True}, name="allclose_nan",
           ref=lambda Input, Other, **a: {"Out": np.array([True])}),
    OpCase("reduce_all", {"X": P}, attrs={"dim": [1]},
           ref=lambda X, **a: {"Out": X.all(axis=1)}),
    OpCase("reduce_any", {"X": P}, attrs={"dim": [0], "keep_dim": True},
           ref=lambda X, **a: {"Out": X.any(axis=0, keepdims=True)}),
    OpCase("reduce_all", {"X": P}, attrs={"reduce_all": True}, name="reduce_all_all",
           ref=lambda X, **a: {"Out": np.array([X.all()])}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_logic_op(case):
    check_forward(case, "float64")
    check_forward(case, "float32")


@pytest.mark.parametrize("op", ["less_than", "equal", "logical_and", "logical_not", "isfinite",
                                "allclose", "reduce_any"])
def test_no_gradient(op):
    assert get_op_def(op).grad is None
    with pytest.raises(NotFoundError):
        get_op_def(op + "_grad")


def test_logical_ops_reject_non_bool():
    block = Program().global_block()
    x = block.create_var(name="x", shape=[2], dtype="float32")
    y = block.create_var(name="y", shape=[2], dtype="float32")
    with pytest.raises(InvalidArgumentError, match="bool"):
        block.append_op("logical_and", {"X": [x], "Y": [y]}, {"Out": [block.create_var(
            name="o")]})
    with pytest.raises(InvalidArgumentError, match="bool"):
        block.append_op("reduce_all", {"X": [x]}, {"Out": [block.create_var(name="p")]})


def test_compare_gives_bool():
    block = Program().global_block()
    x = block.create_var(name="x", shape=[2, 3], dtype="float32")
    out = block.create_var(name="o")
    block.append_op("greater_than", {"X": [x], "Y": [x]}, {"Out": [out]})
    assert out.dtype == "bool" and tuple(out.shape) == (2, 3)
