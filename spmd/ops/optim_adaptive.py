"""Op definitions: fluid 1.8's adaptive update ops (adagrad, decayed_adagrad, rmsprop, adadelta,
adamax, ftrl, lamb, lars_momentum) and average_accumulates (ModelAverage).

Slots, attributes and defaults are fluid 1.8's; the formulas are in the kernels
(spmd/kernels/optim_adaptive.py). Like sgd/momentum/adam they have no gradient, and their state
outputs are bound to the same variables as the matching inputs.
"""
from __future__ import annotations

from .optim_common import check_same_shape, check_scalar
from .registry import REQUIRED, define_op

_F = "float"


def _update_op(ctx, state: dict[str, str], scalars=("LearningRate",)):
    """Shapes of an update op: Grad and each state input shaped like Param, `scalars` one
    element each; every output shaped like its input (`state`: out slot -> in slot)."""
    check_same_shape(ctx, "Grad")
    for out, inp in state.items():
        if out != "ParamOut":
            check_same_shape(ctx, inp)
        ctx.set_output_like(out, inp)
    for slot in scalars:
        check_scalar(ctx, slot)


@define_op("adagrad", inputs=["Param", "Grad", "Moment", "LearningRate"],
           outputs=["ParamOut", "MomentOut"], grad=None, movable=True, row_separable=True,
           attrs={"epsilon": (_F, 1e-6)})
def _adagrad(ctx):
    _update_op(ctx, {"ParamOut": "Param", "MomentOut": "Moment"})


@define_op("decayed_adagrad", inputs=["Param", "Grad", "Moment", "LearningRate"],
           outputs=["ParamOut", "MomentOut"], grad=None,
           movable=True, row_separable=True,
           attrs={"decay": (_F, 0.95), "epsilon": (_F, 1e-6)})
def _decayed_adagrad(ctx):
    _update_op(ctx, {"ParamOut": "Param", "MomentOut": "Moment"})


@define_op("rmsprop",
           inputs=["Param", "Grad", "Moment", "MeanSquare", "MeanGrad?", "LearningRate"],
           outputs=["ParamOut", "MomentOut", "MeanSquareOut", "MeanGradOut?"], grad=None,
           movable=True, row_separable=True,
           attrs={"epsilon": (_F, 1e-10), "decay": (_F, 0.9), "momentum": (_F, 0.0),
                  "centered": ("bool", False)})
def _rmsprop(ctx):
    state = {"ParamOut": "Param", "MomentOut": "Moment", "MeanSquareOut": "MeanSquare"}
    if ctx.attr("centered"):
        ctx.check(ctx.has_input("MeanGrad") and ctx.has_output("MeanGradOut"),
                  "centered rmsprop needs the MeanGrad input and the MeanGradOut output")
        state["MeanGradOut"] = "MeanGrad"
    _update_op(ctx, state)


@define_op("adadelta", inputs=["Param", "Grad", "AvgSquaredGrad", "AvgSquaredUpdate"],
           outputs=["ParamOut", "AvgSquaredGradOut", "AvgSquaredUpdateOut"], grad=None,
           movable=True, row_separable=True,
           attrs={"rho": (_F, 0.95), "epsilon": (_F, 1e-6)})
def _adadelta(ctx):
    """fluid 1.8's adadelta has no learning rate input: the step size comes from the ratio of
    the running averages alone."""
    _update_op(ctx, {"ParamOut": "Param", "AvgSquaredGradOut": "AvgSquaredGrad",
                     "AvgSquaredUpdateOut": "AvgSquaredUpdate"}, scalars=())


@define_op("adamax",
           inputs=["Param", "Grad", "LearningRate", "Moment", "InfNorm", "Beta1Pow"],
           outputs=["ParamOut", "MomentOut", "InfNormOut"], grad=None,
           movable=True, row_separable=True,
           attrs={"beta1": (_F, 0.9), "beta2": (_F, 0.999), "epsilon": (_F, 1e-8)})
def _adamax(ctx):
    """Beta1Pow is read, not updated: the optimizer appends a scale op for it afterwards."""
    _update_op(ctx, {"ParamOut": "Param", "MomentOut": "Moment", "InfNormOut": "InfNorm"},
               scalars=("LearningRate", "Beta1Pow"))


@define_op("ftrl",
           inputs=["Param", "SquaredAccumulator", "LinearAccumulator", "Grad", "LearningRate"],
           outputs=["ParamOut", "SquaredAccumOut", "LinearAccumOut"], grad=None,
           movable=True, row_separable=True,
           attrs={"l1": (_F, 0.0), "l2": (_F, 0.0), "lr_power": (_F, -0.5)})
def _ftrl(ctx):
    _update_op(ctx, {"ParamOut": "Param", "SquaredAccumOut": "SquaredAccumulator",
                     "LinearAccumOut": "LinearAccumulator"})


@define_op("lamb",
           inputs=["Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow",
                   "Beta2Pow"],
           outputs=["ParamOut", "Moment1Out", "Moment2Out"], grad=None, movable=True,
           attrs={"weight_decay": (_F, REQUIRED), "beta1": (_F, 0.9), "beta2": (_F, 0.999),
                  "epsilon": (_F, 1e-6)})
def _lamb(ctx):
    """Needs the norms of the whole parameter: not row-separable (Reduce mode keeps it whole)."""
    _update_op(ctx, {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2"},
               scalars=("LearningRate", "Beta1Pow", "Beta2Pow"))


@define_op("lars_momentum", inputs=["Param", "Grad", "Velocity", "LearningRate"],
           outputs=["ParamOut", "VelocityOut"], grad=None, movable=True,
           attrs={"mu": (_F, REQUIRED), "lars_coeff": (_F, 0.001),
                  "lars_weight_decay": (_F, 0.0005)})
def _lars_momentum(ctx):
    """Needs the norms of the whole parameter and gradient: not row-separable."""
    _update_op(ctx, {"ParamOut": "Param", "VelocityOut": "Velocity"})


_AVG_STATE = {"out_sum_1": "in_sum_1", "out_sum_2": "in_sum_2", "out_sum_3": "in_sum_3",
              "out_num_accumulates": "in_num_accumulates",
              "out_old_num_accumulates": "in_old_num_accumulates",
              "out_num_updates": "in_num_updates"}


@define_op("average_accumulates", inputs=["param"] + list(_AVG_STATE.values()),
           outputs=list(_AVG_STATE), grad=None,
           attrs={"average_window": (_F, 0.0), "max_average_window": ("int", 2 ** 62),
                  "min_average_window": ("int", 10000)})
def _average_accumulates(ctx):
    """ModelAverage's running sums of a parameter (fluid 1.8 average_accumulates_op)."""
    for slot in ("in_sum_1", "in_sum_2", "in_sum_3"):
        check_same_shape(ctx, slot, ref="param")
    for slot in ("in_num_accumulates", "in_old_num_accumulates", "in_num_updates"):
        check_scalar(ctx, slot)
    ctx.check(ctx.attr("min_average_window") <= ctx.attr("max_average_window"),
              f"min_average_window ({ctx.attr('min_average_window')}) must be <= "
              f"max_average_window ({ctx.attr('max_average_window')})")
    for out, inp in _AVG_STATE.items():
        ctx.set_output_like(out, inp)
