"""batch_norm's kernels (spmd/kernels/bn_core.py) on shapes that take each of their paths
(per-row dot products, products in chunks, channel-last rows tiled, few images), in float64
against a float64 evaluation of the formulas and in float32 within a stated tolerance, also
where the mean is far from 0; fused_batch_norm_act bitwise batch_norm then relu on the same
shapes. The small cases, finite differences and fluid's numbers are in test_ops_nn.py,
test_ops_fused.py, test_norm_fluid.py and test_nn_sync_batch_norm.py."""
from __future__ import annotations

import numpy as np
import pytest

from spmd.kernels.registry import run_kernel

GRADS = {"X@GRAD", "Scale@GRAD", "Bias@GRAD"}
FORWARD = {"Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"}
# (shape, layout): rows of one image per channel vector, few images, short runs in chunks,
# channel-last tiled rows and chunks, 2-D, 3-D channel-last
SHAPES = [((8, 6, 9, 7), "NCHW"), ((2, 5, 6, 6), "NCHW"), ((300, 24, 2, 3), "NCHW"),
          ((16, 12, 10, 32), "NHWC"), ((4, 3, 3, 5), "NHWC"), ((70, 9), "NCHW"),
          ((5, 7, 11), "NHWC")]
MODES = {"train": {}, "test": {"is_test": True}, "global": {"use_global_stats": True}}


def _attrs(layout, **kw):
    return {"momentum": 0.9, "epsilon": 1e-5, "data_layout": layout, "is_test": False,
            "use_global_stats": False, "trainable_statistics": False, **kw}


def _inputs(shape, layout, offset=0.0, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1] if layout == "NCHW" or len(shape) == 2 else shape[-1]
    x = rng.standard_normal(shape) * rng.uniform(0.5, 2.0, c).reshape(
        (1, c) + (1,) * (len(shape) - 2) if layout == "NCHW" or len(shape) == 2
        else (1,) * (len(shape) - 1) + (c,)) + offset
    return {"X": x, "Scale": rng.uniform(0.5, 1.5, c), "Bias": rng.uniform(-0.5, 0.5, c),
            "Mean": rng.uniform(-1, 1, c) + offset, "Variance": rng.uniform(0.5, 2.0, c)}, \
        rng.standard_normal(shape)


def _reference(ins, dy, layout, mode, eps=1e-5, momentum=0.9):
    """Every output and gradient in float64, channel axis moved to 1."""
    x = ins["X"] if layout == "NCHW" or ins["X"].ndim == 2 else np.moveaxis(ins["X"], -1, 1)
    d = dy if layout == "NCHW" or dy.ndim == 2 else np.moveaxis(dy, -1, 1)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    cs = [1] * x.ndim
    cs[1] = -1
    glob = mode != "train"
    mean = ins["Mean"] if glob else x.mean(axis=axes)
    var = ins["Variance"] if glob else x.var(axis=axes)
    inv = 1 / np.sqrt(var + eps)
    xhat = (x - mean.reshape(cs)) * inv.reshape(cs)
    y = xhat * ins["Scale"].reshape(cs) + ins["Bias"].reshape(cs)
    dbias, dscale = d.sum(axis=axes), (d * xhat).sum(axis=axes)
    k = (ins["Scale"] * inv).reshape(cs)
    m = x.size // x.shape[1]
    dx = k * d if glob else k * (d - (dbias.reshape(cs) + xhat * dscale.reshape(cs)) / m)
    back = (lambda a: a) if layout == "NCHW" or x.ndim == 2 else (
        lambda a: np.moveaxis(a, 1, -1))
    out = {"Y": back(y), "X@GRAD": back(dx), "Scale@GRAD": dscale, "Bias@GRAD": dbias,
           "SavedMean": mean, "SavedVariance": inv}
    if not glob:
        out["MeanOut"] = ins["Mean"] * momentum + mean * (1 - momentum)
        out["VarianceOut"] = ins["Variance"] * momentum + var * (1 - momentum)
    return out


def _run(ins, dy, layout, mode, dtype):
    attrs = _attrs(layout, **MODES[mode])
    ins = {s: v.astype(dtype) for s, v in ins.items()}
    fwd = run_kernel("batch_norm", np, ins, attrs, FORWARD)
    grad_ins = dict(ins, SavedMean=fwd["SavedMean"], SavedVariance=fwd["SavedVariance"],
                    **{"Y@GRAD": dy.astype(dtype)})
    return {**fwd, **run_kernel("batch_norm_grad", np, grad_ins, attrs, GRADS)}


