"""Op definitions: arithmetic, elementwise ops with fluid's axis broadcasting (add ... max, pow,
floordiv, mod), increment, sum, scale, cumsum and prelu.

>>> # OP_DEFS["elementwise_mod"].grad is None   # as in fluid
"""
from __future__ import annotations

import math

from .registry import broadcast_dim, define_op


def _prod(dims) -> int:
    """Product of dims, -1 when any of them is unknown."""
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _check_same_dtype(ctx, a, b):
    # numpy would silently promote; fluid picks the kernel from X and rejects a mismatch
    ctx.check(a.dtype == b.dtype,
              f"X '{a.name}' is {a.dtype} but Y '{b.name}' is {b.dtype}; cast one of them "
              f"(layers.cast) so both have the same dtype")


# -- sum, scale, mul ---------------------------------------------------------------------------

def _sum_grad(op, g):
    dout = g.out_grad(op.output("Out")[0])
    if dout is None:
        return []
    return [("assign", {"X": [dout]}, {"Out": [dx]}, {})
            for dx in (g.in_grad(n) for n in op.input("X")) if dx is not None]


@define_op("sum", inputs=["X*"], outputs=["Out"], grad=_sum_grad, row_separable=True)
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
    inputs = {"X": [dout]}
    if op.input("ScaleTensor"):  # the same run-time factor scales the gradient
        inputs["ScaleTensor"] = op.input("ScaleTensor")
    return [("scale", inputs, {"Out": [dx]}, {"scale": op.attr("scale"), "bias": 0.0})]


@define_op("scale", inputs=["X", "ScaleTensor?"], outputs=["Out"], grad=_scale_grad,
           no_grad_inputs=("ScaleTensor",), row_separable=True,
           attrs={"scale": ("float", 1.0), "bias": ("float", 0.0),
                  "bias_after_scale": ("bool", True)})
def _scale(ctx):
    """ScaleTensor, a one-element tensor, overrides attribute scale when given (fluid 1.8)."""
    t = ctx.input("ScaleTensor")
    if t is not None:
        ctx.check(_prod(t.shape) in (-1, 1),
                  f"ScaleTensor '{t.name}' must hold one value (it overrides attribute scale), "
                  f"got shape {list(t.shape)}")
    ctx.set_output_like("Out", "X")


def _flat2(shape, k):
    """The 2-D shape a tensor is flattened to by mul's num_col_dims = k."""
    return _prod(shape[:k]), _prod(shape[k:])


# mul_grad takes Out (every forward slot) but its kernel never reads it: no-need-buffer, so the
# product's buffer need not live from the forward pass to the backward one for it
@define_op("mul", inputs=["X", "Y"], outputs=["Out"],
           attrs={"x_num_col_dims": ("int", 1), "y_num_col_dims": ("int", 1)},
           grad_no_need_buffer=("Out",))
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


# -- matmul ------------------------------------------------------------------------------------

def _matrix_view(shape, is_x: bool, transpose: bool):
    """(batch dims, rows, cols) of a matmul operand as fluid sees it: a vector is the row matrix
    [1, K] as X and the column matrix [K, 1] as Y, and transposing swaps rows and cols."""
    if len(shape) == 1 and is_x:
        batch, rows, cols = (), 1, shape[0]
    elif len(shape) == 1:
        batch, rows, cols = (), shape[0], 1
    else:
        batch, rows, cols = tuple(shape[:-2]), shape[-2], shape[-1]
    return (batch, cols, rows) if transpose else (batch, rows, cols)


def matmul_out_shape(x_shape, y_shape, transpose_x: bool, transpose_y: bool) -> tuple:
    """fluid 1.8's matmul output shape: batch dims of whichever operand has them, then
    [M, N], dropping the 1 a vector operand contributed; [1] rather than a scalar."""
    xb, m, _ = _matrix_view(x_shape, True, transpose_x)
    yb, _, n = _matrix_view(y_shape, False, transpose_y)
    out = [*(xb or yb), m, n]
    if len(x_shape) == 1 and out[-2] == 1:
        del out[-2]
    if len(y_shape) == 1 and out[-1] == 1:
        del out[-1]
    return tuple(out) or (1,)


@define_op("matmul", inputs=["X", "Y"], outputs=["Out"],
           attrs={"transpose_X": ("bool", False), "transpose_Y": ("bool", False),
                  "alpha": ("float", 1.0), "use_mkldnn": ("bool", False)})
