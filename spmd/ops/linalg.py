"""Op definitions: linear algebra beyond mul/matmul (spmd/ops/math.py): addmm, bmm, dot,
cross, dist, kron, trace, cos_sim and norm (what l2_normalize builds).

>>> # OP_DEFS["cross"].attrs["dim"].default == 9   # fluid's "first axis of size 3"
"""
from __future__ import annotations

from .math import _check_same_dtype
from .registry import broadcast_dim, define_op

CROSS_DEFAULT_DIM = 9  # fluid's kDefaultDim: use the first axis whose size is 3


def _bcast(ctx, a, b, what):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    for p, q in zip(a, b):
        ctx.check(p == q or 1 in (p, q) or -1 in (p, q), f"{what}: {list(a)} and {list(b)} do "
                  f"not broadcast")
    return tuple(broadcast_dim(p, q) for p, q in zip(a, b))


@define_op("addmm", inputs=["Input", "X", "Y"], outputs=["Out"],
           attrs={"Alpha": ("float", 1.0), "Beta": ("float", 1.0)})
def _addmm(ctx):
    inp, x, y = ctx.input("Input"), ctx.input("X"), ctx.input("Y")
    ctx.check(len(x.shape) == 2 and len(y.shape) == 2,
              f"X{list(x.shape)} and Y{list(y.shape)} must be matrices (rank 2)")
    ctx.check(x.shape[1] < 0 or y.shape[0] < 0 or x.shape[1] == y.shape[0],
              f"X{list(x.shape)} @ Y{list(y.shape)}: inner sizes differ")
    _check_same_dtype(ctx, x, y)
    out = (x.shape[0], y.shape[1])
    shape = _bcast(ctx, inp.shape, out, f"Input{list(inp.shape)} against X @ Y {list(out)}")
    ctx.check(len(shape) == 2 and all(a in (b, -1) or b == -1 for a, b in zip(shape, out)),
              f"Input{list(inp.shape)} must broadcast to X @ Y's shape {list(out)}")
    ctx.set_output("Out", out, x.dtype)


@define_op("bmm", inputs=["X", "Y"], outputs=["Out"])
def _bmm(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(len(x.shape) == 3 and len(y.shape) == 3,
              f"X{list(x.shape)} and Y{list(y.shape)} must be batches of matrices (rank 3)")
    for a, b, what in ((x.shape[0], y.shape[0], "batch sizes"), (x.shape[2], y.shape[1],
                                                                 "inner sizes")):
        ctx.check(a < 0 or b < 0 or a == b, f"X{list(x.shape)} @ Y{list(y.shape)}: {what} "
                  f"{a} and {b} differ")
    _check_same_dtype(ctx, x, y)
    ctx.set_output("Out", (x.shape[0], x.shape[1], y.shape[2]), x.dtype)


def _same_shape(ctx, x, y):
    ctx.check(len(x.shape) == len(y.shape) and all(
        a == b or -1 in (a, b) for a, b in zip(x.shape, y.shape)),
        f"X{list(x.shape)} and Y{list(y.shape)} must have the same shape")
    _check_same_dtype(ctx, x, y)


@define_op("dot", inputs=["X", "Y"], outputs=["Out"])
def _dot(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(len(x.shape) in (1, 2), f"X{list(x.shape)} must be a vector or a batch of "
              f"vectors (rank 1 or 2)")
    _same_shape(ctx, x, y)
    ctx.set_output("Out", tuple(x.shape[:-1]) + (1,), x.dtype)


@define_op("cross", inputs=["X", "Y"], outputs=["Out"],
           attrs={"dim": ("int", CROSS_DEFAULT_DIM)})
def _cross(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    _same_shape(ctx, x, y)
    dim, rank = ctx.attr("dim"), len(x.shape)
    if dim == CROSS_DEFAULT_DIM:
        ctx.check(3 in x.shape, f"X{list(x.shape)} has no axis of size 3 to take the cross "
                  f"product along")
    else:
        ctx.check(-rank <= dim < rank and x.shape[dim] in (3, -1),
                  f"dim={dim}: axis must exist and have size 3 in X{list(x.shape)}")
    ctx.set_output_like("Out", "X")


@define_op("dist", inputs=["X", "Y"], outputs=["Out"], attrs={"p": ("float", 2.0)},
           grad_uses=("X", "Y", "Out"))
def _dist(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    _check_same_dtype(ctx, x, y)
    _bcast(ctx, x.shape, y.shape, "dist")
    ctx.set_output("Out", (1,), x.dtype)


@define_op("kron", inputs=["X", "Y"], outputs=["Out"], grad_uses=("X", "Y"))
def _kron(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    _check_same_dtype(ctx, x, y)
    n = max(len(x.shape), len(y.shape))
    xs = (1,) * (n - len(x.shape)) + tuple(x.shape)
    ys = (1,) * (n - len(y.shape)) + tuple(y.shape)
    ctx.set_output("Out", tuple(-1 if a < 0 or b < 0 else a * b for a, b in zip(xs, ys)),
                   x.dtype)


@define_op("trace", inputs=["Input"], outputs=["Out"], grad_uses=("Input",),
           attrs={"offset": ("int", 0), "dim1": ("int", 0), "dim2": ("int", 1)})
def _trace(ctx):
    x = ctx.input("Input")
    rank = len(x.shape)
    ctx.check(rank >= 2, f"Input{list(x.shape)} must have rank >= 2")
    d1, d2 = ctx.attr("dim1"), ctx.attr("dim2")
    for d in (d1, d2):
        ctx.check(-rank <= d < rank, f"dim {d} is out of range for Input{list(x.shape)}")
    d1, d2 = d1 % rank, d2 % rank
    ctx.check(d1 != d2, f"dim1 and dim2 name the same axis {d1}: pick two different axes")
    rest = tuple(s for i, s in enumerate(x.shape) if i not in (d1, d2))
    ctx.set_output("Out", rest or (1,), x.dtype)


@define_op("cos_sim", inputs=["X", "Y"], outputs=["Out", "XNorm", "YNorm"],
           nondiff_outputs=("XNorm", "YNorm"))
def _cos_sim(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    _check_same_dtype(ctx, x, y)
    ctx.check(len(x.shape) == len(y.shape) and all(
        a == b or -1 in (a, b) for a, b in zip(x.shape[1:], y.shape[1:])),
        f"X{list(x.shape)} and Y{list(y.shape)} must match beyond the first dim")
    ctx.check(y.shape[0] in (1, x.shape[0], -1) or x.shape[0] == -1,
              f"Y{list(y.shape)} must have as many rows as X{list(x.shape)}, or one")
    ctx.set_output("Out", (x.shape[0], 1), x.dtype)
    ctx.set_output("XNorm", (x.shape[0], 1), x.dtype)
    ctx.set_output("YNorm", (y.shape[0], 1), x.dtype)


@define_op("norm", inputs=["X"], outputs=["Out", "Norm"], nondiff_outputs=("Norm",),
           grad_uses=("X", "Out", "Norm"),
           attrs={"axis": ("int", 1), "epsilon": ("float", 1e-10), "is_test": ("bool", False)})
def _norm(ctx):
    x = ctx.input("X")
    rank, axis = len(x.shape), ctx.attr("axis")
    ctx.check(-rank <= axis < rank, f"axis={axis} is out of range for X{list(x.shape)}")
    ctx.set_output_like("Out", "X")
    ctx.set_output("Norm", tuple(1 if i == axis % rank else d for i, d in enumerate(x.shape)),
                   x.dtype)
