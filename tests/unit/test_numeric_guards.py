"""fluid's numeric guards (issue 8, item 9): softmax clips the max-shifted logits at -64
before exponentiating, so it never returns an exact 0, and cross entropy reports -log(0) as
1e20 instead of inf. Checked against stored outputs of real fluid (PaddlePaddle 1.8.5,
tests/oracle/make_loss.py) on extreme inputs, values and gradients, in float32 and float64.

fluid 1.8's CPU gradient of softmax_with_cross_entropy mishandles ignore_index (it subtracts
1 at the flat offset of the ignored label, outside the row); spmd keeps the exact gradient
(0 for an ignored entry), so the stored cases use labels in range.
"""
from __future__ import annotations

import numpy as np
import pytest
from loss_oracle import ORACLE, assert_matches_fluid
from op_harness import OpCase, run_forward

GUARD_CASES = sorted(n for n in ORACLE if n.startswith(("softmax_", "swce_", "cross_entropy")))


def test_the_guard_cases_are_stored():
    assert len(GUARD_CASES) >= 10


@pytest.mark.parametrize("name", GUARD_CASES)
def test_matches_fluid_at_the_extremes(name):
    # the smallest softmax entries are exp(-64) / sum, about 1e-28: compare them relatively
    assert_matches_fluid(name, rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_is_never_exactly_zero(dtype):
    x = np.array([[0.0, -63.0, -64.0, -65.0, -1e4]], dtype=dtype)
    got = run_forward(OpCase("softmax", {"X": x}, None, outputs={"Out": 1}), dtype)["Out"][0]
    assert (got > 0).all()
    # everything at or below -64 from the max is clipped to the same value
    assert got[0, 2] == got[0, 3] == got[0, 4]
    np.testing.assert_allclose(got[0, 2] / got[0, 0], np.exp(-64.0), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_cross_entropy_loss_is_bounded(dtype):
    logits = np.array([[0.0, 1e6, -1e6], [3e38, -3e38, 0.0]], dtype=dtype)
    label = np.array([[2], [1]], dtype=np.int64)
    case = OpCase("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, None,
                  outputs={"Softmax": 1, "Loss": 1})
    got = run_forward(case, dtype)
    loss = got["Loss"][0]
    assert np.isfinite(loss).all()
    np.testing.assert_allclose(loss, [[64.0], [64.0]], rtol=1e-6)


def test_cross_entropy_of_a_zero_probability_is_1e20_not_inf():
    x = np.array([[0.0, 1.0], [0.5, 0.5]])
    case = OpCase("cross_entropy", {"X": x, "Label": np.array([[0], [1]], dtype=np.int64)},
                  None, outputs={"Y": 1})
    got = run_forward(case)["Y"][0]
    np.testing.assert_allclose(got, [[1e20], [np.log(2.0)]], rtol=1e-12)
    soft = OpCase("cross_entropy", {"X": x, "Label": np.array([[0.5, 0.5], [0.0, 1.0]])},
                  None, attrs={"soft_label": True}, outputs={"Y": 1})
    np.testing.assert_allclose(run_forward(soft)["Y"][0], [[5e19], [np.log(2.0)]],
                               rtol=1e-12)
