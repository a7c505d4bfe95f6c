"""Kernels: arithmetic, elementwise ops with fluid's axis broadcasting, cumsum, prelu.

Written against `xp`; results keep the input dtype (Python float constants only, never numpy
float64 scalars, which would promote float32 arrays). Temporaries are made once and then
updated in place, because these bodies run on every training step.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.selected_rows import SelectedRows, add_rows
from ..errors import InvalidArgumentError
from .registry import kernel, lent_for
from .sparse_update import SparseValues

# -- sum, scale, mul ---------------------------------------------------------------------------

@kernel("sum")
def sum_(xp, ins, attrs, want):
    xs = ins["X"]
    if any(isinstance(x, SelectedRows) for x in xs):
        return {"Out": _sum_sparse(xp, xs)}
    if len(xs) == 1:
        return {"Out": xs[0].copy()}
    out = xs[0] + xs[1]  # the one fresh buffer; the rest accumulate into it
    for x in xs[2:]:
        if x.shape == out.shape:
            out += x
        else:  # a broadcast input may widen the result
            out = out + x
    return {"Out": out}


def _sum_sparse(xp, xs):
    """Sparse gradients of one table summed as fluid does: all SelectedRows give their rows
    and values end to end; any dense term makes the sum dense."""
    sparse = [x for x in xs if isinstance(x, SelectedRows)]
    dense = [x for x in xs if not isinstance(x, SelectedRows)]
    if not dense:
        return SelectedRows(xp.concatenate([x.rows for x in sparse]),
                            xp.concatenate([x.value for x in sparse]), sparse[0].height)
    out = dense[0].copy()
    for x in dense[1:]:
        out += x
    for x in sparse:
        add_rows(xp, out, x.rows, x.value)
    return out


@kernel("scale", reuses=(("Out", "X"),))
def scale(xp, ins, attrs, want, lent=None):
    x = ins["X"]
    factor = ins.get("ScaleTensor")
    factor = attrs["scale"] if factor is None else float(factor.reshape(-1)[0])
    if isinstance(x, SelectedRows):  # fluid scales a sparse gradient's values (its rows kept)
        return {"Out": SelectedRows(x.rows, scale(xp, dict(ins, X=x.value), attrs,
                                                  want)["Out"], x.height)}
    # constants in X's dtype (fluid casts them so: an int tensor scaled by 0.5 gives zeros);
    # one buffer, fresh or X's own when the plan lends it (executor/inplace.py), updated in place
    s, b = x.dtype.type(factor), x.dtype.type(attrs["bias"])
    into = None if lent is None else lent_for(lent, "Out", x, s)
    if attrs["bias_after_scale"]:
        out = x * s if into is None else xp.multiply(x, s, out=into)
        if b:
            out += b
    else:
        out = x + b if into is None else xp.add(x, b, out=into)
        out *= s
    return {"Out": out}


def _as_matrix(a, k):
    return a.reshape(math.prod(a.shape[:k]), -1)


@kernel("mul")
def mul(xp, ins, attrs, want):
    x, y = ins["X"], ins["Y"]
    xk, yk = attrs["x_num_col_dims"], attrs["y_num_col_dims"]
    out = _as_matrix(x, xk) @ _as_matrix(y, yk)
    shape = x.shape[:xk] + y.shape[yk:]
    # the product itself where it has Out's shape, not a view of it: a view is never lent
    # (executor/inplace.py), and the fc's bias add may write into it once it dies there
    return {"Out": out if out.shape == shape else out.reshape(shape)}


@kernel("mul_grad", context=True, pure=True)
def mul_grad(xp, ins, attrs, want, ctx):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    xk, yk = attrs["x_num_col_dims"], attrs["y_num_col_dims"]
    x2, y2 = _as_matrix(x, xk), _as_matrix(y, yk)
    d2 = dout.reshape(x2.shape[0], y2.shape[1])
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = (d2 @ y2.T).reshape(x.shape)
    if "Y@GRAD" in want:
        out = ctx.out(xp, "Y@GRAD")
        if out is not None:  # straight into its slot of a gradient bucket
            xp.matmul(x2.T, d2, out=out.reshape(y2.shape))
            res["Y@GRAD"] = out
        else:
            res["Y@GRAD"] = (x2.T @ d2).reshape(y.shape)
    return res


# -- matmul ------------------------------------------------------------------------------------

def _matmul_operands(x, y, attrs):
    """X and Y as (batch, M, K) / (batch, K, N) stacks or plain matrices, transposes applied as
    views: a vector X is the row [1, K], a vector Y the column [K, 1], batch dims flattened."""
    a = x.reshape(1, x.shape[0]) if x.ndim == 1 else x
    b = y.reshape(y.shape[0], 1) if y.ndim == 1 else y
    if a.ndim > 3:
        a = a.reshape((-1,) + a.shape[-2:])
    if b.ndim > 3:
        b = b.reshape((-1,) + b.shape[-2:])
    if a.ndim == 3 and b.ndim == 3 and a.shape[0] != b.shape[0]:
        # only reachable when shape inference saw unknown (-1) batch dims
        raise InvalidArgumentError(
            f"matmul: X{list(x.shape)} holds {a.shape[0]} matrices and Y{list(y.shape)} "
            f"holds {b.shape[0]}: batched operands must hold as many")
    if attrs["transpose_X"]:
        a = a.swapaxes(-1, -2)
    if attrs["transpose_Y"]:
        b = b.swapaxes(-1, -2)
    return a, b


def _matmul_out_shape(x, y, m, n):
    """Mirror of spmd.ops.math.matmul_out_shape on concrete arrays (kernels cannot import ops)."""
    batch = x.shape[:-2] if x.ndim > 2 else y.shape[:-2] if y.ndim > 2 else ()
    out = [*batch, m, n]
    if x.ndim == 1 and out[-2] == 1:
        del out[-2]
    if y.ndim == 1 and out[-1] == 1:
        del out[-1]
    return tuple(out) or (1,)


@kernel("matmul")
def matmul(xp, ins, attrs, want):
    x, y = ins["X"], ins["Y"]
    a, b = _matmul_operands(x, y, attrs)
    out = xp.matmul(a, b)
    if attrs["alpha"] != 1.0:
        out *= attrs["alpha"]
    return {"Out": out.reshape(_matmul_out_shape(x, y, a.shape[-2], b.shape[-1]))}


@kernel("matmul_grad")
def matmul_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    a, b = _matmul_operands(x, y, attrs)
    batch = a.shape[:-2] if a.ndim == 3 else b.shape[:-2]
    d = dout.reshape(batch + (a.shape[-2], b.shape[-1]))
    alpha = attrs["alpha"]
    res = {}
    if "X@GRAD" in want:
        if a.ndim == 2 and d.ndim == 3:  # X was shared by every batch entry: sum over them
            da = xp.tensordot(d, b, axes=([0, 2], [0, 2]))
        else:
            da = xp.matmul(d, b.swapaxes(-1, -2))
        res["X@GRAD"] = _operand_grad(xp, da, x, attrs["transpose_X"], alpha)
    if "Y@GRAD" in want:
        if b.ndim == 2 and d.ndim == 3:
            db = xp.tensordot(a, d, axes=([0, 1], [0, 1]))
        else:
            db = xp.matmul(a.swapaxes(-1, -2), d)
        res["Y@GRAD"] = _operand_grad(xp, db, y, attrs["transpose_Y"], alpha)
    return res


def _operand_grad(xp, g, operand, transposed, alpha):
    """The gradient of a transposed-as-view operand, back in the operand's own layout."""
    if transposed:
        g = g.swapaxes(-1, -2)
    g = xp.ascontiguousarray(g).reshape(operand.shape)  # contiguous for collectives
    if alpha != 1.0:
        g *= alpha  # g is fresh: made by matmul/tensordot above
    return g


