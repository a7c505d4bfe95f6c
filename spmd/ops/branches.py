"""Op definitions: choosing between branches: conditional_block (and its gradient), select_input /
select_output, is_empty and the dense form of IfElse's split/merge (kernels in
spmd/kernels/branches.py).

An op that runs a block names it by index (`sub_block`) and lists, as attributes, the names
its block uses for what the op's slots carry (`x_names`, `out_names`, ...): the slots hold the
caller's variables, which a gradient block's copy of the op may have renamed, while the block
always reads the names it was built with. The gradients of these ops are made by
spmd/autodiff/control_flow.py (they differentiate the block).
"""
from __future__ import annotations

from .registry import define_op

_NAMES = ("strs", [])  # a list of a block's variable names


@define_op("conditional_block", inputs=["Cond*", "Input*"], outputs=["Out*", "Scope?"],
           grad=None, lod_inputs=("Input",), lod_outputs=("Out",),
           attrs={"sub_block": "block", "is_scalar_condition": ("bool", False),
                  "input_names": _NAMES, "out_names": _NAMES})
def _conditional_block(ctx):
    ctx.check(ctx.num_outputs("Out") == len(ctx.attr("out_names")),
              "Out and out_names must have the same length")


@define_op("conditional_block_grad", inputs=["Input*", "Out@GRAD*", "Scope"],
           outputs=["Input@GRAD*"], grad=None, lod_inputs=("Input",),
           attrs={"sub_block": "block", "input_names": _NAMES, "out_names": _NAMES,
                  "grad_out_names": _NAMES, "seed_names": _NAMES, "result_names": _NAMES})
def _conditional_block_grad(ctx):
    ctx.set_output_like("Input@GRAD", "Input")


@define_op("select_input", inputs=["X*", "Mask"], outputs=["Out"], no_grad_inputs=("Mask",),
           grad_uses=("X", "Mask"), lod_inputs=("X",), lod_outputs=("Out",))
def _select_input(ctx):
    """Out = X[Mask], with its LoD (a branch may return a LoD tensor)."""
    mask = ctx.input("Mask")
    ctx.check(mask.dtype == "int32", f"Mask '{mask.name}' must be int32, got {mask.dtype}")
    xs = ctx.inputs("X")
    ctx.set_output("Out", xs[0].shape, xs[0].dtype)
    ctx.set_lod_level("Out", max(x.lod_level for x in xs))


@define_op("select_output", inputs=["X", "Mask"], outputs=["Out*"], no_grad_inputs=("Mask",),
           grad_uses=("X", "Mask"), lod_inputs=("X",), lod_outputs=("Out",))
def _select_output(ctx):
    mask = ctx.input("Mask")
    ctx.check(mask.dtype == "int32", f"Mask '{mask.name}' must be int32, got {mask.dtype}")
    x = ctx.input("X")
    for i in range(ctx.num_outputs("Out")):
        ctx.set_output("Out", x.shape, x.dtype, index=i)


@define_op("is_empty", inputs=["X"], outputs=["Out"], grad=None)
def _is_empty(ctx):
    ctx.set_output("Out", (1,), "bool")


# The mask holds one value per unit: a row of X without LoD, else a sequence of X's LoD level
# `level` (the units keep their sub-sequences). Its dtype is not checked when the op is built
# (fluid's InferShape does not; its kernel reads the values as bool, and so does spmd's: a
# fluid.layers.data mask declared float32 and fed bool works, as in Paddle's tests).
@define_op("split_lod_tensor", inputs=["X", "Mask"], outputs=["OutTrue", "OutFalse"],
           no_grad_inputs=("Mask",), grad_uses=("X", "Mask"), attrs={"level": ("int", 0)},
           lod_inputs=("X",), lod_outputs=("OutTrue", "OutFalse"))
def _split_lod_tensor(ctx):
    x = ctx.input("X")
    shape = (-1, *x.shape[1:])
    ctx.set_output("OutTrue", shape, x.dtype)
    ctx.set_output("OutFalse", shape, x.dtype)
    level = max(x.lod_level - ctx.attr("level"), 0)
    ctx.set_lod_level("OutTrue", level)
    ctx.set_lod_level("OutFalse", level)


@define_op("merge_lod_tensor", inputs=["X", "Mask", "InTrue", "InFalse"], outputs=["Out"],
           no_grad_inputs=("X", "Mask"), grad_uses=("X", "Mask", "InTrue", "InFalse"),
           attrs={"level": ("int", 0)}, lod_inputs=("X", "InTrue", "InFalse"),
           lod_outputs=("Out",))
def _merge_lod_tensor(ctx):
    x, t = ctx.input("X"), ctx.input("InTrue")
    ctx.set_output("Out", (x.shape[0] if x.shape else -1, *t.shape[1:]), t.dtype)
    ctx.set_lod_level("Out", x.lod_level)


# fluid's inference form of merge_lod_tensor (same inputs and result, no gradient)
@define_op("merge_lod_tensor_infer", inputs=["X", "Mask", "InTrue", "InFalse"],
           outputs=["Out"], grad=None, attrs={"level": ("int", 0)},
           lod_inputs=("X", "InTrue", "InFalse"), lod_outputs=("Out",))
def _merge_lod_tensor_infer(ctx):
    _merge_lod_tensor(ctx)
