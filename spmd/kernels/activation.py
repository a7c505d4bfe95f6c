"""Kernels: activations (relu, leaky_relu, sigmoid, tanh, gelu, exp, log, sqrt, square, pow,
clip).

Written against `xp`; results keep the input dtype (Python float constants only, never numpy
float64 scalars, which would promote float32 arrays).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel, lent_for
from .sparse_update import SparseValues

_SPECIAL: dict = {}


def _special(xp):
    """scipy.special for numpy, cupyx.scipy.special for cupy (imported only when used)."""
    mod = _SPECIAL.get(xp)
    if mod is None:
        if xp is np:
            import scipy.special as mod
        else:
            import cupyx.scipy.special as mod
        _SPECIAL[xp] = mod
    return mod



# The activations below that declare `reuses` may be lent the buffer of an input that dies at
# the op (executor/inplace.py): the same ufunc with `out=` gives the same bits, and every input
# is read whole before the lent buffer is first written, or element by element in place.

@kernel("relu", reuses=(("Out", "X"),))
def relu(xp, ins, attrs, want, lent=None):
    x = ins["X"]
    if lent is None:  # (the common call, without a keyword to parse)
        return {"Out": xp.maximum(x, 0)}
    return {"Out": xp.maximum(x, 0, out=lent_for(lent, "Out", x, 0))}


@kernel("relu_grad", reuses=(("X@GRAD", "Out@GRAD"), ("X@GRAD", "Out")))
def relu_grad(xp, ins, attrs, want, lent=None):
    out, dout = ins["Out"], ins["Out@GRAD"]
    mask = out > 0  # made whole before the product may write over Out
    if lent is None:
        return {"X@GRAD": dout * mask}
    return {"X@GRAD": xp.multiply(dout, mask, out=lent_for(lent, "X@GRAD", dout, mask))}


@kernel("leaky_relu")
def leaky_relu(xp, ins, attrs, want):
    # fluid 1.8's forward, max(x, alpha * x), for every alpha: outside the documented
    # 0 <= alpha <= 1 it is not "x if x > 0 else alpha * x" (alpha = 2 doubles positive x)
    x = ins["X"]
    return {"Out": xp.maximum(x, x * attrs["alpha"])}


@kernel("leaky_relu_grad")
def leaky_relu_grad(xp, ins, attrs, want):
    # The derivative of that forward: 1 where x is the larger, alpha where alpha * x is (at
    # x = 0 alpha, as fluid). fluid's CPU kernel gives 1 wherever out > 0, which is not the
    # derivative of its own forward for alpha < 0 or alpha > 1; for 0 <= alpha <= 1 the two
    # agree (tests/unit/test_activation_fluid.py holds fluid's numbers).
    x, dout = ins["X"], ins["Out@GRAD"]
    return {"X@GRAD": xp.where(x > x * attrs["alpha"], dout, dout * attrs["alpha"])}


@kernel("sigmoid", reuses=(("Out", "X"),))
def sigmoid(xp, ins, attrs, want, lent=None):
    x = ins["X"]  # expit: no overflow warning for very negative x
    if lent is None:
        return {"Out": _special(xp).expit(x)}
    return {"Out": _special(xp).expit(x, out=lent_for(lent, "Out", x, 0.5))}


@kernel("sigmoid_grad")
def sigmoid_grad(xp, ins, attrs, want):
    out, dout = ins["Out"], ins["Out@GRAD"]
    t = 1.0 - out
    t *= out
    t *= dout
    return {"X@GRAD": t}


@kernel("tanh", reuses=(("Out", "X"),))
def tanh(xp, ins, attrs, want, lent=None):
    x = ins["X"]
    if lent is None:
        return {"Out": xp.tanh(x)}
    return {"Out": xp.tanh(x, out=lent_for(lent, "Out", x, 0.5))}


@kernel("tanh_grad", reuses=(("X@GRAD", "Out"),))
def tanh_grad(xp, ins, attrs, want, lent=None):
    out, dout = ins["Out"], ins["Out@GRAD"]
    # Out's buffer, when lent, first takes out * out: Out is read nowhere after that
    t = out * out if lent is None else xp.multiply(
        out, out, out=lent_for(lent, "X@GRAD", out, out, dout))
    xp.subtract(1.0, t, out=t)
    t *= dout
    return {"X@GRAD": t}


_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


def _gelu_tanh_inner(x):
    """sqrt(2/pi) * (x + 0.044715 x^3), the tanh approximation's argument."""
    t = x * x
    t *= _GELU_CUBIC
    t += 1.0
    t *= x
    t *= _SQRT_2_OVER_PI
    return t