# -- elementwise binary ops --------------------------------------------------------------------

def align_y(x, y, axis):
    """Reshape Y so numpy broadcasting applies fluid's rule: Y's dims match X's from `axis`."""
    if axis == -1 or x.ndim == y.ndim:
        return y
    return y.reshape((1,) * axis + y.shape + (1,) * (x.ndim - axis - y.ndim))


def unbroadcast(xp, grad, shape):
    """Sum `grad` over the axes that broadcasting expanded, giving an array of `shape`.
    Returns `grad` itself when nothing was broadcast."""
    if grad.shape == tuple(shape):
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and grad.shape[lead + i] != 1)
    return grad.sum(axis=axes).reshape(shape) if axes else grad.reshape(shape)


def _elementwise(type_, fn):
    """Register the forward kernel of a binary op computing fn(xp, x, aligned y)."""

    def forward(xp, ins, attrs, want):
        x = ins["X"]
        return {"Out": fn(xp, x, align_y(x, ins["Y"], attrs["axis"]))}

    # gradient clipping scales a sparse gradient's values (elementwise_mul by a scalar)
    kernel(type_, sparse=SparseValues() if type_ == "elementwise_mul" else None)(forward)


@kernel("elementwise_add", reuses=(("Out", "X"),))
def elementwise_add(xp, ins, attrs, want, lent=None):
    # X's buffer, when the plan lends it (X dies here), takes the sum where Out has X's shape
    # and dtype: a bias added to a layer's output that nothing reads later (inference)
    x = ins["X"]
    y = align_y(x, ins["Y"], attrs["axis"])
    if lent is None:
        return {"Out": x + y}
    return {"Out": xp.add(x, y, out=lent_for(lent, "Out", x, y))}


