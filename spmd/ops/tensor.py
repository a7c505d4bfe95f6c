"""Op definitions: creation, copying and reshaping of tensors."""
from __future__ import annotations

from .registry import define_op


@define_op("fill_constant", outputs=["Out"], grad=None,
           attrs={"shape": ("ints", []), "value": ("float", 0.0), "dtype": ("dtype", "float32"),
                  "str_value": ("str", ""), "force_cpu": ("bool", False)})
def _fill_constant(ctx):
    ctx.set_output("Out", ctx.attr("shape"), ctx.attr("dtype"))


@define_op("fill_any_like", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"value": ("float", 0.0), "dtype": ("any", None)})
def _fill_any_like(ctx):
    x = ctx.input("X")
    dtype = ctx.attr("dtype")
    ctx.set_output("Out", x.shape, x.dtype if dtype in (None, -1) else _dtype(dtype))


def _dtype(value):
    from .registry import _dtype_name

    return _dtype_name(value)


@define_op("fill_zeros_like", inputs=["X"], outputs=["Out"], grad=None)
def _fill_zeros_like(ctx):
    ctx.set_output_like("Out", "X")


def _assign_grad(op, g):
    dx = g.in_grad(op.input("X")[0])
    dout = g.out_grad(op.output("Out")[0])
    if dx is None or dout is None:
        return []
    return [("assign", {"X": [dout]}, {"Out": [dx]}, {})]


@define_op("assign", inputs=["X"], outputs=["Out"], grad=_assign_grad)
def _assign(ctx):
    ctx.set_output_like("Out", "X")