@kernel("gelu")
def gelu(xp, ins, attrs, want):
    x = ins["X"]
    if attrs["approximate"]:
        t = xp.tanh(_gelu_tanh_inner(x))  # 0.5 x (1 + tanh(inner))
    else:
        t = _special(xp).erf(x * _SQRT_HALF)  # 0.5 x (1 + erf(x / sqrt 2))
    t += 1.0
    t *= x
    t *= 0.5
    return {"Out": t}


@kernel("gelu_grad")
def gelu_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    if attrs["approximate"]:
        th = xp.tanh(_gelu_tanh_inner(x))
        # 0.5 (1 + th) + 0.5 x (1 - th^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
        inner_d = x * x
        inner_d *= 3.0 * _GELU_CUBIC
        inner_d += 1.0
        inner_d *= _SQRT_2_OVER_PI
        sech2 = th * th
        xp.subtract(1.0, sech2, out=sech2)
        sech2 *= inner_d
        sech2 *= x
        th += 1.0
        th += sech2
        th *= 0.5
        g = th
    else:
        # Phi(x) + x phi(x): the normal cdf plus x times its density
        g = _special(xp).erf(x * _SQRT_HALF)
        g += 1.0
        g *= 0.5
        pdf = x * x
        pdf *= -0.5
        xp.exp(pdf, out=pdf)
        pdf *= x
        pdf *= _INV_SQRT_2PI
        g += pdf
    g *= dout
    return {"X@GRAD": g}


@kernel("exp")
def exp(xp, ins, attrs, want):
    return {"Out": xp.exp(ins["X"])}


@kernel("exp_grad")
def exp_grad(xp, ins, attrs, want):
    return {"X@GRAD": ins["Out@GRAD"] * ins["Out"]}


@kernel("log")
def log(xp, ins, attrs, want):
    return {"Out": xp.log(ins["X"])}


@kernel("log_grad")
def log_grad(xp, ins, attrs, want):
    return {"X@GRAD": ins["Out@GRAD"] / ins["X"]}


@kernel("sqrt")
def sqrt(xp, ins, attrs, want):
    return {"Out": xp.sqrt(ins["X"])}


@kernel("sqrt_grad")
def sqrt_grad(xp, ins, attrs, want):
    t = ins["Out@GRAD"] / ins["Out"]
    t *= 0.5
    return {"X@GRAD": t}