_elementwise("elementwise_sub", lambda xp, x, y: x - y)
_elementwise("elementwise_mul", lambda xp, x, y: x * y)
_elementwise("elementwise_div", lambda xp, x, y: _int_quotient(xp, x, y, "elementwise_div")
             if x.dtype.kind in "iu" else x / y)
_elementwise("elementwise_max", lambda xp, x, y: xp.maximum(x, y))
_elementwise("elementwise_min", lambda xp, x, y: xp.minimum(x, y))


def _aligned_shape(x, y, axis) -> tuple:
    """The shape align_y gives Y, from X's ndim and Y's shape only (the grad kernels of add and
    sub may be given shape-only stand-ins for X and Y: their buffers are not needed)."""
    shape = tuple(y.shape)
    if axis == -1 or x.ndim == len(shape):
        return shape
    return (1,) * axis + shape + (1,) * (x.ndim - axis - len(shape))


def _grad_y(xp, full, x, y, axis):
    """Y's gradient from a gradient of Out's shape: summed over what Y was broadcast along."""
    g = unbroadcast(xp, full, _aligned_shape(x, y, axis))
    return g if g.shape == tuple(y.shape) else g.reshape(y.shape)


@kernel("elementwise_add_grad")
def elementwise_add_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = unbroadcast(xp, dout, x.shape)
    if "Y@GRAD" in want:
        dy = _grad_y(xp, dout, x, y, attrs["axis"])
        if dy is dout and res.get("X@GRAD") is dout:
            dy = dy.copy()  # two gradients sharing one buffer would be reduced twice in place
        res["Y@GRAD"] = dy
    return res


