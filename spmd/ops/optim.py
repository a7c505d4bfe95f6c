"""Op definitions: parameter update ops (sgd, momentum, adam, nadam) and the helpers optimizers use
(sign for L1 decay, clip_by_norm for GradientClipByNorm). The adaptive update ops are in
optim_adaptive.py, the step counter and learning-rate schedule ops in optim_schedule.py.

Update ops have no gradient. Their state outputs are bound by the optimizer to the same
variables as the matching inputs (ParamOut = Param, VelocityOut = Velocity, ...): that is how
parameters and accumulators persist from one run to the next.
"""
from __future__ import annotations

from .optim_common import check_same_shape as _check_same_shape
from .optim_common import check_scalar as _check_scalar
from .registry import REQUIRED, define_op


@define_op("sgd", inputs=["Param", "Grad", "LearningRate"], outputs=["ParamOut"], grad=None,
           movable=True, row_separable=True)
def _sgd(ctx):
    _check_same_shape(ctx, "Grad")
    _check_scalar(ctx, "LearningRate")
    ctx.set_output_like("ParamOut", "Param")


@define_op("momentum", inputs=["Param", "Grad", "Velocity", "LearningRate"],
           outputs=["ParamOut", "VelocityOut"], grad=None, movable=True, row_separable=True,
           attrs={"mu": ("float", REQUIRED), "use_nesterov": ("bool", False)})
def _momentum(ctx):
    """fluid 1.8 momentum_op: v = mu*v + g; nesterov: p -= (g + mu*v)*lr, else p -= lr*v."""
    _check_same_shape(ctx, "Grad")
    _check_same_shape(ctx, "Velocity")
    _check_scalar(ctx, "LearningRate")
    ctx.set_output_like("ParamOut", "Param")
    ctx.set_output_like("VelocityOut", "Velocity")


@define_op("adam",
           inputs=["Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow",
                   "Beta1Tensor?", "Beta2Tensor?"],
           outputs=["ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"],
           grad=None, movable=True, row_separable=True,
           attrs={"beta1": ("float", 0.9), "beta2": ("float", 0.999),
                  "epsilon": ("float", 1e-8), "lazy_mode": ("bool", False),
                  "min_row_size_to_use_multithread": ("int", 1000)})
def _adam(ctx):
    """fluid 1.8 adam_op (see spmd/kernels/optim.py for the exact update)."""
    _check_same_shape(ctx, "Grad")
    _check_same_shape(ctx, "Moment1")
    _check_same_shape(ctx, "Moment2")
    for slot in ("LearningRate", "Beta1Pow", "Beta2Pow", "Beta1Tensor", "Beta2Tensor"):
        _check_scalar(ctx, slot)
    for name in ("beta1", "beta2"):
        beta = ctx.attr(name)
        ctx.check(0.0 <= beta < 1.0, f"attribute {name} must be in [0, 1), got {beta}")
    ctx.check(ctx.attr("epsilon") >= 0.0,
              f"attribute epsilon must be >= 0, got {ctx.attr('epsilon')}")
    ctx.set_output_like("ParamOut", "Param")
    ctx.set_output_like("Moment1Out", "Moment1")
    ctx.set_output_like("Moment2Out", "Moment2")
    ctx.set_output_like("Beta1PowOut", "Beta1Pow")
    ctx.set_output_like("Beta2PowOut", "Beta2Pow")


_NADAM_STATE = {"param_out": "param", "momentum_decay_pow_out": "momentum_decay_pow",
                "beta2_pow_out": "beta2_pow", "mu_product_out": "mu_product",
                "moment1_out": "moment1", "moment2_out": "moment2"}


@define_op("nadam",
           inputs=["param", "grad", "learning_rate", "momentum_decay_pow", "beta2_pow",
                   "mu_product", "moment1", "moment2"],
           outputs=list(_NADAM_STATE), grad=None, movable=True, row_separable=True,
           attrs={"beta1": ("float", 0.9), "beta2": ("float", 0.999),
                  "epsilon": ("float", 1e-8), "momentum_decay": ("float", 0.004),
                  "multi_precision": ("bool", False)})
def _nadam(ctx):
    """Paddle 2.6+'s nadam op, with its lower-case slot names (the legacy static IR of 3.3.1).
    Every state input, the powers and mu_product included, has the parameter's shape (Paddle
    keeps them per element), so the update is elementwise; see spmd/kernels/optim.py."""
    for slot in ("grad", "momentum_decay_pow", "beta2_pow", "mu_product", "moment1",
                 "moment2"):
        _check_same_shape(ctx, slot, ref="param")
    _check_scalar(ctx, "learning_rate")
    for name in ("beta1", "beta2"):
        beta = ctx.attr(name)
        ctx.check(0.0 <= beta < 1.0, f"attribute {name} must be in [0, 1), got {beta}")
    for name in ("epsilon", "momentum_decay"):
        ctx.check(ctx.attr(name) >= 0.0, f"attribute {name} must be >= 0, got {ctx.attr(name)}")
    ctx.check(not ctx.attr("multi_precision"),
              "attribute multi_precision must be False: spmd keeps no master weights")
    for out, inp in _NADAM_STATE.items():
        ctx.set_output_like(out, inp)


def _sign_grad(op, g):
    """sign is flat almost everywhere: its gradient is zero (fluid: a scale by 0)."""
    dx, dout = g.in_grad(op.input("X")[0]), g.out_grad(op.output("Out")[0])
    if dx is None or dout is None:
        return []
    return [("scale", {"X": [dout]}, {"Out": [dx]}, {"scale": 0.0, "bias": 0.0})]


@define_op("sign", inputs=["X"], outputs=["Out"], grad=_sign_grad, row_separable=True)
def _sign(ctx):
    ctx.set_output_like("Out", "X")


@define_op("clip_by_norm", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"max_norm": ("float", REQUIRED)})
def _clip_by_norm(ctx):
    """Out = X * max_norm / max(||X||_2, max_norm): X unchanged when its norm is small enough."""
    max_norm = ctx.attr("max_norm")
    ctx.check(max_norm > 0.0, f"attribute max_norm must be > 0, got {max_norm}")
    ctx.set_output_like("Out", "X")