def _rel_error(got, want):
    """max |got - want| over max |want| (values near zero count at the array's scale)."""
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("shape,layout", SHAPES, ids=str)
def test_float64_equals_the_formulas(shape, layout, mode):
    ins, dy = _inputs(shape, layout)
    got = _run(ins, dy, layout, mode, "float64")
    for slot, want in _reference(ins, dy, layout, mode).items():
        assert got[slot].dtype == np.float64 and got[slot].shape == want.shape, slot
        np.testing.assert_allclose(got[slot], want, rtol=1e-10, atol=1e-10, err_msg=slot)


# float32 against float64, relative to each array's largest value: a few float32 roundings
# (sums in another order, per-channel coefficients rounded once; worst seen 2e-7), more where
# the mean is 30 standard deviations from 0 (X - mean loses about eps * |mean| / std there;
# worst seen 1.3e-5, Scale@GRAD, as the kernels before bn_core.py: 1.4e-5)
F32_TOL = {0.0: 2e-6, 30.0: 5e-5}


@pytest.mark.parametrize("offset", sorted(F32_TOL))
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("shape,layout", SHAPES, ids=str)
def test_float32_within_tolerance(shape, layout, mode, offset):
    ins, dy = _inputs(shape, layout, offset)
    x32 = ins["X"].astype(np.float32).astype(np.float64)  # the float32 X, exactly
    ref = _reference(dict(ins, X=x32), dy.astype(np.float32).astype(np.float64), layout, mode)
    got = _run(ins, dy, layout, mode, "float32")
    for slot, want in ref.items():
        assert got[slot].dtype == np.float32, slot
        err = _rel_error(got[slot].astype(np.float64), want)
        assert err < F32_TOL[offset], (slot, err)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,layout", SHAPES, ids=str)
def test_fused_batch_norm_act_is_bitwise_batch_norm_then_relu(shape, layout, dtype):
    ins, dout = _inputs(shape, layout, offset=0.3)
    ins = {s: v.astype(dtype) for s, v in ins.items()}
    dout = dout.astype(dtype)
    attrs = _attrs(layout)
    bn = run_kernel("batch_norm", np, ins, attrs, FORWARD)
    y = np.maximum(bn["Y"], 0)  # relu's kernel
    fused = run_kernel("fused_batch_norm_act", np, ins,
                       {"momentum": 0.9, "epsilon": 1e-5, "data_layout": layout,
                        "act_type": "relu"}, FORWARD)
    for slot in FORWARD:
        np.testing.assert_array_equal(fused[slot], y if slot == "Y" else bn[slot], slot)
    grad_ins = dict(ins, Y=y, SavedMean=bn["SavedMean"], SavedVariance=bn["SavedVariance"])
    dy = dout * (y > 0)  # relu_grad's kernel
    plain = run_kernel("batch_norm_grad", np, dict(grad_ins, **{"Y@GRAD": dy}), attrs, GRADS)
    got = run_kernel("fused_batch_norm_act_grad", np, dict(grad_ins, **{"Y@GRAD": dout}),
                     {"momentum": 0.9, "epsilon": 1e-5, "data_layout": layout,
                      "act_type": "relu"}, GRADS)
    for slot in GRADS:
        assert got[slot].dtype == plain[slot].dtype, slot
        np.testing.assert_array_equal(got[slot], plain[slot], slot)


def test_gradients_skip_what_is_not_wanted():
    ins, dy = _inputs((4, 3, 5, 5), "NCHW")
    grad_ins = dict(ins, SavedMean=ins["Mean"], SavedVariance=ins["Variance"],
                    **{"Y@GRAD": dy})
    attrs = _attrs("NCHW")
    full = run_kernel("batch_norm_grad", np, grad_ins, attrs, GRADS)
    for want in ({"X@GRAD"}, {"Scale@GRAD"}, {"Bias@GRAD", "Scale@GRAD"}):
        got = run_kernel("batch_norm_grad", np, grad_ins, attrs, want)
        assert set(got) == want
        for slot in want:
            np.testing.assert_array_equal(got[slot], full[slot], slot)
