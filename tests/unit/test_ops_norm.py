"""group_norm, instance_norm and lrn: forward against numpy loops, gradients against finite
differences."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.op_harness import OpCase, check_op, rand


def group_norm_ref(X, Scale=None, Bias=None, groups=1, epsilon=1e-5, **_):
    n, c = X.shape[:2]
    y = np.zeros_like(X)
    mean, var = np.zeros((n, groups)), np.zeros((n, groups))
    per = c // groups
    for b, g in itertools.product(range(n), range(groups)):
        block = X[b, g * per:(g + 1) * per]
        mean[b, g], var[b, g] = block.mean(), block.var()
        y[b, g * per:(g + 1) * per] = (block - mean[b, g]) / np.sqrt(var[b, g] + epsilon)
    shape = (1, c) + (1,) * (X.ndim - 2)
    if Scale is not None:
        y = y * Scale.reshape(shape)
    if Bias is not None:
        y = y + Bias.reshape(shape)
    return {"Y": y, "Mean": mean, "Variance": var}


def instance_norm_ref(X, Scale=None, Bias=None, epsilon=1e-5, **_):
    r = group_norm_ref(X, Scale, Bias, X.shape[1], epsilon)
    return {"Y": r["Y"], "SavedMean": r["Mean"].reshape(-1),
            "SavedVariance": 1 / np.sqrt(r["Variance"].reshape(-1) + epsilon)}


def lrn_ref(X, n=5, k=2.0, alpha=1e-4, beta=0.75, **_):
    c = X.shape[1]
    mid = np.full_like(X, k)
    for ch in range(c):
        for j in range(ch - (n - 1) // 2, ch - (n - 1) // 2 + n):
            if 0 <= j < c:
                mid[:, ch] += alpha * X[:, j] ** 2
    return {"Out": X * mid ** -beta, "MidOut": mid}


CASES = [
    OpCase("group_norm", {"X": rand(2, 4, 3, 2), "Scale": rand(4), "Bias": rand(4)},
           group_norm_ref, attrs={"groups": 2}, grad_outputs=["Y"], fp32_rtol=1e-3),
    # forward only: without Scale the gradient is fluid 1.8's, which is not the derivative
    # (it drops -mean(dY) / sigma); tests/unit/test_norm_fluid.py checks it against fluid
    OpCase("group_norm", {"X": rand(2, 6, 3)}, group_norm_ref, attrs={"groups": 3,
                                                                     "epsilon": 1e-3},
           grad=[], name="group_norm_no_affine_3d", fp32_rtol=1e-3),
    OpCase("group_norm", {"X": rand(2, 6, 3), "Scale": rand(6)}, group_norm_ref,
           attrs={"groups": 2}, grad_outputs=["Y"], name="group_norm_scale_only",
           fp32_rtol=1e-3),
    OpCase("instance_norm", {"X": rand(2, 3, 2, 3), "Scale": rand(3), "Bias": rand(3)},
           instance_norm_ref, grad_outputs=["Y"], fp32_rtol=1e-3),
    OpCase("lrn", {"X": rand(2, 6, 2, 2)}, lrn_ref, attrs={"n": 3, "k": 1.0, "alpha": 0.3,
                                                           "beta": 0.75},
           grad_outputs=["Out"]),
    OpCase("lrn", {"X": rand(1, 4, 2, 3)}, lrn_ref, name="lrn_defaults", grad_outputs=["Out"]),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


def spectral_norm_ref(Weight, U, V, dim=0, power_iters=1, eps=1e-12, **_):
    mat = np.moveaxis(Weight, dim, 0).reshape(Weight.shape[dim], -1)
    u, v = U.copy(), V.copy()
    for _ in range(power_iters):
        v = mat.T @ u
        v /= np.linalg.norm(v) + eps
        u = mat @ v
        u /= np.linalg.norm(u) + eps
    return {"Out": Weight / (u @ mat @ v)}


def test_spectral_norm():
    # forward only: the gradient is fluid 1.8's formula, not the derivative of W / sigma;
    # tests/unit/test_norm_fluid.py checks it against stored fluid outputs
    check_op(OpCase("spectral_norm", {"Weight": rand(3, 2, 2), "U": rand(2), "V": rand(6)},
                    spectral_norm_ref, attrs={"dim": 1, "power_iters": 30}, grad=[]))
    check_op(OpCase("spectral_norm", {"Weight": rand(3, 4), "U": rand(3), "V": rand(4)},
                    spectral_norm_ref, attrs={"power_iters": 1}, grad=[]))


def data_norm_ref(X, BatchSize, BatchSum, BatchSquareSum, scale_w=None, bias=None,
                  slot_dim=-1, enable_scale_and_shift=False, **_):
    means = BatchSum / BatchSize
    scales = np.sqrt(BatchSize / BatchSquareSum)
    y = np.zeros_like(X)
    for i, j in itertools.product(*[range(s) for s in X.shape]):
        if slot_dim > 0 and abs(X[i, j - j % slot_dim]) < 1e-7:
            continue  # an empty slot
        y[i, j] = (X[i, j] - means[j]) * scales[j]
        if enable_scale_and_shift:
            y[i, j] = y[i, j] * scale_w[j] + bias[j]
    return {"Y": y, "Means": means, "Scales": scales}


def _stats(c):
    return {"BatchSize": rand(c, low=2, high=4), "BatchSum": rand(c),
            "BatchSquareSum": rand(c, low=1, high=3)}


def _slotted():
    x = rand(4, 4)
    x[0, 0] = x[2, 2] = 0.0  # row 0's first slot and row 2's second slot are empty
    return x


DATA_NORM = [
    OpCase("data_norm", {"X": rand(3, 4), **_stats(4)}, data_norm_ref, grad=["X"],
           grad_outputs=["Y"]),
    OpCase("data_norm", {"X": rand(3, 4), **_stats(4), "scale_w": rand(4), "bias": rand(4)},
           data_norm_ref, attrs={"enable_scale_and_shift": True},
           grad=["X", "scale_w", "bias"], grad_outputs=["Y"], name="data_norm_scale_shift"),
    OpCase("data_norm", {"X": _slotted(), **_stats(4), "scale_w": rand(4), "bias": rand(4)},
           data_norm_ref, attrs={"enable_scale_and_shift": True, "slot_dim": 2},
           grad=["scale_w", "bias"], grad_outputs=["Y"], name="data_norm_slots_scaled"),
]


@pytest.mark.parametrize("case", DATA_NORM, ids=str)
def test_data_norm(case):
    check_op(case)


@pytest.mark.parametrize("scaled", [False, True])
def test_data_norm_slot_input_gradient_is_fluids(scaled):
    """Under slot_dim, X's gradient is dy * scales (* scale_w); fluid zeroes the empty slots'
    entries only when it scales and shifts (finite differences cannot check it: an empty
    slot's first value sits on the jump at 0)."""
    from spmd.kernels.registry import run_kernel
    from spmd.ops import get_op_def

    given = {"slot_dim": 2, "enable_scale_and_shift": scaled}
    attrs = get_op_def("data_norm").validate_attrs(given, "test")
    ins = {"X": _slotted(), **_stats(4)}
    if scaled:
        ins.update({"scale_w": rand(4), "bias": rand(4)})
    check_op(OpCase("data_norm", dict(ins), data_norm_ref, attrs=given, grad=[]))
    fwd = run_kernel("data_norm", np, ins, attrs, frozenset(["Y", "Means", "Scales"]))
    dy = rand(4, 4)
    got = run_kernel("data_norm_grad", np, {**ins, "Means": fwd["Means"],
                                            "Scales": fwd["Scales"], "Y@GRAD": dy}, attrs,
                                       frozenset(["X@GRAD"]))
    want = dy * fwd["Scales"]
    if scaled:
        want = want * ins["scale_w"]
        want[0, :2] = want[2, 2:] = 0.0
    np.testing.assert_allclose(got["X@GRAD"], want)
