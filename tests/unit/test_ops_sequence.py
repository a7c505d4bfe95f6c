"""Sequence ops against numpy references and finite-difference gradients (float64), with LoD
inputs: empty sequences, one-row sequences and two-level LoD included."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op_harness import OpCase, check_op, rand


def _pool_ref(pooltype, pad_value=0.0):
    def ref(X, lod, **attrs):
        offsets = np.concatenate([[0], np.cumsum(lod["X"][-1])])
        rows, index = [], []
        for a, b in zip(offsets[:-1], offsets[1:]):
            part = X[a:b]
            if b == a:
                rows.append(np.full(X.shape[1:], pad_value))
                index.append(np.zeros(X.shape[1:], np.int32))
                continue
            index.append((part.argmax(axis=0) + a).astype(np.int32))
            rows.append({"SUM": part.sum(0), "AVERAGE": part.mean(0),
                         "SQRT": part.sum(0) / np.sqrt(b - a), "MAX": part.max(0),
                         "FIRST": part[0], "LAST": part[-1]}[pooltype])
        out = {"Out": np.stack(rows)}
        if pooltype == "MAX":
            out["MaxIndex"] = np.stack(index)
        return out
    return ref


POOL_CASES = [
    OpCase("sequence_pool", {"X": rand(7, 3)}, _pool_ref(t), {"pooltype": t},
           lod={"X": [[2, 1, 4]]}, name=f"pool_{t.lower()}")
    for t in ("SUM", "AVERAGE", "SQRT", "MAX", "FIRST", "LAST")
] + [
    OpCase("sequence_pool", {"X": rand(5, 2, 2)}, _pool_ref("SUM", 0.5),
           {"pooltype": "SUM", "pad_value": 0.5}, lod={"X": [[3, 0, 2]]},
           name="pool_empty_sequence_padded"),
    OpCase("sequence_pool", {"X": rand(6, 2)}, _pool_ref("AVERAGE"), {"pooltype": "AVERAGE"},
           lod={"X": [[2, 1], [1, 2, 3]]}, out_lod={"Out": [[2, 1]]}, name="pool_two_levels"),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_sequence_pool(case):
    if case.attrs["pooltype"] == "MAX":
        case.outputs = {"Out": 1, "MaxIndex": 1}
    check_op(case)
