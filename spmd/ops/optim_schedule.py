"""Op definitions: the learning-rate schedules of fluid.layers.learning_rate_scheduler, and
the helpers of LookaheadOptimizer and ExponentialMovingAverage.

fluid 1.8 builds each schedule out of a dozen elementwise ops and control-flow Switch blocks on
a float copy of the step counter (advanced by the `increment` op of spmd/ops/math.py); spmd has
no control flow in the static graph yet, so each schedule is one `lr_<schedule>` op reading the
int64 counter and writing the float32 [1] learning rate. The values are fluid's
(tests/unit/test_lr_schedules.py compares them with fluid 1.8.5's). None has a gradient.
"""
from __future__ import annotations

from .optim_common import check_same_shape, check_scalar
from .registry import REQUIRED, define_op

_F = "float"


def _schedule(ctx):
    check_scalar(ctx, "Step")
    ctx.set_output("Out", (1,), "float32")


_DECAY_ATTRS = {"learning_rate": (_F, REQUIRED), "decay_steps": (_F, REQUIRED),
                "decay_rate": (_F, REQUIRED), "staircase": ("bool", False)}

for _name in ("exponential_decay", "natural_exp_decay", "inverse_time_decay"):
    define_op(f"lr_{_name}", inputs=["Step"], outputs=["Out"], grad=None,
              attrs=dict(_DECAY_ATTRS))(_schedule)


@define_op("lr_polynomial_decay", inputs=["Step"], outputs=["Out"], grad=None,
           attrs={"learning_rate": (_F, REQUIRED), "decay_steps": (_F, REQUIRED),
                  "end_learning_rate": (_F, 0.0001), "power": (_F, 1.0),
                  "cycle": ("bool", False)})
def _polynomial(ctx):
    _schedule(ctx)


@define_op("lr_piecewise_decay", inputs=["Step"], outputs=["Out"], grad=None,
           attrs={"boundaries": ("floats", REQUIRED), "values": ("floats", REQUIRED)})
def _piecewise(ctx):
    b, v = ctx.attr("boundaries"), ctx.attr("values")
    ctx.check(len(v) == len(b) + 1,
              f"values must have one entry more than boundaries, got {len(v)} values for "
              f"{len(b)} boundaries")
    _schedule(ctx)


@define_op("lr_noam_decay", inputs=["Step"], outputs=["Out"], grad=None,
           attrs={"d_model": (_F, REQUIRED), "warmup_steps": (_F, REQUIRED),
                  "learning_rate": (_F, 1.0)})
def _noam(ctx):
    _schedule(ctx)


@define_op("lr_cosine_decay", inputs=["Step"], outputs=["Out"], grad=None,
           attrs={"learning_rate": (_F, REQUIRED), "step_each_epoch": (_F, REQUIRED),
                  "epochs": (_F, REQUIRED)})
def _cosine(ctx):
    _schedule(ctx)


@define_op("lr_linear_warmup", inputs=["Step", "LearningRate?"], outputs=["Out"], grad=None,
           attrs={"learning_rate": (_F, 0.0), "warmup_steps": (_F, REQUIRED),
                  "start_lr": (_F, REQUIRED), "end_lr": (_F, REQUIRED)})
def _linear_warmup(ctx):
    """After the warmup, Out is the LearningRate input when given (a schedule of its own),
    else the `learning_rate` attribute."""
    check_scalar(ctx, "Step")
    check_scalar(ctx, "LearningRate")
    lr = ctx.input("LearningRate")
    ctx.set_output("Out", (1,), lr.dtype if lr is not None else "float32")


@define_op("lookahead_step", inputs=["Param", "SlowParam", "Step"],
           outputs=["ParamOut", "SlowParamOut"], grad=None,
           attrs={"alpha": (_F, 0.5), "k": ("int", 5)})
def _lookahead_step(ctx):
    """LookaheadOptimizer: every k-th step, slow = alpha*fast + (1-alpha)*slow and fast = slow."""
    check_same_shape(ctx, "SlowParam")
    check_scalar(ctx, "Step")
    ctx.check(ctx.attr("k") > 0, f"attribute k must be > 0, got {ctx.attr('k')}")
    ctx.set_output_like("ParamOut", "Param")
    ctx.set_output_like("SlowParamOut", "SlowParam")


@define_op("ema_bias_correction", inputs=["Ema", "Decay", "Step"], outputs=["Out"], grad=None)
def _ema_bias_correction(ctx):
    """ExponentialMovingAverage.apply: Out = Ema / (1 - Decay**Step), or Ema at step 0."""
    check_scalar(ctx, "Decay")
    check_scalar(ctx, "Step")
    ctx.set_output_like("Out", "Ema")
