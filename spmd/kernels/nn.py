"""Kernels: neural-network ops (softmax and losses, conv, pool, normalization, dropout, top_k,
accuracy). Convolution and pooling are in conv.py, imported at the bottom."""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from . import bn_core
from .index import _host, heap_top_k
from .math import unbroadcast
from .registry import kernel

# fluid's TolerableValue: -log(0) is reported as this instead of inf
_APPROX_INF = 1e20
# fluid's softmax (ValueClip) clips the max-shifted logits here before exponentiating, so a
# softmax output is never exactly 0 and -log(softmax) stays below about 64 + log(classes)
_SHIFT_FLOOR = -64.0


def _axis(attrs, ndim: int) -> int:
    return attrs["axis"] % max(ndim, 1)


def _log_softmax(xp, x, axis: int):
    """log(softmax(x)) as fluid computes it: the row max is subtracted (stability) and the
    shifted logits are clipped at -64 (fluid's guard) before exponentiating."""
    with np.errstate(over="ignore"):  # x - max may overflow to -inf: the clip catches it
        shifted = xp.maximum(x - x.max(axis=axis, keepdims=True), _SHIFT_FLOOR)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


@kernel("softmax")
def softmax(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": xp.exp(_log_softmax(xp, x, _axis(attrs, x.ndim))).astype(x.dtype, copy=False)}


@kernel("softmax_grad")
def softmax_grad(xp, ins, attrs, want):
    out, dout = ins["Out"], ins["Out@GRAD"]
    axis = _axis(attrs, out.ndim)
    return {"X@GRAD": out * (dout - (dout * out).sum(axis=axis, keepdims=True))}


def _hard_labels(xp, label, n_classes: int, ignore_index: int, shape):
    """(ids, ignored): the labels reshaped to `shape` with ignored entries replaced by 0 so
    that they can index, and the mask of ignored entries. Out-of-range ids are a user error.
    A float label (a variable fluid.layers.data declared float32, fed int64 class ids, which
    fluid 1.8 runs on as fed) must hold whole numbers."""
    label = label.reshape(shape)
    if label.dtype.kind == "f":
        ids = label.astype("int64")
        if not bool((ids == label).all()):
            raise InvalidArgumentError(
                f"Label is {label.dtype} with fractional values: a hard label holds class ids; "
                f"declare it int64 (fluid.layers.data(..., dtype='int64')) or use "
                f"soft_label=True")
        label = ids
    ignored = label == ignore_index
    safe = xp.where(ignored, 0, label)
    lo, hi = (int(safe.min()), int(safe.max())) if safe.size else (0, 0)
    if lo < 0 or hi >= n_classes:
        raise InvalidArgumentError(
            f"Label holds class id {lo if lo < 0 else hi}, expected ids in [0, {n_classes}) "
            f"(or ignore_index={ignore_index})")
    return safe, ignored


def _pick(xp, x2, idx):
    """x2[i, idx[i]] for a 2-D x2 and 1-D integer idx."""
    return x2[xp.arange(x2.shape[0]), idx]


def _neg_log(xp, p):
    """-log(p) as fluid's TolerableValue reports it: 1e20 for p == 0 (never inf); a negative
    p is not a probability and gives nan, as in fluid."""
    with np.errstate(divide="ignore", invalid="ignore"):
        y = -xp.log(p)
    return xp.where(y == xp.inf, p.dtype.type(_APPROX_INF), y)


@kernel("cross_entropy")
def cross_entropy(xp, ins, attrs, want):
    x, label = ins["X"], ins["Label"]
    d = x.shape[-1]
    x2 = x.reshape(-1, d)
    if attrs["soft_label"]:
        y = (label.reshape(-1, d) * _neg_log(xp, x2)).sum(axis=1)
    else:
        lab, ignored = _hard_labels(xp, label, d, attrs["ignore_index"], (-1,))
        y = xp.where(ignored, 0, _neg_log(xp, _pick(xp, x2, lab)))
    return {"Y": y.astype(x.dtype, copy=False).reshape(_loss_shape(x, label))}


def _loss_shape(x, label) -> tuple:
    """fluid's Y: the label's shape, its last dim 1 (a hard label of X's shape without its
    class dim gives a loss of that shape)."""
    if label.ndim == x.ndim - 1:
        return label.shape
    return x.shape[:-1] + (1,)


@kernel("cross_entropy_grad")
def cross_entropy_grad(xp, ins, attrs, want):
    x, label, dy = ins["X"], ins["Label"], ins["Y@GRAD"]
    d = x.shape[-1]
    x2, dy2 = x.reshape(-1, d), dy.reshape(-1, 1)
    if attrs["soft_label"]:
        dx = -dy2 * label.reshape(-1, d) / x2
    else:
        lab, ignored = _hard_labels(xp, label, d, attrs["ignore_index"], (-1,))
        dx = xp.zeros_like(x2)
        picked = _pick(xp, x2, lab)
        safe = xp.where(ignored, 1, picked)
        dx[xp.arange(x2.shape[0]), lab] = xp.where(ignored, 0, -dy2[:, 0] / safe)
    return {"X@GRAD": dx.reshape(x.shape)}


@kernel("cross_entropy2")
def cross_entropy2(xp, ins, attrs, want):
    x, label = ins["X"], ins["Label"]
    d = x.shape[-1]
    x2 = x.reshape(-1, d)
    lab, ignored = _hard_labels(xp, label, d, attrs["ignore_index"], (-1,))
    match = xp.where(ignored, 0, _pick(xp, x2, lab))
    y = xp.where(ignored, 0, _neg_log(xp, match))
    out_shape = x.shape[:-1] + (1,)
    return {"Y": y.reshape(_loss_shape(x, label)), "MatchX": match.reshape(out_shape),
            "XShape": xp.zeros(x.shape + (0,), dtype=x.dtype)}


@kernel("cross_entropy2_grad")
def cross_entropy2_grad(xp, ins, attrs, want):
    label, match, dy = ins["Label"], ins["MatchX"], ins["Y@GRAD"]
    shape = ins["XShape"].shape[:-1]
    d = shape[-1]
    lab, ignored = _hard_labels(xp, label, d, attrs["ignore_index"], (-1,))
    m = match.reshape(-1)
    dx = xp.zeros((m.shape[0], d), dtype=match.dtype)
    dx[xp.arange(m.shape[0]), lab] = xp.where(ignored, 0,
                                              -dy.reshape(-1) / xp.where(ignored, 1, m))
    return {"X@GRAD": dx.reshape(shape)}


def _label_shape(logits_shape, axis: int):
    return logits_shape[:axis] + (1,) + logits_shape[axis + 1:]


@kernel("softmax_with_cross_entropy")
def softmax_with_cross_entropy(xp, ins, attrs, want):
    x, label = ins["Logits"], ins["Label"]
    axis = _axis(attrs, x.ndim)
    log_sm = _log_softmax(xp, x, axis)
    if attrs["soft_label"]:
        loss = -(label * log_sm).sum(axis=axis, keepdims=True)
    else:
        lab, ignored = _hard_labels(xp, label, x.shape[axis], attrs["ignore_index"],
                                    _label_shape(x.shape, axis))
        loss = xp.where(ignored, 0, -xp.take_along_axis(log_sm, lab, axis=axis))
    return {"Softmax": xp.exp(log_sm), "Loss": loss.astype(x.dtype, copy=False)}


@kernel("softmax_with_cross_entropy_grad")
def softmax_with_cross_entropy_grad(xp, ins, attrs, want):
    sm, label, dloss = ins["Softmax"], ins["Label"], ins["Loss@GRAD"]
    axis = _axis(attrs, sm.ndim)
    if attrs["soft_label"]:
        # exact even when a row of soft labels does not sum to 1
        dx = (sm * label.sum(axis=axis, keepdims=True) - label) * dloss
    else:
        lab, ignored = _hard_labels(xp, label, sm.shape[axis], attrs["ignore_index"],
                                    _label_shape(sm.shape, axis))
        classes = xp.arange(sm.shape[axis]).reshape(
            (1,) * axis + (-1,) + (1,) * (sm.ndim - axis - 1))
        dx = xp.where(ignored, 0, (sm - (classes == lab)) * dloss)
    return {"Logits@GRAD": dx.astype(sm.dtype, copy=False)}


def _channel_view(x, layout: str):
    """(reduce axes, broadcast shape of a per-channel vector) for batch_norm."""
    c_axis = 1 if layout == "NCHW" else x.ndim - 1
    axes = tuple(i for i in range(x.ndim) if i != c_axis)
    shape = tuple(x.shape[i] if i == c_axis else 1 for i in range(x.ndim))
    return axes, shape


def _bn_global_stats(attrs) -> bool:
    test_mode = attrs["is_test"] and not attrs["trainable_statistics"]
    return test_mode or attrs["use_global_stats"]


def bn_momentum(ins, attrs) -> float:
    if ins.get("MomentumTensor") is not None:
        return float(ins["MomentumTensor"].reshape(-1)[0])
    return attrs["momentum"]


def bn_train(xp, ins, attrs, want) -> dict:
    """batch_norm with batch statistics (bn_core.py), every output but ReserveSpace."""
    x, scale, bias = ins["X"], ins["Scale"], ins["Bias"]
    mean_in, var_in = ins["Mean"], ins["Variance"]
    layout = attrs["data_layout"]
    y, mean, var, inv_std = bn_core.train_forward(xp, x, scale, bias, attrs["epsilon"], layout)
    momentum = bn_momentum(ins, attrs)
    res = {"MeanOut": (mean_in * momentum + mean * (1.0 - momentum)).astype(mean_in.dtype),
           "VarianceOut": (var_in * momentum + var * (1.0 - momentum)).astype(var_in.dtype)}
    if x.size == mean_in.size:  # fluid: a single value per channel is passed through
        res.update(Y=x.copy(), SavedMean=mean.astype(x.dtype),
                   SavedVariance=xp.zeros(mean.shape, dtype=x.dtype))
    else:
        res.update(Y=y, SavedMean=mean.astype(x.dtype), SavedVariance=inv_std)
    return res


@kernel("batch_norm")
def batch_norm(xp, ins, attrs, want):
    if not _bn_global_stats(attrs):
        return _bn_finish(xp, bn_train(xp, ins, attrs, want), ins["X"], want)
    x, scale, bias = ins["X"], ins["Scale"], ins["Bias"]
    mean_in, var_in = ins["Mean"], ins["Variance"]
    inv_std = 1.0 / xp.sqrt(var_in + attrs["epsilon"])
    dt = x.dtype
    y = bn_core.normalize(xp, x, mean_in, inv_std * scale, bias, attrs["data_layout"])
    res = {"Y": y, "MeanOut": mean_in.copy(), "VarianceOut": var_in.copy(),
           "SavedMean": mean_in.astype(dt), "SavedVariance": inv_std.astype(dt)}
    return _bn_finish(xp, res, x, want)


def _bn_finish(xp, res, x, want):
    if "ReserveSpace" in want:
        res["ReserveSpace"] = xp.zeros((0,), dtype=x.dtype)
    return res


@kernel("batch_norm_grad")
def batch_norm_grad(xp, ins, attrs, want):
    x, scale, dy = ins["X"], ins["Scale"], ins["Y@GRAD"]
    if _bn_global_stats(attrs):
        mean = ins["Mean"]
        inv_std = 1.0 / xp.sqrt(ins["Variance"] + attrs["epsilon"])
        through_stats = False
    else:  # with batch statistics, X's gradient flows through the mean and variance too
        mean, inv_std = ins["SavedMean"], ins["SavedVariance"]
        through_stats = True
        if x.size == scale.size:  # the forward passed X through (one value per channel)
            return _bn_passed_through_grad(xp, dy, scale, want)
    return bn_core.backward(xp, x, dy, scale, mean, inv_std, want, through_stats,
                            attrs["data_layout"])


def _bn_passed_through_grad(xp, dy, scale, want) -> dict:
    """fluid 1.8.5's gradient where Y = X (a single value per channel): dX = dY, and Scale's and
    Bias's gradients are zero."""
    res = {k: xp.zeros_like(scale) for k in ("Scale@GRAD", "Bias@GRAD") if k in want}
    if "X@GRAD" in want:
        res["X@GRAD"] = dy.copy()
    return res


def _ln_rows(x, attrs):
    axis = attrs["begin_norm_axis"]
    return x.reshape(math.prod(x.shape[:axis]), -1)


@kernel("layer_norm")
def layer_norm(xp, ins, attrs, want):
    x = ins["X"]
    x2 = _ln_rows(x, attrs)
    mean = x2.mean(axis=1)
    var = ((x2 - mean[:, None]) ** 2).mean(axis=1)
    y = (x2 - mean[:, None]) / xp.sqrt(var + attrs["epsilon"])[:, None]
    if ins.get("Scale") is not None:
        y = y * ins["Scale"]
    if ins.get("Bias") is not None:
        y = y + ins["Bias"]
    return {"Y": y.astype(x.dtype, copy=False).reshape(x.shape), "Mean": mean, "Variance": var}


@kernel("layer_norm_grad")
def layer_norm_grad(xp, ins, attrs, want):
    x, dy = ins["X"], ins["Y@GRAD"]
    x2, dy2 = _ln_rows(x, attrs), _ln_rows(dy, attrs)
    inv_std = (1.0 / xp.sqrt(ins["Variance"] + attrs["epsilon"]))[:, None]
    xhat = (x2 - ins["Mean"][:, None]) * inv_std
    res = {}
    if "Scale@GRAD" in want:
        res["Scale@GRAD"] = (dy2 * xhat).sum(axis=0)
    if "Bias@GRAD" in want:
        res["Bias@GRAD"] = dy2.sum(axis=0)
    if "X@GRAD" in want:
        dxhat = dy2 * ins["Scale"] if ins.get("Scale") is not None else dy2
        dx = inv_std * (dxhat - dxhat.mean(axis=1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
        res["X@GRAD"] = dx.astype(x.dtype, copy=False).reshape(x.shape)
    return res


def _dropout_factor(xp, mask, attrs, dtype):
    """What X (and the gradient) is multiplied by in training: the 0/1 mask, upscaled by
    1 / (1 - p) in upscale_in_train mode."""
    p = attrs["dropout_prob"]
    factor = mask.astype(dtype)
    if attrs["dropout_implementation"] == "upscale_in_train":
        if p >= 1.0:
            return xp.zeros_like(factor)
        factor *= dtype.type(1.0 / (1.0 - p))
    return factor


@kernel("dropout", context=True)
def dropout(xp, ins, attrs, want, ctx):
    x = ins["X"]
    p = attrs["dropout_prob"]
    if attrs["is_test"]:
        downgrade = attrs["dropout_implementation"] == "downgrade_in_infer"
        out = x * x.dtype.type(1.0 - p) if downgrade else x.copy()
        res = {"Out": out}
        if "Mask" in want:
            res["Mask"] = xp.ones(x.shape, dtype="uint8")
        return res
    if ins.get("Seed") is not None:
        # a seed op's value (RecomputeOptimizer's): the recomputation draws the same mask
        rng = np.random.default_rng(int(ins["Seed"].reshape(-1)[0]))
    elif attrs["fix_seed"] or attrs["seed"]:
        # the op's own seed: every run draws the same mask (fluid's fix_seed)
        rng = np.random.default_rng(attrs["seed"])
    else:
        rng = ctx.rng
    keep = rng.random(x.shape, dtype=np.float32) >= p
    mask = xp.asarray(keep.astype(np.uint8))
    return {"Out": x * _dropout_factor(xp, mask, attrs, x.dtype), "Mask": mask}


@kernel("dropout_grad")
def dropout_grad(xp, ins, attrs, want):
    mask, dout = ins["Mask"], ins["Out@GRAD"]
    if attrs["is_test"]:
        downgrade = attrs["dropout_implementation"] == "downgrade_in_infer"
        dx = dout * dout.dtype.type(1.0 - attrs["dropout_prob"]) if downgrade else dout.copy()
        return {"X@GRAD": dx}
    return {"X@GRAD": dout * _dropout_factor(xp, mask, attrs, dout.dtype)}


def _top_k_indices(xp, x, k: int):
    n = x.shape[-1]
    order = xp.argsort(-x, axis=-1, kind="stable")[..., :min(k + 1, n)]
    top = xp.take_along_axis(x, order, axis=-1)
    tied = _host((top[..., 1:] == top[..., :-1]).any(axis=-1)).reshape(-1)
    idx = order[..., :k].reshape(-1, k)
    if tied.any():  # equal values among the k largest, or at the cut: fluid's order
        rows = _host(x.reshape(-1, n)[xp.asarray(np.flatnonzero(tied))])
        fixed = [heap_top_k(r, k) for r in rows]
        idx[xp.asarray(np.flatnonzero(tied))] = xp.asarray(np.array(fixed, dtype=np.int64))
    return idx.reshape(x.shape[:-1] + (k,))


@kernel("top_k")
def top_k(xp, ins, attrs, want):
    x = ins["X"]
    k = attrs["k"]
    if ins.get("K") is not None:
        k = int(ins["K"].reshape(-1)[0])
    if not 1 <= k <= x.shape[-1]:
        raise InvalidArgumentError(f"k={k} must be in [1, {x.shape[-1]}] for X{list(x.shape)}")
    idx = _top_k_indices(xp, x, k)
    return {"Out": xp.take_along_axis(x, idx, axis=-1), "Indices": idx.astype("int64")}


@kernel("top_k_grad")
def top_k_grad(xp, ins, attrs, want):
    x, idx, dout = ins["X"], ins["Indices"], ins["Out@GRAD"]
    n, k = x.shape[-1], idx.shape[-1]
    dx = xp.zeros((x.size // max(n, 1), n), dtype=dout.dtype)
    rows = xp.arange(dx.shape[0])[:, None]
    dx[rows, idx.reshape(-1, k)] = dout.reshape(-1, k)  # indices are distinct within a row
    return {"X@GRAD": dx.reshape(x.shape)}


@kernel("accuracy")
def accuracy(xp, ins, attrs, want):
    idx, label = ins["Indices"], ins["Label"]
    total = idx.shape[0]
    correct = (idx == label.reshape(-1, 1)).any(axis=1).sum()
    acc = correct / total if total else xp.zeros(())  # no samples: fluid reports 0
    return {"Accuracy": xp.asarray(acc, dtype="float32").reshape(1),
            "Correct": xp.asarray(correct, dtype="int32").reshape(1),
            "Total": xp.full((1,), total, dtype="int32")}


@kernel("square_error_cost")
def square_error_cost(xp, ins, attrs, want):
    d = ins["X"] - ins["Y"]
    d *= d
    return {"Out": d}


@kernel("square_error_cost_grad")
def square_error_cost_grad(xp, ins, attrs, want):
    g = ins["X"] - ins["Y"]
    g *= 2.0
    g *= ins["Out@GRAD"]
    res = {}
    if "Y@GRAD" in want:
        res["Y@GRAD"] = -unbroadcast(xp, g, ins["Y"].shape)
    if "X@GRAD" in want:
        res["X@GRAD"] = g
    return res