@kernel("elementwise_sub_grad")
def elementwise_sub_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = unbroadcast(xp, dout, x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = -_grad_y(xp, dout, x, y, attrs["axis"])  # negate the reduced one
    return res


@kernel("elementwise_mul_grad")
def elementwise_mul_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    ya = align_y(x, y, attrs["axis"])
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = unbroadcast(xp, dout * ya, x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = _grad_y(xp, dout * x, x, y, attrs["axis"])
    return res


@kernel("elementwise_div_grad")
def elementwise_div_grad(xp, ins, attrs, want):
    x, y, out, dout = ins["X"], ins["Y"], ins["Out"], ins["Out@GRAD"]
    ya = align_y(x, y, attrs["axis"])
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = unbroadcast(xp, dout / ya, x.shape)
    if "Y@GRAD" in want:
        t = dout * out  # d(x / y) / dy = -out / y
        t /= ya
        dy = _grad_y(xp, t, x, y, attrs["axis"])  # fresh either way: t or its sum
        res["Y@GRAD"] = xp.negative(dy, out=dy)
    return res


def _select_grads(xp, ins, attrs, want, pick_x):
    """max/min: Out's gradient goes to X where pick_x(x, y) holds, to Y elsewhere (ties: Y)."""
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    mask = pick_x(x, align_y(x, y, attrs["axis"]))
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = unbroadcast(xp, dout * mask, x.shape)
    if "Y@GRAD" in want:
        res["Y@GRAD"] = _grad_y(xp, dout * ~mask, x, y, attrs["axis"])
    return res


@kernel("elementwise_max_grad")
def elementwise_max_grad(xp, ins, attrs, want):
    return _select_grads(xp, ins, attrs, want, lambda x, y: x > y)


@kernel("elementwise_min_grad")
def elementwise_min_grad(xp, ins, attrs, want):
    return _select_grads(xp, ins, attrs, want, lambda x, y: x < y)


# fluid 1.8's integer division truncates toward zero (C++ `/`) in elementwise_div and
# elementwise_floordiv alike, its integer mod takes the dividend's sign (C++ `%`), while its
# float mod takes the divisor's, as Python's does. A zero divisor: fluid's div raises, its
# floordiv and mod kill the process (SIGFPE); spmd raises for all three.
def _check_divisor(xp, y, op: str):
    if bool((y == 0).any()):
        raise InvalidArgumentError(
            f"{op}: integer division by zero: Y holds {int((y == 0).sum())} zero(s); an "
            f"integer divisor must be nonzero (fluid 1.8 fails here too)")


def _int_quotient(xp, x, y, op: str):
    _check_divisor(xp, y, op)
    q = xp.abs(x) // xp.abs(y)
    return xp.where((x < 0) != (y < 0), -q, q).astype(x.dtype)


def _floordiv(xp, x, y):
    return _int_quotient(xp, x, y, "elementwise_floordiv")  # ints only (its op checks)


def _mod(xp, x, y):
    if x.dtype.kind in "iu":
        _check_divisor(xp, y, "elementwise_mod")
        return xp.fmod(x, y)
    return xp.mod(x, y)


def int_power(xp, x, y):
    """fluid 1.8's integer power: the float64 power cast to x's integer dtype, truncated; a
    result out of its range (inf from 0 ** -1 included) becomes the dtype's minimum, as C++'s
    conversion gives on x86. So 2 ** -1 is 0 and 3 ** 35 is 50031545098999704 (not exact)."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # mapped below
        r = xp.power(x.astype("float64"), y.astype("float64"))
    info = xp.iinfo(x.dtype)
    ok = xp.isfinite(r) & (r >= float(info.min)) & (r < -float(info.min))
    return xp.where(ok, xp.trunc(xp.where(ok, r, 0.0)), info.min).astype(x.dtype)


def _float_power(xp, x, y):
    """x ** y as fluid's kernel gives it: glibc's powf for float32, which the float64 power
    rounded to float32 matches (1999 of 2000 random pairs; numpy 2's own float32 power is 1 ulp
    off in about one pair of five)."""
    if x.dtype == xp.float32:
        return xp.power(x.astype(xp.float64), y).astype(xp.float32)
    return xp.power(x, y)


_elementwise("elementwise_pow", lambda xp, x, y: int_power(xp, x, y)
             if x.dtype.kind in "iu" else _float_power(xp, x, y))
_elementwise("elementwise_floordiv", _floordiv)
_elementwise("elementwise_mod", _mod)


@kernel("elementwise_pow_grad")
def elementwise_pow_grad(xp, ins, attrs, want):
    x, y, dout = ins["X"], ins["Y"], ins["Out@GRAD"]
    ya = align_y(x, y, attrs["axis"])
    res = {}
    if "X@GRAD" in want:  # y x^(y-1)
        res["X@GRAD"] = unbroadcast(xp, dout * ya * xp.power(x, ya - 1.0), x.shape)
    if "Y@GRAD" in want:  # x^y ln x
        res["Y@GRAD"] = _grad_y(xp, dout * xp.power(x, ya) * xp.log(x), x, y, attrs["axis"])
    return res


@kernel("increment")
def increment(xp, ins, attrs, want):
    x = ins["X"]
    return {"Out": x + x.dtype.type(attrs["step"])}


# -- cumsum, prelu -----------------------------------------------------------------------------

def _cumsum(xp, x, axis, exclusive, reverse):
    if reverse:
        x = xp.flip(x, axis)
    out = xp.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:  # shift by one: element i sums the ones before it
        out = out - x
    return xp.flip(out, axis).copy() if reverse else out


@kernel("cumsum")
def cumsum(xp, ins, attrs, want):
    return {"Out": _cumsum(xp, ins["X"], attrs["axis"], attrs["exclusive"], attrs["reverse"])}


@kernel("cumsum_grad")
def cumsum_grad(xp, ins, attrs, want):
    # each input feeds every output after it: the gradient sums the other way round
    g = _cumsum(xp, ins["Out@GRAD"], attrs["axis"], attrs["exclusive"], not attrs["reverse"])
    return {"X@GRAD": g}


def _prelu_alpha(x, alpha, mode):
    """Alpha shaped to broadcast against X: one value, one per channel (dim 1), or one per
    element of a sample."""
    if mode == "all":
        return alpha.reshape(())
    if mode == "channel":
        return alpha.reshape((1, -1) + (1,) * (x.ndim - 2))
    return alpha.reshape((1,) + x.shape[1:])


@kernel("prelu")
def prelu(xp, ins, attrs, want):
    x = ins["X"]
    a = _prelu_alpha(x, ins["Alpha"], attrs["mode"]).astype(x.dtype)
    return {"Out": xp.where(x > 0, x, a * x)}


@kernel("prelu_grad")
def prelu_grad(xp, ins, attrs, want):
    x, alpha, dout = ins["X"], ins["Alpha"], ins["Out@GRAD"]
    a = _prelu_alpha(x, alpha, attrs["mode"]).astype(x.dtype)
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = xp.where(x > 0, dout, a * dout)
    if "Alpha@GRAD" in want:
        full = xp.where(x > 0, 0.0, x * dout)
        res["Alpha@GRAD"] = unbroadcast(xp, full, a.shape).reshape(alpha.shape).astype(
            alpha.dtype)
    return res
