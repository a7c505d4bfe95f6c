"""Manipulation and creation ops through the op harness: forward vs numpy, gradients vs
central finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, check_op, rand


def _pad2d_ref(X, paddings, mode, **_):
    pairs = [(0, 0), (0, 0), (paddings[0], paddings[1]), (paddings[2], paddings[3])]
    return {"Out": np.pad(X, pairs, mode=mode)}


def _diag_embed_ref(Input, offset=0, dim1=-2, dim2=-1):
    n = Input.shape[-1] + abs(offset)
    out = np.zeros(Input.shape[:-1] + (n, n))
    for i, v in enumerate(np.moveaxis(Input, -1, 0)):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = v
    return {"Out": out}


CASES = [
    OpCase("crop", {"X": rand(3, 5)}, attrs={"shape": [2, 3], "offsets": [1, 1]},
           ref=lambda X, **a: {"Out": X[1:3, 1:4]}),
    OpCase("crop_tensor", {"X": rand(3, 5)}, attrs={"shape": [-1, 2], "offsets": [1, 2]},
           ref=lambda X, **a: {"Out": X[1:, 2:4]}),
    OpCase("expand", {"X": rand(2, 3)}, attrs={"expand_times": [2, 3]},
           ref=lambda X, **a: {"Out": np.tile(X, [2, 3])}),
    OpCase("expand_as", {"X": rand(2, 1), "target_tensor": rand(4, 3)},
           ref=lambda X, target_tensor: {"Out": np.tile(X, [2, 3])}, grad=["X"]),
    OpCase("flip", {"X": rand(2, 3, 4)}, attrs={"dims": [0, 2]},
           ref=lambda X, dims: {"Out": X[::-1, :, ::-1]}),
    OpCase("reverse", {"X": rand(3, 4)}, attrs={"axis": [1]},
           ref=lambda X, axis: {"Out": X[:, ::-1]}),
    OpCase("roll", {"X": rand(3, 4)}, attrs={"shifts": [1, -2], "dims": [0, 1]},
           ref=lambda X, **a: {"Out": np.roll(X, (1, -2), axis=(0, 1))}),
    OpCase("pad", {"X": rand(2, 3)}, attrs={"paddings": [1, 0, 0, 2], "pad_value": 0.5},
           ref=lambda X, **a: {"Out": np.pad(X, [(1, 0), (0, 2)], constant_values=0.5)}),
    *[OpCase("pad2d", {"X": rand(1, 2, 3, 4)}, name=f"pad2d_{m}",
             attrs={"paddings": [1, 2, 2, 1], "mode": m}, ref=_pad2d_ref)
      for m in ("constant", "reflect", "edge")],
    OpCase("pad_constant_like", {"X": rand(3, 4), "Y": rand(2, 3)}, grad=["Y"],
           attrs={"pad_value": 1.5},
           ref=lambda X, Y, pad_value: {"Out": np.pad(Y, [(0, 1), (0, 1)],
                                                      constant_values=pad_value)}),
    OpCase("stack", {"X": [rand(2, 3), rand(2, 3)]}, attrs={"axis": 1},
           ref=lambda X, axis: {"Y": np.stack(X, axis=1)}),
    OpCase("unstack", {"X": rand(2, 3)}, attrs={"axis": 1, "num": 3},
           ref=lambda X, **a: {"Y": [X[:, i] for i in range(3)]}),
    OpCase("meshgrid", {"X": [rand(2), rand(3)]},
           ref=lambda X: {"Out": list(np.meshgrid(*X, indexing="ij"))}),
    OpCase("strided_slice", {"Input": rand(4, 6)},
           attrs={"axes": [0, 1], "starts": [3, 0], "ends": [0, 6], "strides": [-1, 2]},
           ref=lambda Input, **a: {"Out": Input[3:0:-1, 0:6:2]}),
    OpCase("tril_triu", {"X": rand(2, 3, 4)}, attrs={"diagonal": 1, "lower": False},
           ref=lambda X, **a: {"Out": np.triu(X, 1)}),
    OpCase("tril_triu", {"X": rand(3, 4)}, attrs={"diagonal": -1, "lower": True},
           name="tril", ref=lambda X, **a: {"Out": np.tril(X, -1)}),
    OpCase("diag_embed", {"Input": rand(2, 3)}, attrs={"offset": -1, "dim1": 0, "dim2": 2},
           grad=[],  # no gradient in fluid 1.8 either
           ref=lambda Input, **a: {"Out": np.moveaxis(
               _diag_embed_ref(Input, -1)["Out"], [-2, -1], [0, 2])}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


@pytest.mark.parametrize("case", [
    OpCase("eye", {}, attrs={"num_rows": 2, "num_columns": 3, "dtype": "float64"},
           ref=lambda **a: {"Out": np.eye(2, 3)}),
    OpCase("range", {"Start": np.array([1.0]), "End": np.array([2.0]),
                     "Step": np.array([0.25])}, ref=lambda **a: {"Out": np.arange(1, 2, 0.25)}),
    OpCase("linspace", {"Start": np.array([0.0]), "Stop": np.array([1.0]),
                        "Num": np.array([5], "int32")},
           ref=lambda **a: {"Out": np.linspace(0, 1, 5)}),
    OpCase("diag", {"Diagonal": np.array([1.0, 2.0])},
           ref=lambda Diagonal: {"Out": np.diag(Diagonal)}),
    OpCase("shape", {"Input": rand(2, 3)},
           ref=lambda Input: {"Out": np.array([2, 3], "int32")}),
    OpCase("size", {"Input": rand(2, 3)}, ref=lambda Input: {"Out": np.array([6], "int64")}),
    OpCase("fill_constant_batch_size_like", {"Input": rand(5, 2)},
           attrs={"shape": [-1, 3], "value": 2.0, "dtype": "float64"},
           ref=lambda Input, **a: {"Out": np.full((5, 3), 2.0)}),
], ids=str)
def test_creation_forward(case):
    check_forward(case)
