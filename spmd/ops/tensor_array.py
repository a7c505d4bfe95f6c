"""Op definitions: tensor arrays: create_array, write_to_array, read_from_array,
lod_array_length, tensor_array_to_tensor and sum_tensor_array (kernels in
spmd/kernels/tensor_array.py). A tensor array's value is a Python list of tensors (None where
nothing was written); its gradient is a list too.
"""
from __future__ import annotations

from .registry import define_op


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
