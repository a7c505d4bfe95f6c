"""Op definitions: fluid 1.8's activation ops (relu, sigmoid, tanh, gelu, leaky_relu, exp,
log, sqrt, square, pow, clip, abs, trigonometric, shrinks, elu/selu/swish family, log1p).

Every one keeps X's shape and dtype. Attribute names and defaults are fluid's op attributes
(softshrink's is `lambda`, swish's `beta`); the layers in spmd/layers/activation.py map the
Python arguments onto them.

>>> # OP_DEFS["elu"].attrs["alpha"].default == 1.0
"""
from __future__ import annotations

from .math import _prod
from .registry import REQUIRED, define_op

# -- the core activations -----------------------------------------------------------------

# fluid's activation op makers carry these two flags; accepted so fluid-built programs load
ACTIVATION_ATTRS = {"use_mkldnn": ("bool", False), "use_cudnn": ("bool", False)}


def _unary(type_, attrs=None, infer_check=None, **kwargs):
    """Define a one-input, same-shape op (activations); `infer_check(ctx)` validates attrs."""

    def infer(ctx):
        if infer_check is not None:
            infer_check(ctx)
        ctx.set_output_like("Out", "X")

    define_op(type_, inputs=["X"], outputs=["Out"], attrs={**ACTIVATION_ATTRS, **(attrs or {})},
              **kwargs)(infer)


# grad_uses names what each gradient formula reads: Out where it is cheaper (sigmoid, tanh,
# exp, sqrt), X where the formula needs it.
_unary("relu", grad_uses=("Out",))
_unary("leaky_relu", attrs={"alpha": ("float", 0.02)}, grad_uses=("X",))
_unary("sigmoid", grad_uses=("Out",))
_unary("tanh", grad_uses=("Out",))
_unary("gelu", attrs={"approximate": ("bool", False)}, grad_uses=("X",))
_unary("exp", grad_uses=("Out",))
_unary("log", grad_uses=("X",))
_unary("sqrt", grad_uses=("Out",))
_unary("square", grad_uses=("X",))

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


def _check_clip(ctx):
    lo, hi = ctx.attr("min"), ctx.attr("max")
    ctx.check(lo <= hi, f"attribute min={lo} is greater than max={hi}: expected min <= max")


@define_op("clip", inputs=["X", "Min?", "Max?"], outputs=["Out"],
           attrs={**ACTIVATION_ATTRS, "min": ("float", REQUIRED), "max": ("float", REQUIRED)},
           no_grad_inputs=("Min", "Max"), grad_uses=("X", "Min", "Max"), row_separable=True)
def _clip(ctx):
    """Min / Max, one-element tensors, override the attributes when given (fluid's clamp)."""
    for slot in ("Min", "Max"):
        t = ctx.input(slot)
        if t is not None:
            ctx.check(_prod(t.shape) in (-1, 1),
                      f"{slot} '{t.name}' must hold one value, got shape {list(t.shape)}")
    if not ctx.has_input("Min") and not ctx.has_input("Max"):
        _check_clip(ctx)
    ctx.set_output_like("Out", "X")


@define_op("pow", inputs=["X", "FactorTensor?"], outputs=["Out"],
           attrs={**ACTIVATION_ATTRS, "factor": ("float", 1.0)},
           no_grad_inputs=("FactorTensor",), grad_uses=("X", "FactorTensor"))
def _pow(ctx):
    f = ctx.input("FactorTensor")
    if f is not None:
        n = _prod(f.shape)
        ctx.check(n in (-1, 1),
                  f"FactorTensor '{f.name}' must hold one value (it overrides attribute "
                  f"factor), got shape {list(f.shape)}")
    ctx.set_output_like("Out", "X")
