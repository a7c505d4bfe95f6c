"""fluid.layers activation builders: fluid 1.8's ops.py activations (abs, sin, softplus, ...,
softshrink, hard_shrink, thresholded_relu, cumsum, erf) and nn.py's (brelu, elu, selu, swish,
prelu, log1p, log_softmax, sign, ...), with fluid's signatures and defaults.

>>> # y = fluid.layers.elu(x, alpha=0.5); z = fluid.layers.prelu(x, mode="channel")
"""
from __future__ import annotations

import numbers

from ..core.dtypes import convert_dtype
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer
from .math_ops import _unary

__all__ = [
    "abs", "acos", "asin", "atan", "brelu", "ceil", "cos", "cumsum", "elu", "erf", "floor",
    "hard_shrink", "hard_sigmoid", "hard_swish", "log1p", "log_softmax", "logsigmoid", "mish",
    "prelu", "reciprocal", "relu6", "round", "rsqrt", "selu", "sign", "sin", "soft_relu",
    "softplus", "softshrink", "softsign", "stanh", "swish", "tanh_shrink", "thresholded_relu",
]


def _noattr(op_type: str, doc: str):
    def layer(x, name=None):
        return _unary(op_type, x, name)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = (f"{doc}, elementwise (fluid.layers.{op_type}).\n\n"
                     f"    >>> # y = fluid.layers.{op_type}(x)\n    ")
    return layer


abs = _noattr("abs", "|x|")  # noqa: A001 - fluid's name
acos = _noattr("acos", "arccos(x)")
asin = _noattr("asin", "arcsin(x)")
atan = _noattr("atan", "arctan(x)")
ceil = _noattr("ceil", "The smallest integer >= x (gradient zero)")
cos = _noattr("cos", "cos(x)")
floor = _noattr("floor", "The largest integer <= x (gradient zero)")
logsigmoid = _noattr("logsigmoid", "log(1 / (1 + exp(-x)))")
reciprocal = _noattr("reciprocal", "1 / x")
# fluid 1.8.5's CPU kernel rounds halves to even except in the tail of the tensor (see the
# kernel); spmd rounds every half away from zero
round = _noattr("round", "x rounded, halves away from zero (gradient zero)")  # noqa: A001
rsqrt = _noattr("rsqrt", "1 / sqrt(x)")
sin = _noattr("sin", "sin(x)")
softplus = _noattr("softplus", "log(1 + exp(x))")
softsign = _noattr("softsign", "x / (1 + |x|)")
tanh_shrink = _noattr("tanh_shrink", "x - tanh(x)")


def erf(x):
    """The error function, elementwise.

    >>> # y = fluid.layers.erf(x)
    """
    return _unary("erf", x)


def _given(**attrs):
    """fluid's ops.py layers pass only the arguments the caller set (the op's defaults rule)."""
    return {k: v for k, v in attrs.items() if v is not None}


def softshrink(x, alpha=None):
    """x - alpha above alpha, x + alpha below -alpha, 0 between (op default alpha 0.5).

    >>> # y = fluid.layers.softshrink(x, alpha=0.3)
    """
    return _unary("softshrink", x, None, _given(**{"lambda": alpha}))


def hard_shrink(x, threshold=None):
    """x where |x| > threshold, else 0 (op default threshold 0.5).

    >>> # y = fluid.layers.hard_shrink(x, threshold=0.3)
    """
    return _unary("hard_shrink", x, None, _given(threshold=threshold))


def thresholded_relu(x, threshold=None):
    """x where x > threshold, else 0 (op default threshold 1.0).

    >>> # y = fluid.layers.thresholded_relu(x, threshold=0.5)
    """
    return _unary("thresholded_relu", x, None, _given(threshold=threshold))


def cumsum(x, axis=None, exclusive=None, reverse=None):
    """Cumulative sum along `axis` (op default -1); `exclusive` leaves each element out of its
    own sum, `reverse` sums from the end.

    >>> # y = fluid.layers.cumsum(x, axis=0)
    """
    return _unary("cumsum", x, None, _given(axis=axis, exclusive=exclusive, reverse=reverse))


def brelu(x, t_min=0.0, t_max=24.0, name=None):
    """x clipped to [t_min, t_max].

    >>> # y = fluid.layers.brelu(x, t_min=1.0, t_max=20.0)
    """
    return _unary("brelu", x, name, {"t_min": t_min, "t_max": t_max})


def elu(x, alpha=1.0, name=None):
    """x if x > 0 else alpha * (exp(x) - 1).

    >>> # y = fluid.layers.elu(x, alpha=0.2)
    """
    return _unary("elu", x, name, {"alpha": alpha})


def hard_sigmoid(x, slope=0.2, offset=0.5, name=None):
    """clip(slope * x + offset, 0, 1).

    >>> # y = fluid.layers.hard_sigmoid(x)
    """
    return _unary("hard_sigmoid", x, name, {"slope": slope, "offset": offset})


def hard_swish(x, threshold=6.0, scale=6.0, offset=3.0, name=None):
    """x * min(max(x + offset, 0), threshold) / scale.

    The gradient is this function's derivative: threshold / scale where x + offset >=
    threshold. fluid 1.8's CPU kernel uses 1 there, the same only when threshold == scale
    (the defaults); with other values spmd trains by the true derivative, not fluid's.

    >>> # y = fluid.layers.hard_swish(x)
    """
    return _unary("hard_swish", x, name,
                  {"threshold": threshold, "scale": scale, "offset": offset})


