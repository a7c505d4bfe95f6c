"""Kernels: fused_elemwise_activation and fused_batch_norm_act, and their gradients
(spmd/ops/fused.py).

Each computes the very numbers of its unfused ops: the same operations on the same operands
in the same order (IEEE addition and multiplication commute, so `t += b` is `b + t`). What the
fusion saves on numpy is temporaries and op dispatch: act(X + Y) applies the activation in
place on the fresh sum, and batch_norm + relu normalizes, shifts and clips one buffer in place
(2 full-size temporaries instead of 6 forward, 4 instead of 10 backward).
"""
from __future__ import annotations

from .activation import _special, relu_grad, sigmoid_grad, tanh_grad
from .math import align_y, elementwise_add_grad
from .nn import _channel_view, batch_norm, batch_norm_grad
from .registry import kernel

_ACT_GRADS = {"relu": relu_grad, "sigmoid": sigmoid_grad, "tanh": tanh_grad}
_ADD = "elementwise_add"


def _functors(attrs) -> tuple[str, bool]:
    """(activation, applied after the add); spmd/ops/fused.py checked the list."""
    first, second = attrs["functor_list"]
    return (first, True) if second == _ADD else (second, False)


def _act(xp, act: str, attrs, x, out):
    """The activation of x written into `out` (x itself for in place): relu's, sigmoid's, tanh's
    or scale's kernel, element for element."""
    if act == "relu":
        return xp.maximum(x, 0, out=out)
    if act == "sigmoid":
        return _special(xp).expit(x, out=out)
    if act == "tanh":
        return xp.tanh(x, out=out)
    # scale's kernel: x * scale in x's dtype (bias 0, which the pass requires)
    return xp.multiply(x, x.dtype.type(attrs["scale"]), out=out)


def _act_grad(xp, act: str, attrs, out, dout):
    """d act / d input from the activation's output, by the activation's own grad kernel."""
    if act == "scale":  # scale's gradient is a scale by the same factor (bias 0)
        return dout * dout.dtype.type(attrs["scale"])
    return _ACT_GRADS[act](xp, {"Out": out, "Out@GRAD": dout}, attrs, {"X@GRAD"})["X@GRAD"]


@kernel("fused_elemwise_activation")
def fused_elemwise_activation(xp, ins, attrs, want):
    x, y = ins["X"], ins["Y"]
    act, outside = _functors(attrs)
    keep = "IntermediateOut" in want
    if outside:  # act(X + Y): the add's fresh sum is activated in place unless it is kept
        total = x + align_y(x, y, attrs["axis"])
        out = _act(xp, act, attrs, total, None if keep else total)
        return {"Out": out, "IntermediateOut": total} if keep else {"Out": out}
    inner = _act(xp, act, attrs, y, None)  # X + act(Y)
    res = {"Out": x + align_y(x, inner, attrs["axis"])}
    if keep:
        res["IntermediateOut"] = inner
    return res


@kernel("fused_elemwise_activation_grad")
def fused_elemwise_activation_grad(xp, ins, attrs, want):
    """The activation's grad kernel, then elementwise_add_grad's (or the other way round)."""
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    act, outside = _functors(attrs)
    add_attrs = {"axis": attrs["axis"]}
    if outside:
        dsum = _act_grad(xp, act, attrs, ins.get("Out"), dout)
        return elementwise_add_grad(xp, {"X": x, "Y": y, "Out@GRAD": dsum}, add_attrs, want)
    inner = ins.get("IntermediateOut")
    if inner is None:  # not kept: act(Y) again, the same numbers the forward made
        inner = _act(xp, act, attrs, y, None)
    res = elementwise_add_grad(xp, {"X": x, "Y": inner, "Out@GRAD": dout}, add_attrs,
                               (want & {"X@GRAD"}) | {"Y@GRAD"})
    dinner = res.pop("Y@GRAD")
    if "Y@GRAD" in want:
        res["Y@GRAD"] = _act_grad(xp, act, attrs, inner, dinner)
    return res


