"""Op definitions: control flow over sub-blocks (while, conditional_block, recurrent and their
gradients), selecting between branches, tensor arrays, is_empty and the dense form of IfElse's
split/merge.

An op that runs a block names it by index (`sub_block`) and lists, as attributes, the names
its block uses for what the op's slots carry (`x_names`, `out_names`, ...): the slots hold the
caller's variables, which a gradient block's copy of the op may have renamed, while the block
always reads the names it was built with. The gradients of these ops are made by
spmd/autodiff/control_flow.py (they differentiate the block). A tensor array's value is a
Python list of tensors (None where nothing was written); its gradient is a list too.
"""
from __future__ import annotations

from .registry import define_op

_NAMES = ("strs", [])


@define_op("while", inputs=["X*", "Condition"], outputs=["Out*", "StepScopes?"], grad=None,
           attrs={"sub_block": "block", "is_test": ("bool", False), "x_names": _NAMES,
                  "out_names": _NAMES, "cond_name": ("str", "")},
           lod_inputs=("X",), lod_outputs=("Out",))
def _while(ctx):
    c = ctx.input("Condition")
    ctx.check(c.dtype == "bool", f"Condition '{c.name}' must be bool, got {c.dtype}")
    ctx.check(len(ctx.inputs("X")) == len(ctx.attr("x_names")),
              "X and x_names must have the same length")
    ctx.check(ctx.num_outputs("Out") == len(ctx.attr("out_names")),
              "Out and out_names must have the same length")


@define_op("while_grad", inputs=["X*", "Out*", "Out@GRAD*", "StepScopes"], outputs=["X@GRAD*"],
           grad=None, lod_inputs=("X",),
           attrs={"sub_block": "block", "x_names": _NAMES, "out_names": _NAMES,
                  "grad_out_names": _NAMES, "seed_names": _NAMES, "result_names": _NAMES})
def _while_grad(ctx):
    ctx.set_output_like("X@GRAD", "X")


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


_RNN_NAMES = {"step_input_names": _NAMES, "ex_states": _NAMES, "states": _NAMES,
              "param_names": _NAMES, "step_output_names": _NAMES}


@define_op("recurrent", inputs=["inputs*", "initial_states*", "parameters*"],
           outputs=["outputs*", "step_scopes?"], grad=None,
           attrs={"sub_block": "block", "reverse": ("bool", False), "is_train": ("bool", True),
                  "has_states": ("bool", False), **_RNN_NAMES})
def _recurrent(ctx):
    xs = ctx.inputs("inputs")
    ctx.check(bool(xs), "a StaticRNN needs at least one step input (rnn.step_input(x))")
    lengths = {x.shape[0] for x in xs if x.shape and x.shape[0] >= 0}
    ctx.check(len(lengths) <= 1, f"every step input must have the same length (dim 0), got "
                                 f"{[list(x.shape) for x in xs]}")
    ctx.check(len(ctx.inputs("initial_states")) == len(ctx.attr("ex_states"))
              == len(ctx.attr("states")), "initial_states, ex_states and states must align")


@define_op("recurrent_grad",
           inputs=["inputs*", "initial_states*", "parameters*", "outputs@GRAD*", "step_scopes"],
           outputs=["inputs@GRAD*", "initial_states@GRAD*", "parameters@GRAD*"], grad=None,
           attrs={"sub_block": "block", "reverse": ("bool", False), **_RNN_NAMES,
                  "grad_output_names": _NAMES, "seed_names": _NAMES, "result_names": _NAMES})
def _recurrent_grad(ctx):
    for slot in ("inputs", "initial_states", "parameters"):
        ctx.set_output_like(slot + "@GRAD", slot)


# fluid's rnn_memory_helper_grad reads X and Out (for their shapes only: X@GRAD is zeros like X
# when Out@GRAD is absent) beside Out@GRAD, and Paddle's tests build it with all three
@define_op("rnn_memory_helper", inputs=["X"], outputs=["Out"], grad_uses=("X", "Out"),
           grad_no_need_buffer=("X", "Out"), attrs={"dtype": ("any", None)})
def _rnn_memory_helper(ctx):
    ctx.set_output_like("Out", "X")


# -- selecting a branch's value ---------------------------------------------------------------

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


# -- tensor arrays ------------------------------------------------------------------------------

@define_op("create_array", outputs=["Out"], grad=None, attrs={"dtype": ("dtype", "float32")})
def _create_array(ctx):
    """An empty tensor array (fluid makes one when a scope first sees the variable)."""
    ctx.set_output("Out", (), ctx.attr("dtype"))


def _check_index(ctx, slot="I"):
    i = ctx.input(slot)
    ctx.check(i.dtype == "int64", f"{slot} '{i.name}' must be int64, got {i.dtype}")


@define_op("write_to_array", inputs=["X", "I", "Array?"], outputs=["Out"],
           no_grad_inputs=("I",), grad_uses=("X", "I"),
           lod_inputs=("X", "Array"), lod_outputs=("Out",))
def _write_to_array(ctx):
    """Out = Array with element I set to X (fluid writes the array in place; here the op also
    reads the array it writes, so that a loop carries it). An array's LoD is the list of its
    elements' LoDs, and its lod_level theirs."""
    _check_index(ctx)
    x = ctx.input("X")  # an array's shape is its elements' (the last one written)
    ctx.set_output("Out", x.shape, x.dtype)
    array = ctx.input("Array")
    ctx.set_lod_level("Out", max(x.lod_level, array.lod_level if array else 0))


@define_op("read_from_array", inputs=["X", "I"], outputs=["Out"], no_grad_inputs=("I",),
           grad_uses=("X", "I"), lod_inputs=("X",), lod_outputs=("Out",))
def _read_from_array(ctx):
    _check_index(ctx)
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_lod_level("Out", x.lod_level)


@define_op("lod_array_length", inputs=["X"], outputs=["Out"], grad=None)
def _lod_array_length(ctx):
    ctx.set_output("Out", (1,), "int64")


@define_op("tensor_array_to_tensor", inputs=["X"], outputs=["Out", "OutIndex"],
           nondiff_outputs=("OutIndex",), grad_uses=("X",),
           attrs={"axis": ("int", 1), "use_stack": ("bool", False)})
def _tensor_array_to_tensor(ctx):
    x = ctx.input("X")
    shape = list(x.shape)
    axis = ctx.attr("axis")
    if ctx.attr("use_stack"):
        axis = axis if axis >= 0 else axis + len(shape) + 1
        ctx.check(0 <= axis <= len(shape), f"axis {ctx.attr('axis')} is out of range for "
                                           f"elements of shape {shape}")
        shape.insert(axis, -1)
    elif shape:
        axis = axis if axis >= 0 else axis + len(shape)
        ctx.check(0 <= axis < len(shape), f"axis {ctx.attr('axis')} is out of range for "
                                          f"elements of shape {shape}")
        shape[axis] = -1
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("OutIndex", (-1,), "int32")


@define_op("sum_tensor_array", inputs=["X*"], outputs=["Out"], grad=None)
def _sum_tensor_array(ctx):
    """The sum of tensor arrays' gradients, element by element (None counts as zero)."""
    ctx.set_output("Out", (), ctx.inputs("X")[0].dtype)


# -- is_empty, IfElse's split and merge (dense: rows chosen by a [N, 1] bool mask) ------------

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
