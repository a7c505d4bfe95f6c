"""Math ops through the op harness: forward vs numpy, gradients vs finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_op, rand, rand_away_from

CASES = [
    OpCase("mul", {"X": rand(4, 3), "Y": rand(3, 5)}, lambda X, Y, **a: {"Out": X @ Y}),
    OpCase("mul", {"X": rand(2, 3, 4), "Y": rand(12, 5)}, name="mul_flatten",
           attrs={"x_num_col_dims": 1},
           ref=lambda X, Y, **a: {"Out": X.reshape(2, 12) @ Y}),
    OpCase("elementwise_add", {"X": rand(2, 3, 4), "Y": rand(3)}, attrs={"axis": 1},
           name="add_axis1", ref=lambda X, Y, axis: {"Out": X + Y.reshape(1, 3, 1)}),
    OpCase("elementwise_add", {"X": rand(2, 3), "Y": rand(2, 3)}, name="add_same",
           ref=lambda X, Y, **a: {"Out": X + Y}),
    OpCase("relu", {"X": rand_away_from(3, 4)}, lambda X: {"Out": np.maximum(X, 0)}),
    OpCase("mean", {"X": rand(3, 4)}, lambda X: {"Out": np.array([X.mean()])}),
    OpCase("sum", {"X": [rand(2, 3), rand(2, 3), rand(2, 3)]},
           lambda X: {"Out": X[0] + X[1] + X[2]}),
    OpCase("scale", {"X": rand(2, 3)}, attrs={"scale": 2.5, "bias": 0.5},
           ref=lambda X, scale, bias: {"Out": X * scale + bias}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)
