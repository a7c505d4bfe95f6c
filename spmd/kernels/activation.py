"""Kernels: activations (relu, leaky_relu, sigmoid, tanh, gelu, exp, log, sqrt, square, pow,
clip).

Written against `xp`; results keep the input dtype (Python float constants only, never numpy
float64 scalars, which would promote float32 arrays).
"""
from __future__ import annotations

import math

import numpy as np

from .registry import kernel

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



@kernel("relu")
def relu(xp, ins, attrs, want):
    return {"Out": xp.maximum(ins["X"], 0)}


@kernel("relu_grad")
def relu_grad(xp, ins, attrs, want):
    out, dout = ins["Out"], ins["Out@GRAD"]
    return {"X@GRAD": dout * (out > 0)}


@kernel("leaky_relu")
def leaky_relu(xp, ins, attrs, want):
    # x if x > 0 else alpha * x: the formula fluid's gradient uses (its 1.8 forward,
    # max(x, alpha * x), is the same for the documented 0 <= alpha <= 1)
    x = ins["X"]
    return {"Out": xp.where(x > 0, x, x * attrs["alpha"])}


@kernel("leaky_relu_grad")
def leaky_relu_grad(xp, ins, attrs, want):
    x, dout = ins["X"], ins["Out@GRAD"]
    return {"X@GRAD": xp.where(x > 0, dout, dout * attrs["alpha"])}


@kernel("sigmoid")
def sigmoid(xp, ins, attrs, want):
    return {"Out": _special(xp).expit(ins["X"])}  # no overflow warning for very negative x


@kernel("sigmoid_grad")
def sigmoid_grad(xp, ins, attrs, want):
    out, dout = ins["Out"], ins["Out@GRAD"]
    t = 1.0 - out
    t *= out
    t *= dout
    return {"X@GRAD": t}


@kernel("tanh")
def tanh(xp, ins, attrs, want):
    return {"Out": xp.tanh(ins["X"])}


@kernel("tanh_grad")
def tanh_grad(xp, ins, attrs, want):
    out, dout = ins["Out"], ins["Out@GRAD"]
    t = out * out
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
    return {"Out": xp.power(ins["X"], _pow_factor(ins, attrs))}


@kernel("pow_grad")
def pow_grad(xp, ins, attrs, want):
    factor = _pow_factor(ins, attrs)
    t = xp.power(ins["X"], factor - 1.0)
    t *= factor
    t *= ins["Out@GRAD"]
    return {"X@GRAD": t}


@kernel("clip")
def clip(xp, ins, attrs, want):
    return {"Out": xp.clip(ins["X"], attrs["min"], attrs["max"])}


@kernel("clip_grad")
def clip_grad(xp, ins, attrs, want):
    x = ins["X"]
    inside = x > attrs["min"]
    inside &= x < attrs["max"]
    return {"X@GRAD": ins["Out@GRAD"] * inside}