def _matmul(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    tx, ty = ctx.attr("transpose_X"), ctx.attr("transpose_Y")
    ctx.check(len(x.shape) >= 1 and len(y.shape) >= 1,
              f"X{list(x.shape)} and Y{list(y.shape)} must have rank >= 1")
    _check_same_dtype(ctx, x, y)
    xb, m, kx = _matrix_view(x.shape, True, tx)
    yb, ky, n = _matrix_view(y.shape, False, ty)
    ctx.check(kx < 0 or ky < 0 or kx == ky,
              f"X{list(x.shape)} (transpose_X={tx}) multiplies as a [{m}, {kx}] matrix and "
              f"Y{list(y.shape)} (transpose_Y={ty}) as a [{ky}, {n}] one: the inner sizes "
              f"{kx} and {ky} must be equal")
    if xb and yb:
        bx, by = _prod(xb), _prod(yb)
        ctx.check(bx < 0 or by < 0 or bx == by,
                  f"batch dims {list(xb)} of X{list(x.shape)} and {list(yb)} of "
                  f"Y{list(y.shape)} hold {bx} and {by} matrices: they must hold as many")
    ctx.set_output("Out", matmul_out_shape(x.shape, y.shape, tx, ty), x.dtype)


# -- elementwise binary ops --------------------------------------------------------------------

def _elementwise_infer(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    _check_same_dtype(ctx, x, y)
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
                  f"axis={axis} does not place Y{list(y.shape)} inside X{list(x.shape)}: "
                  f"expected 0 <= axis <= {len(x.shape) - len(y.shape)} (or -1)")
        for a, b in zip(x.shape[axis:], y.shape):
            ctx.check(a == b or b == 1 or -1 in (a, b),
                      f"Y{list(y.shape)} does not match X{list(x.shape)} from axis {axis}")
        shape = x.shape
    ctx.set_output("Out", shape, x.dtype)


ELEMENTWISE_ATTRS = {"axis": ("int", -1), "use_mkldnn": ("bool", False)}

# The grad kernels need X and Y (their shapes at least); div also reads Out, as fluid's does.
# add's and sub's read X and Y only for their shapes (fluid: DECLARE_NO_NEED_BUFFER_VARS_INFERER
# (ElementwiseGradNoBufVarsInference, "X", "Y")), so the plan need not keep their buffers.
for _type, _uses, _shape_only in [
        ("elementwise_add", ("X", "Y"), ("X", "Y")), ("elementwise_sub", ("X", "Y"), ("X", "Y")),
        ("elementwise_mul", ("X", "Y"), ()), ("elementwise_div", ("X", "Y", "Out"), ()),
        ("elementwise_max", ("X", "Y"), ()), ("elementwise_min", ("X", "Y"), ())]:
    define_op(_type, inputs=["X", "Y"], outputs=["Out"], attrs=ELEMENTWISE_ATTRS,
              grad_uses=_uses, grad_no_need_buffer=_shape_only,
              row_separable=True)(_elementwise_infer)

def _floordiv_infer(ctx):
    # fluid 1.8 registers elementwise_floordiv for int32 / int64 only ("does not have kernel
    # for data_type[float]"); a float kernel here would round toward zero, not down
    x = ctx.input("X")
    ctx.check(x.dtype in ("int32", "int64"),
              f"X '{x.name}' is {x.dtype}; elementwise_floordiv (the // operator) takes int32 "
              f"or int64 tensors, as in fluid 1.8. For floats use layers.floor(x / y)")
    _elementwise_infer(ctx)


# fluid registers no gradient for integer-style division and remainder
define_op("elementwise_floordiv", inputs=["X", "Y"], outputs=["Out"], attrs=ELEMENTWISE_ATTRS,
          grad=None)(_floordiv_infer)
define_op("elementwise_mod", inputs=["X", "Y"], outputs=["Out"], attrs=ELEMENTWISE_ATTRS,
          grad=None)(_elementwise_infer)
define_op("elementwise_pow", inputs=["X", "Y"], outputs=["Out"], attrs=ELEMENTWISE_ATTRS,
          grad_uses=("X", "Y"))(_elementwise_infer)


@define_op("increment", inputs=["X"], outputs=["Out"], attrs={"step": ("float", 1.0)},
           grad=None)
def _increment(ctx):
    """Out = X + step for a one-element X (a loop counter); fluid gives it no gradient."""
    x = ctx.input("X")
    n = _prod(x.shape)
    ctx.check(n in (-1, 1), f"X '{x.name}' must hold one element, got shape {list(x.shape)}")
    ctx.set_output_like("Out", "X")


# -- reductions --------------------------------------------------------------------------------


@define_op("cumsum", inputs=["X"], outputs=["Out"], grad_uses=("X",),
           attrs={"axis": ("int", -1), "exclusive": ("bool", False), "reverse": ("bool", False)})
def _cumsum(ctx):
    x = ctx.input("X")
    axis, rank = ctx.attr("axis"), len(x.shape)
    ctx.check(-rank <= axis < rank,
              f"axis={axis} is out of range for X{list(x.shape)}: expected -{rank} <= axis "
              f"< {rank}")
    ctx.set_output_like("Out", "X")


_PRELU_MODES = ("all", "channel", "element")


@define_op("prelu", inputs=["X", "Alpha"], outputs=["Out"], grad_uses=("X", "Alpha"),
           attrs={"mode": ("str", "all")})
def _prelu(ctx):
    x, alpha, mode = ctx.input("X"), ctx.input("Alpha"), ctx.attr("mode")
    ctx.check(mode in _PRELU_MODES, f"attribute mode={mode!r} must be one of {_PRELU_MODES}")
    n = _prod(alpha.shape)
    if mode == "all":
        want = 1
    elif mode == "channel":
        ctx.check(len(x.shape) >= 2, f"mode 'channel' needs X of rank >= 2, got {list(x.shape)}")
        want = x.shape[1]
    else:
        want = _prod(x.shape[1:])
    ctx.check(n < 0 or want < 0 or n == want,
              f"mode {mode!r}: Alpha{list(alpha.shape)} holds {n} values, X{list(x.shape)} "
              f"needs {want}")
    ctx.set_output_like("Out", "X")
