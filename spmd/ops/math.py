"""Op definitions: arithmetic, elementwise ops with fluid's axis broadcasting, activations,
reductions."""
from __future__ import annotations

from .registry import broadcast_dim, define_op


def _sum_grad(op, g):
    dout = g.out_grad(op.output("Out")[0])
    if dout is None:
        return []
    return [("assign", {"X": [dout]}, {"Out": [dx]}, {})
            for dx in (g.in_grad(n) for n in op.input("X")) if dx is not None]


@define_op("sum", inputs=["X*"], outputs=["Out"], grad=_sum_grad)
def _sum(ctx):
    xs = ctx.inputs("X")
    ctx.check(len(xs) > 0, "needs at least one input in X")
    shape = xs[0].shape
    for x in xs[1:]:
        ctx.check(len(x.shape) == len(shape), f"inputs have different ranks: {shape} vs {x.shape}")
        shape = tuple(broadcast_dim(a, b) for a, b in zip(shape, x.shape))
    ctx.set_output("Out", shape, xs[0].dtype)


def _scale_grad(op, g):
    dx, dout = g.in_grad(op.input("X")[0]), g.out_grad(op.output("Out")[0])
    if dx is None or dout is None:
        return []
    return [("scale", {"X": [dout]}, {"Out": [dx]},
             {"scale": op.attr("scale"), "bias": 0.0})]


@define_op("scale", inputs=["X"], outputs=["Out"], grad=_scale_grad,
           attrs={"scale": ("float", 1.0), "bias": ("float", 0.0),
                  "bias_after_scale": ("bool", True)})
def _scale(ctx):
    ctx.set_output_like("Out", "X")


def _flat2(shape, k):
    """The 2-D shape a tensor is flattened to by mul's num_col_dims = k."""
    import math

    def prod(dims):
        return -1 if any(d < 0 for d in dims) else math.prod(dims)

    return prod(shape[:k]), prod(shape[k:])


@define_op("mul", inputs=["X", "Y"], outputs=["Out"],
           attrs={"x_num_col_dims": ("int", 1), "y_num_col_dims": ("int", 1)})
def _mul(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    xk, yk = ctx.attr("x_num_col_dims"), ctx.attr("y_num_col_dims")
    ctx.check(0 < xk < len(x.shape) + 1 and 0 < yk < len(y.shape),
              f"num_col_dims out of range for X{list(x.shape)} / Y{list(y.shape)}")
    xr, xc = _flat2(x.shape, xk)
    yr, yc = _flat2(y.shape, yk)
    ctx.check(xc < 0 or yr < 0 or xc == yr,
              f"X{list(x.shape)} flattens to [{xr}, {xc}] and Y{list(y.shape)} to [{yr}, {yc}]: "
              f"inner sizes {xc} and {yr} differ")
    ctx.set_output("Out", tuple(x.shape[:xk]) + tuple(y.shape[yk:]), x.dtype)


def _elementwise_infer(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    axis = ctx.attr("axis")
    if axis == -1 or len(x.shape) == len(y.shape):
        n = max(len(x.shape), len(y.shape))
        xs = (1,) * (n - len(x.shape)) + tuple(x.shape)
        ys = (1,) * (n - len(y.shape)) + tuple(y.shape)
        for a, b in zip(xs, ys):
            ctx.check(a == b or 1 in (a, b) or -1 in (a, b),
                      f"X{list(x.shape)} and Y{list(y.shape)} do not broadcast")
        shape = tuple(broadcast_dim(a, b) for a, b in zip(xs, ys))
    else:
        ctx.check(0 <= axis and axis + len(y.shape) <= len(x.shape),
                  f"axis={axis} does not place Y{list(y.shape)} inside X{list(x.shape)}")
        for a, b in zip(x.shape[axis:], y.shape):
            ctx.check(a == b or b == 1 or -1 in (a, b),
                      f"Y{list(y.shape)} does not match X{list(x.shape)} from axis {axis}")
        shape = x.shape
    ctx.set_output("Out", shape, x.dtype)


ELEMENTWISE_ATTRS = {"axis": ("int", -1), "use_mkldnn": ("bool", False)}

define_op("elementwise_add", inputs=["X", "Y"], outputs=["Out"], attrs=ELEMENTWISE_ATTRS,
          grad_uses=("X", "Y"))(_elementwise_infer)


def _unary(type_, **kwargs):
    """Define a one-input, same-shape op (activations)."""

    def infer(ctx):
        ctx.set_output_like("Out", "X")

    define_op(type_, inputs=["X"], outputs=["Out"], **kwargs)(infer)


_unary("relu", grad_uses=("Out",))


@define_op("mean", inputs=["X"], outputs=["Out"], grad_uses=("X",))
def _mean(ctx):
    ctx.set_output("Out", (1,), ctx.input("X").dtype)  # fluid 1.8: mean gives shape [1]
