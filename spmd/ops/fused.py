"""Op definitions: the fused ops BuildStrategy's fusion passes make (spmd/passes/fuse_*.py).

- `fused_elemwise_activation`: fluid's op of that name, an elementwise_add and an activation in
  one op. functor_list [act, "elementwise_add"] is Out = act(X + Y); ["elementwise_add", act] is
  Out = X + act(Y). IntermediateOut (bound when save_intermediate_out) holds X + Y, or act(Y).
- `fused_batch_norm_act`: fluid's op of that name, batch_norm (batch statistics) then relu.
- `fused_sgd`, `fused_momentum`, `fused_adam`: which they are and their shared slots
  (`FUSED_UPDATES`, `SHARED_SLOTS`); they are defined beside their kernel, in optim_fused.py.

Every fused op computes exactly what its unfused ops compute (the kernels say how).

>>> # OP_DEFS["fused_elemwise_activation"].attrs["functor_list"].kind == "strs"
"""
from __future__ import annotations

from .math import _elementwise_infer
from .nn import _batch_norm
from .registry import OP_DEFS, REQUIRED, define_op

# the activations fused with elementwise_add: each gradient is computed from the activation's
# output (or, for scale, from nothing), so X + Y itself need not be kept
FUSABLE_ACTS = ("relu", "sigmoid", "tanh", "scale")
ADD = "elementwise_add"


def parse_functors(functor_list) -> tuple[str, bool]:
    """(the activation, whether it is applied after the add: act(X + Y)), or ValueError."""
    functors = list(functor_list)
    if len(functors) == 2 and functors[1] == ADD and functors[0] in FUSABLE_ACTS:
        return functors[0], True
    if len(functors) == 2 and functors[0] == ADD and functors[1] in FUSABLE_ACTS:
        return functors[1], False
    raise ValueError(f"functor_list must be [act, '{ADD}'] or ['{ADD}', act] with act one of "
                     f"{list(FUSABLE_ACTS)}, got {functors}")


@define_op("fused_elemwise_activation", inputs=["X", "Y"], outputs=["Out", "IntermediateOut?"],
           attrs={"functor_list": ("strs", REQUIRED), "axis": ("int", -1),
                  "scale": ("float", 0.0), "save_intermediate_out": ("bool", False)},
           nondiff_outputs=("IntermediateOut",), share_lod=(("X", "Out"),))
def _fused_elemwise_activation(ctx):
    try:
        _, act_outside = parse_functors(ctx.attr("functor_list"))
    except ValueError as e:
        ctx.fail(str(e))
    ctx.check(ctx.attr("save_intermediate_out") == ctx.has_output("IntermediateOut"),
              "IntermediateOut is bound exactly when save_intermediate_out is True")
    _elementwise_infer(ctx)
    if act_outside:  # X + Y has Out's shape
        out = ctx.results["Out"][0]
        ctx.set_output("IntermediateOut", out[0], out[1])
    else:  # act(Y) has Y's shape
        ctx.set_output_like("IntermediateOut", "Y")


_BN = OP_DEFS["batch_norm"]


@define_op("fused_batch_norm_act", inputs=["X", "Scale", "Bias", "Mean", "Variance"],
           outputs=["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance",
                    "ReserveSpace?"],
           attrs={"momentum": ("float", 0.9), "epsilon": ("float", 1e-5),
                  "act_type": ("str", "relu"), "data_layout": ("str", "NCHW")},
           no_grad_inputs=("Mean", "Variance"),
           nondiff_outputs=("MeanOut", "VarianceOut", "SavedMean", "SavedVariance",
                            "ReserveSpace"),
           grad_uses=("X", "Scale", "Bias", "Y", "SavedMean", "SavedVariance"),
           share_lod=(("X", "Y"),))
def _fused_batch_norm_act(ctx):
    """batch_norm's checks and shapes (training mode: batch statistics), act_type relu."""
    act = ctx.attr("act_type")
    ctx.check(act == "relu", f"act_type must be 'relu' (as fluid 1.8's), got {act!r}")
    ctx.attrs = {**ctx.attrs, "fuse_with_relu": False}  # what batch_norm's checks read
    _batch_norm(ctx)


# -- one update of many parameters -------------------------------------------------------------

SHARED_SLOTS = ("LearningRate", "Beta1Tensor", "Beta2Tensor")  # one variable for every member
FUSED_UPDATES = {"sgd": "fused_sgd", "momentum": "fused_momentum", "adam": "fused_adam"}
