"""Index ops through the op harness: forward vs numpy, gradients vs finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, check_op, rand

from spmd.kernels.xxhash import xxh64

I64 = np.int64
ND_INDEX = np.array([[1, 2], [0, 0], [1, 2]], I64)


def _scatter_nd_ref(X, Index, Updates):
    out = X.copy()
    np.add.at(out, tuple(Index[..., j] for j in range(Index.shape[-1])), Updates)
    return {"Out": out}


def _scatter_ref(X, Ids, Updates, overwrite):
    out = X.copy()
    if overwrite:
        out[Ids] = Updates
    else:
        out[Ids] = 0
        np.add.at(out, Ids, Updates)
    return {"Out": out}


CASES = [
    OpCase("argsort", {"X": rand(3, 4)}, attrs={"axis": 1, "descending": True},
           grad_outputs=["Out"], ref=lambda X, **a: {
               "Out": -np.sort(-X, axis=1), "Indices": np.argsort(-X, axis=1)}),
    OpCase("gather_nd", {"X": rand(2, 3, 4), "Index": ND_INDEX},
           ref=lambda X, Index: {"Out": X[Index[:, 0], Index[:, 1]]}),
    OpCase("index_sample", {"X": rand(2, 4), "Index": np.array([[0, 3, 3], [1, 1, 2]], I64)},
           ref=lambda X, Index: {"Out": np.take_along_axis(X, Index, 1)}),
    OpCase("index_select", {"X": rand(3, 4), "Index": np.array([3, 0, 3], I64)},
           attrs={"dim": 1}, ref=lambda X, Index, dim: {"Out": X[:, Index]}),
    OpCase("scatter", {"X": rand(4, 2), "Ids": np.array([2, 0], I64), "Updates": rand(2, 2)},
           attrs={"overwrite": True}, ref=_scatter_ref),
    OpCase("scatter", {"X": rand(4, 2), "Ids": np.array([1, 1, 3], I64),
                       "Updates": rand(3, 2)},
           attrs={"overwrite": False}, name="scatter_add", ref=_scatter_ref),
    OpCase("scatter_nd_add", {"X": rand(2, 3, 4), "Index": ND_INDEX, "Updates": rand(3, 4)},
           ref=_scatter_nd_ref),
    OpCase("multiplex", {"Ids": np.array([[1], [0], [1]], "int32"),
                         "X": [rand(3, 2), rand(3, 2)]},
           ref=lambda Ids, X: {"Out": np.stack(X)[Ids[:, 0], np.arange(3)]}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


@pytest.mark.parametrize("case", [
    OpCase("arg_max", {"X": rand(3, 4)}, attrs={"axis": 1},
           ref=lambda X, axis: {"Out": X.argmax(1)}),
    OpCase("arg_min", {"X": rand(3, 4)}, attrs={"axis": 0, "keepdims": True},
           ref=lambda X, **a: {"Out": X.argmin(0)[None]}),
    OpCase("where_index", {"Condition": np.array([[True, False], [True, True]])},
           ref=lambda Condition: {"Out": np.argwhere(Condition)}),
    OpCase("unique_with_counts", {"X": np.array([4, 1, 4, 2], I64)},
           ref=lambda X, **a: {"Out": np.array([4, 1, 2]), "Index": np.array([0, 1, 0, 2]),
                               "Count": np.array([2, 1, 1])}),
    OpCase("shard_index", {"X": np.array([[0], [4], [7]], I64)},
           attrs={"index_num": 8, "nshards": 3, "shard_id": 1},
           ref=lambda X, **a: {"Out": np.array([[-1], [1], [-1]])}),
], ids=str)
def test_forward(case):
    check_forward(case)


def test_xxh64_known_digests():
    # reference digests of the xxHash specification's test vectors
    assert xxh64(b"", 0) == 0xEF46DB3751D8E999
    assert xxh64(b"a", 0) == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc", 0) == 0x44BC2CF5AD770999
    data = bytes(range(100))
    assert xxh64(data, 1) != xxh64(data, 0)
