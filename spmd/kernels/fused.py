"""Kernels: fused_elemwise_activation and fused_batch_norm_act, and their gradients
(spmd/ops/fused.py).

Each computes the very numbers of its unfused ops: the same operations on the same operands
in the same order (IEEE addition and multiplication commute, so `t += b` is `b + t`). What the
fusion saves on numpy is temporaries and op dispatch: act(X + Y) applies the activation in
place on the fresh sum; batch_norm + relu runs batch_norm's own arithmetic (bn_core.py, one
fresh array each way) and clips its fresh Y in place, and its gradient feeds relu_grad's
product straight to batch_norm_grad's.
"""
from __future__ import annotations

import numpy as np

from . import bn_core
from .activation import _special, relu_grad, sigmoid_grad, tanh_grad
from .math import align_y, elementwise_add_grad
from .nn import bn_train
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


@kernel("fused_batch_norm_act")
def fused_batch_norm_act(xp, ins, attrs, want):
    """batch_norm's kernel (bn_train), then relu's in place on its fresh Y."""
    res = bn_train(xp, ins, _bn_attrs(attrs), want)
    xp.maximum(res["Y"], 0, out=res["Y"])
    if "ReserveSpace" in want:
        res["ReserveSpace"] = xp.zeros((0,), dtype=ins["X"].dtype)
    return res


def _relu_grad(xp, out, dout):
    """relu_grad's dout * (out > 0), with the mask made as dout's dtype in the product's buffer
    (numpy casts the boolean mask to the same 1.0 / 0.0 inside the product)."""
    if xp is not np:
        return dout * (out > 0)
    dy = np.greater(out, 0, out=np.empty(dout.shape, dtype=np.result_type(dout, np.bool_)))
    return np.multiply(dout, dy, out=dy)


@kernel("fused_batch_norm_act_grad")
def fused_batch_norm_act_grad(xp, ins, attrs, want):
    """relu_grad's kernel, then batch_norm_grad's with batch statistics (bn_core.backward)."""
    dy = _relu_grad(xp, ins["Y"], ins["Y@GRAD"])
    return bn_core.backward(xp, ins["X"], dy, ins["Scale"], ins["SavedMean"],
                            ins["SavedVariance"], want, True, attrs["data_layout"])