@kernel("square")
def square(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": x * x}


@kernel("square_grad")
def square_grad(xp, ins, attrs, want):
    t = ins["X"] * 2.0
    t *= ins["Out@GRAD"]
    return {"X@GRAD": t}


def _pow_factor(ins, attrs) -> float:
    f = ins.get("FactorTensor")
    return attrs["factor"] if f is None else float(f.reshape(-1)[0])


@kernel("pow")
def pow_(xp, ins, attrs, want):
    x, factor = ins["X"], _pow_factor(ins, attrs)
    if x.dtype.kind in "iu":  # fluid 1.8: x ** int(factor) in X's dtype, wrapping on overflow
        e = int(factor)
        if e < 0:
            raise InvalidArgumentError(
                f"pow: integer X takes a factor >= 0, got {factor} (fluid 1.8 hangs there); "
                f"cast X to float first")
        return {"Out": xp.power(x, x.dtype.type(e))}
    return {"Out": xp.power(x, factor)}


@kernel("pow_grad")
def pow_grad(xp, ins, attrs, want):
    factor = _pow_factor(ins, attrs)
    t = xp.power(ins["X"], factor - 1.0)
    t *= factor
    t *= ins["Out@GRAD"]
    return {"X@GRAD": t}


def _clip_bounds(ins, attrs):
    """(min, max): the Min / Max tensors when bound, else the attributes."""
    lo, hi = ins.get("Min"), ins.get("Max")
    return (attrs["min"] if lo is None else float(lo.reshape(-1)[0]),
            attrs["max"] if hi is None else float(hi.reshape(-1)[0]))


@kernel("clip", sparse=SparseValues())
def clip(xp, ins, attrs, want):
    x = ins["X"]
    lo, hi = _clip_bounds(ins, attrs)
    # float bounds widen an int X to float64: cast back (copy=False: no copy for floats)
    return {"Out": xp.clip(x, lo, hi).astype(x.dtype, copy=False)}


@kernel("clip_grad")
def clip_grad(xp, ins, attrs, want):
    x = ins["X"]
    lo, hi = _clip_bounds(ins, attrs)
    inside = x > lo
    inside &= x < hi
    return {"X@GRAD": ins["Out@GRAD"] * inside}


# -- fluid 1.8's other activations: forward f(x) and derivative f'(x) side by side ---------------
# Each entry registers "<op>" computing f and "<op>_grad" computing dOut * f'(x, out); the
# formulas are fluid's activation functors (activation_op.h), in the same piecewise form.

def _act(type_, fwd, deriv):
    def forward(xp, ins, attrs, want):
        return {"Out": fwd(xp, ins["X"], attrs)}

    def backward(xp, ins, attrs, want):
        d = deriv(xp, ins["X"], ins.get("Out"), attrs)
        d *= ins["Out@GRAD"]
        return {"X@GRAD": d}

    kernel(type_)(forward)
    kernel(type_ + "_grad")(backward)


def _mask(cond, x):
    """cond as 0/1 in x's dtype (a fresh array the caller may scale in place)."""
    return cond.astype(x.dtype)


def _softplus(xp, x):
    return xp.logaddexp(x, x.dtype.type(0))  # log(1 + e^x) without overflow


def _round_half_away(xp, x):
    # Halves away from zero (std::round, numpy's round goes to even). fluid 1.8.5's CPU
    # kernel does so only in its scalar tail: its vectorized body (8 float32 or 4 float64 at
    # a time) rounds halves to even, so there a half's result depends on where it sits in
    # the tensor. spmd takes the scalar rule everywhere (the one paddle 2.x documents).
    return xp.copysign(xp.floor(xp.abs(x) + 0.5), x)


_INV_SQRT_PI_2 = 2.0 / math.sqrt(math.pi)

_act("abs", lambda xp, x, a: xp.abs(x), lambda xp, x, o, a: xp.sign(x))
_act("acos", lambda xp, x, a: xp.arccos(x), lambda xp, x, o, a: -1.0 / xp.sqrt(1.0 - x * x))
_act("asin", lambda xp, x, a: xp.arcsin(x), lambda xp, x, o, a: 1.0 / xp.sqrt(1.0 - x * x))
_act("atan", lambda xp, x, a: xp.arctan(x), lambda xp, x, o, a: 1.0 / (1.0 + x * x))
_act("cos", lambda xp, x, a: xp.cos(x), lambda xp, x, o, a: -xp.sin(x))
_act("sin", lambda xp, x, a: xp.sin(x), lambda xp, x, o, a: xp.cos(x))
_act("erf", lambda xp, x, a: _special(xp).erf(x),
     lambda xp, x, o, a: _INV_SQRT_PI_2 * xp.exp(-(x * x)))
_act("logsigmoid", lambda xp, x, a: -_softplus(xp, -x),
     lambda xp, x, o, a: _special(xp).expit(-x))
_act("reciprocal", lambda xp, x, a: 1.0 / x, lambda xp, x, o, a: -(o * o))
_act("rsqrt", lambda xp, x, a: 1.0 / xp.sqrt(x), lambda xp, x, o, a: -0.5 * o * o * o)
_act("softplus", lambda xp, x, a: _softplus(xp, x), lambda xp, x, o, a: _special(xp).expit(x))
_act("softsign", lambda xp, x, a: x / (1.0 + xp.abs(x)),
     lambda xp, x, o, a: 1.0 / xp.square(1.0 + xp.abs(x)))
_act("tanh_shrink", lambda xp, x, a: x - xp.tanh(x), lambda xp, x, o, a: xp.square(xp.tanh(x)))
_act("log1p", lambda xp, x, a: xp.log1p(x), lambda xp, x, o, a: 1.0 / (1.0 + x))
_act("ceil", lambda xp, x, a: xp.ceil(x), lambda xp, x, o, a: xp.zeros_like(x))
_act("floor", lambda xp, x, a: xp.floor(x), lambda xp, x, o, a: xp.zeros_like(x))
_act("round", lambda xp, x, a: _round_half_away(xp, x), lambda xp, x, o, a: xp.zeros_like(x))

_act("hard_shrink",
     lambda xp, x, a: x * (xp.abs(x) > a["threshold"]),
     lambda xp, x, o, a: _mask(xp.abs(x) > a["threshold"], x))
_act("softshrink",
     lambda xp, x, a: xp.where(x > a["lambda"], x - a["lambda"],
                               xp.where(x < -a["lambda"], x + a["lambda"], 0.0 * x)),
     lambda xp, x, o, a: _mask(xp.abs(x) > a["lambda"], x))
_act("thresholded_relu",
     lambda xp, x, a: x * (x > a["threshold"]),
     lambda xp, x, o, a: _mask(x > a["threshold"], x))
_act("brelu",
     lambda xp, x, a: xp.clip(x, a["t_min"], a["t_max"]),
     lambda xp, x, o, a: _mask((x > a["t_min"]) & (x < a["t_max"]), x))
_act("elu",
     lambda xp, x, a: xp.where(x > 0, x, a["alpha"] * xp.expm1(xp.minimum(x, 0.0))),
     lambda xp, x, o, a: xp.where(x > 0, 1.0, a["alpha"] * xp.exp(xp.minimum(x, 0.0))))
_act("hard_sigmoid",
     lambda xp, x, a: xp.clip(x * a["slope"] + a["offset"], 0.0, 1.0),
     lambda xp, x, o, a: a["slope"] * _mask((o > 0) & (o < 1), x))
_act("relu6",
     lambda xp, x, a: xp.clip(x, 0.0, a["threshold"]),
     lambda xp, x, o, a: _mask((x > 0) & (x < a["threshold"]), x))
_act("stanh",
     lambda xp, x, a: a["scale_b"] * xp.tanh(a["scale_a"] * x),
     lambda xp, x, o, a: a["scale_a"] * a["scale_b"] * (1.0 - xp.square(xp.tanh(a["scale_a"] * x))))
_act("swish",
     lambda xp, x, a: x * _special(xp).expit(a["beta"] * x),
     lambda xp, x, o, a: _swish_deriv(xp, x, a["beta"]))


def _swish_deriv(xp, x, beta):
    s = _special(xp).expit(beta * x)
    return s * (1.0 + beta * x * (1.0 - s))


def _hard_swish(xp, x, a):
    return x * xp.clip(x + a["offset"], 0.0, a["threshold"]) / a["scale"]


def _hard_swish_deriv(xp, x, o, a):
    # The derivative of the forward: threshold / scale where x + offset >= threshold. fluid
    # 1.8's kernel gives 1 there, which is that derivative only when threshold == scale (the
    # defaults, 6 and 6); spmd keeps the true derivative. The kinks take fluid's branches.
    t = x + a["offset"]
    inside = (t > 0) & (t < a["threshold"])
    return xp.where(inside, (2.0 * x + a["offset"]) / a["scale"],
                    _mask(t >= a["threshold"], x) * (a["threshold"] / a["scale"]))


_act("hard_swish", _hard_swish, _hard_swish_deriv)


def _selu(xp, x, a):
    neg = a["alpha"] * xp.expm1(xp.minimum(x, 0.0))
    return a["scale"] * xp.where(x > 0, x, neg)


def _selu_deriv(xp, x, o, a):
    return xp.where(x > 0, a["scale"], a["scale"] * a["alpha"] * xp.exp(xp.minimum(x, 0.0)))


_act("selu", _selu, _selu_deriv)


def _soft_relu(xp, x, a):
    t = a["threshold"]
    return xp.log1p(xp.exp(xp.clip(x, -t, t)))


def _soft_relu_deriv(xp, x, o, a):
    # The derivative of the forward: sigmoid(x) = 1 - e^-out inside the clip, 0 outside.
    # fluid 1.8 masks on out instead of x (-t < out < t), so it passes sigmoid(-t) below -t
    # and nothing for log(e^t - 1) <= x < t; at the default t = 40 both are below float
    # precision, at a small t they are not. spmd keeps the true derivative.
    t = a["threshold"]
    return -xp.expm1(-o) * ((x > -t) & (x < t))


_act("soft_relu", _soft_relu, _soft_relu_deriv)


def _mish_softplus(xp, x, t):
    """fluid's thresholded softplus: x above t, e^x below -t, log(1 + e^x) between."""
    return xp.where(x > t, x, xp.where(x < -t, xp.exp(xp.minimum(x, t)), _softplus(xp, x)))


def _mish(xp, x, a):
    return x * xp.tanh(_mish_softplus(xp, x, a["threshold"]))


def _mish_deriv(xp, x, o, a):
    # The derivative of the forward, the thresholded softplus sp included: d sp = 1 above t,
    # e^x below -t. fluid 1.8 uses 1 - e^-sp in all three pieces (exact only between -t and
    # t), so at a small threshold its gradient outside [-t, t] is not the derivative of its
    # own forward; at the default t = 20 the two agree to float precision.
    t = a["threshold"]
    th = xp.tanh(_mish_softplus(xp, x, t))
    dsp = xp.where(x > t, 1.0, xp.where(x < -t, xp.exp(xp.minimum(x, t)),
                                        _special(xp).expit(x)))
    return th + x * (1.0 - th * th) * dsp


_act("mish", _mish, _mish_deriv)