# -- batch_norm + relu -------------------------------------------------------------------------

def _bn_attrs(attrs) -> dict:
    """batch_norm's attributes for the same normalization (batch statistics)."""
    return {"momentum": attrs["momentum"], "epsilon": attrs["epsilon"],
            "data_layout": attrs["data_layout"], "is_test": False, "use_global_stats": False,
            "trainable_statistics": False}


def _in_place_ok(x, *others) -> bool:
    """In place keeps batch_norm's rounding only when every operand has X's dtype (a float64
    scale on float32 X would round twice)."""
    return all(o.dtype == x.dtype for o in others)


@kernel("fused_batch_norm_act")
def fused_batch_norm_act(xp, ins, attrs, want):
    x, scale, bias = ins["X"], ins["Scale"], ins["Bias"]
    mean_in, var_in = ins["Mean"], ins["Variance"]
    count = x.size // max(mean_in.size, 1)
    if count == 1 or not _in_place_ok(x, scale, bias):
        res = batch_norm(xp, ins, _bn_attrs(attrs), want)  # the kernels one after the other
        res["Y"] = xp.maximum(res["Y"], 0)
        return res
    # batch_norm's kernel (spmd/kernels/nn.py), X - mean made once and then reused in place
    axes, cshape = _channel_view(x, attrs["data_layout"])
    eps, momentum = attrs["epsilon"], attrs["momentum"]
    mean = x.mean(axis=axes)
    y = x - mean.reshape(cshape)
    var = (y ** 2).mean(axis=axes)
    inv_std = 1.0 / xp.sqrt(var + eps)
    y *= (inv_std * scale).reshape(cshape)
    y += bias.reshape(cshape)
    xp.maximum(y, 0, out=y)
    res = {"Y": y, "SavedMean": mean.astype(x.dtype), "SavedVariance": inv_std.astype(x.dtype),
           "MeanOut": (mean_in * momentum + mean * (1.0 - momentum)).astype(mean_in.dtype),
           "VarianceOut": (var_in * momentum + var * (1.0 - momentum)).astype(var_in.dtype)}
    if "ReserveSpace" in want:
        res["ReserveSpace"] = xp.zeros((0,), dtype=x.dtype)
    return res


@kernel("fused_batch_norm_act_grad")
def fused_batch_norm_act_grad(xp, ins, attrs, want):
    x, scale, dout = ins["X"], ins["Scale"], ins["Y@GRAD"]
    mean, inv_std = ins["SavedMean"], ins["SavedVariance"]
    dy = dout * (ins["Y"] > 0)  # relu_grad's
    if x.size == scale.size or not _in_place_ok(x, scale, mean, inv_std, dout):
        bn_ins = {"X": x, "Scale": scale, "Bias": ins.get("Bias"), "SavedMean": mean,
                  "SavedVariance": inv_std, "Y@GRAD": dy}
        return batch_norm_grad(xp, bn_ins, _bn_attrs(attrs), want)
    # batch_norm_grad's kernel with batch statistics, its temporaries reused in place
    axes, cshape = _channel_view(x, attrs["data_layout"])
    xhat = x - mean.reshape(cshape)
    xhat *= inv_std.reshape(cshape)
    dbias = dy.sum(axis=axes)
    t = dy * xhat
    dscale = t.sum(axis=axes)
    res = {}
    if "X@GRAD" in want:
        m = x.size // scale.size
        xp.multiply(xhat, dscale.reshape(cshape), out=t)
        t += dbias.reshape(cshape)
        t /= m
        xp.subtract(dy, t, out=t)
        t *= (scale * inv_std).reshape(cshape)
        res["X@GRAD"] = t
    if "Scale@GRAD" in want:
        res["Scale@GRAD"] = dscale.astype(scale.dtype, copy=False)
    if "Bias@GRAD" in want:
        res["Bias@GRAD"] = dbias.astype(scale.dtype, copy=False)
    return res