def mish(x, threshold=20, name=None):
    """x * tanh(softplus(x)), softplus taken as x above `threshold` (and e^x below
    -threshold), as in fluid.

    The gradient is this function's derivative. fluid 1.8's uses sigmoid-like factors
    1 - exp(-softplus) in the two outer pieces too, which is not the derivative of its own
    forward there; at the default threshold (20) the difference is below float precision,
    at a small one spmd's gradient differs from fluid's outside [-threshold, threshold].

    >>> # y = fluid.layers.mish(x)
    """
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or threshold <= 0:
        raise InvalidArgumentError(f"mish: threshold must be a number > 0, got {threshold!r}")
    return _unary("mish", x, name, {"threshold": threshold})


def relu6(x, threshold=6.0, name=None):
    """min(max(0, x), threshold).

    >>> # y = fluid.layers.relu6(x)
    """
    return _unary("relu6", x, name, {"threshold": threshold})


def selu(x, scale=None, alpha=None, name=None):
    """scale * (x if x > 0 else alpha * (exp(x) - 1)); None keeps the op's self-normalizing
    constants (scale 1.0507..., alpha 1.6732...).

    >>> # y = fluid.layers.selu(x)
    """
    return _unary("selu", x, name, _given(scale=scale, alpha=alpha))


def soft_relu(x, threshold=40.0, name=None):
    """log(1 + exp(clip(x, -threshold, threshold))).

    The gradient is this function's derivative, sigmoid(x) inside the clip and 0 outside.
    fluid 1.8 tests the output instead of x against the threshold, so it passes
    sigmoid(-threshold) below -threshold and 0 just under +threshold; at the default
    threshold (40) neither shows in float32/float64, at a small one spmd differs there.

    >>> # y = fluid.layers.soft_relu(x, threshold=20.0)
    """
    return _unary("soft_relu", x, name, {"threshold": threshold})


def stanh(x, scale_a=0.67, scale_b=1.7159, name=None):
    """scale_b * tanh(scale_a * x).

    >>> # y = fluid.layers.stanh(x)
    """
    return _unary("stanh", x, name, {"scale_a": scale_a, "scale_b": scale_b})


def swish(x, beta=1.0, name=None):
    """x * sigmoid(x).

    fluid 1.8's layer hands `beta` to the op under a name the op does not read, so its swish
    always uses beta = 1; spmd keeps that, so programs give fluid's numbers. Set another beta
    with the op itself (the act dict {"type": "swish", "beta": 2.0}).

    >>> # y = fluid.layers.swish(x)
    """
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise InvalidArgumentError(f"swish: beta must be a number, got {beta!r}")
    return _unary("swish", x, name)


def prelu(x, mode, param_attr=None, name=None):
    """x if x > 0 else alpha * x, with a learned alpha (float32, initialized to 0.25): one
    value (mode 'all'), one per channel of dim 1 ('channel', alpha shape [1, C, 1, 1]) or one
    per element of a sample ('element', shape [1] + x.shape[1:]).

    >>> # y = fluid.layers.prelu(x, mode="channel")
    """
    helper = LayerHelper("prelu", param_attr=param_attr, name=name)
    check_variable(x, "x", "prelu", {"float32", "float64"})
    if mode not in ("all", "channel", "element"):
        raise InvalidArgumentError(
            f"prelu: mode must be 'all', 'channel' or 'element', got {mode!r}")
    if mode == "channel":
        if x.ndim < 2:
            raise InvalidArgumentError(
                f"prelu: mode 'channel' needs x of rank >= 2 (N, C, ...), got {list(x.shape)}")
        shape = [1, x.shape[1], 1, 1]
    elif mode == "element":
        shape = [1] + list(x.shape[1:])
    else:
        shape = [1]
    alpha = helper.create_parameter(helper.param_attr, shape, "float32",
                                    default_initializer=ConstantInitializer(0.25))
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("prelu", {"X": [x], "Alpha": [alpha]}, {"Out": [out]}, {"mode": mode})
    return out


def log1p(x, out=None, name=None):
    """log(1 + x); written into `out` when one is given.

    >>> # y = fluid.layers.log1p(x)
    """
    check_variable(x, "x", "log1p", {"float32", "float64"})
    if out is None:
        return _unary("log1p", x, name)
    check_variable(out, "out", "log1p")
    LayerHelper("log1p").append_op("log1p", {"X": [x]}, {"Out": [out]})
    return out


def log_softmax(input, axis=None, dtype=None, name=None):  # noqa: A002 - fluid's names
    """log(softmax(input)) along `axis` (default -1), after casting to `dtype` when given.

    >>> # y = fluid.layers.log_softmax(x, axis=1)
    """
    helper = LayerHelper("log_softmax", name=name)
    check_variable(input, "input", "log_softmax")
    axis = -1 if axis is None else axis
    src = input
    if dtype is not None:
        dtype = convert_dtype(dtype)
        src = helper.create_variable_for_type_inference(dtype)
        helper.append_op("cast", {"X": [input]}, {"Out": [src]},
                         {"in_dtype": input.dtype, "out_dtype": dtype})
    soft = helper.create_variable_for_type_inference(src.dtype)
    helper.append_op("softmax", {"X": [src]}, {"Out": [soft]},
                     {"axis": axis, "use_cudnn": False})
    out = helper.create_variable_for_type_inference(src.dtype)
    helper.append_op("log", {"X": [soft]}, {"Out": [out]})
    return out


def sign(x):
    """-1, 0 or 1 by the sign of x (gradient zero); a numpy array is first made a constant.

    >>> # y = fluid.layers.sign(x)
    """
    if not hasattr(x, "block"):
        from .tensor import assign

        x = assign(x)
    check_variable(x, "x", "sign", {"float16", "float32", "float64"})
    return _unary("sign", x)
