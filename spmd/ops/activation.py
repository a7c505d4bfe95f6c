"""Op definitions: fluid 1.8's activation ops beyond the core ones in spmd/ops/math.py
(abs, trigonometric, shrinks, elu/selu/swish family, prelu, cumsum, log1p).

Every one keeps X's shape and dtype. Attribute names and defaults are fluid's op attributes
(softshrink's is `lambda`, swish's `beta`); the layers in spmd/layers/activation.py map the
Python arguments onto them.

>>> # OP_DEFS["elu"].attrs["alpha"].default == 1.0
"""
from __future__ import annotations

from .math import _prod, _unary
from .registry import define_op

# Smooth ops: the gradient kernel reads X and Out (whichever its formula is cheaper with).
_SMOOTH = ["abs", "acos", "asin", "atan", "cos", "sin", "erf", "logsigmoid", "reciprocal",
           "rsqrt", "softplus", "softsign", "tanh_shrink", "log1p"]
for _t in _SMOOTH:
    _unary(_t, grad_uses=("X", "Out"))

# Piecewise-constant ops: fluid registers a gradient that is zero everywhere; so do we, so a
# program differentiating through them runs (and gets zeros) as in fluid.
for _t in ["ceil", "floor", "round"]:
    _unary(_t, grad_uses=("X",))

_WITH_ATTRS = {
    "hard_shrink": {"threshold": ("float", 0.5)},
    "softshrink": {"lambda": ("float", 0.5)},
    "thresholded_relu": {"threshold": ("float", 1.0)},
    "brelu": {"t_min": ("float", 0.0), "t_max": ("float", 24.0)},
    "elu": {"alpha": ("float", 1.0)},
    "hard_sigmoid": {"slope": ("float", 0.2), "offset": ("float", 0.5)},
    "hard_swish": {"threshold": ("float", 6.0), "scale": ("float", 6.0),
                   "offset": ("float", 3.0)},
    "mish": {"threshold": ("float", 20.0)},
    "relu6": {"threshold": ("float", 6.0)},
    "selu": {"scale": ("float", 1.0507009873554804934193349852946),
             "alpha": ("float", 1.6732632423543772848170429916717)},
    "soft_relu": {"threshold": ("float", 40.0)},
    "stanh": {"scale_a": ("float", 0.67), "scale_b": ("float", 1.7159)},
    "swish": {"beta": ("float", 1.0)},
}


def _check_brelu(ctx):
    lo, hi = ctx.attr("t_min"), ctx.attr("t_max")
    ctx.check(lo <= hi, f"attribute t_min={lo} must not exceed t_max={hi}")


def _check_positive(name):
    def check(ctx):
        v = ctx.attr(name)
        ctx.check(v > 0, f"attribute {name} must be > 0, got {v}")
    return check


_CHECKS = {"brelu": _check_brelu, "mish": _check_positive("threshold")}

for _t, _attrs in _WITH_ATTRS.items():
    _unary(_t, attrs=_attrs, infer_check=_CHECKS.get(_t), grad_uses=("X", "Out"))


@define_op("cumsum", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"axis": ("int", -1), "exclusive": ("bool", False), "reverse": ("bool", False)})
def _cumsum(ctx):
    x = ctx.input("X")
    axis, rank = ctx.attr("axis"), len(x.shape)
    ctx.check(-rank <= axis < rank,
              f"axis={axis} is out of range for X{list(x.shape)}: expected -{rank} <= axis "
              f"< {rank}")
    ctx.set_output_like("Out", "X")


_PRELU_MODES = ("all", "channel", "element")


@define_op("prelu", inputs=["X", "Alpha"], outputs=["Out"], grad_uses=("X", "Alpha"),
           attrs={"mode": ("str", "all")})
def _prelu(ctx):
    x, alpha, mode = ctx.input("X"), ctx.input("Alpha"), ctx.attr("mode")
    ctx.check(mode in _PRELU_MODES, f"attribute mode={mode!r} must be one of {_PRELU_MODES}")
    n = _prod(alpha.shape)
    if mode == "all":
        want = 1
    elif mode == "channel":
        ctx.check(len(x.shape) >= 2, f"mode 'channel' needs X of rank >= 2, got {list(x.shape)}")
        want = x.shape[1]
    else:
        want = _prod(x.shape[1:])
    ctx.check(n < 0 or want < 0 or n == want,
              f"mode {mode!r}: Alpha{list(alpha.shape)} holds {n} values, X{list(x.shape)} "
              f"needs {want}")
    ctx.set_output_like("Out", "X")
