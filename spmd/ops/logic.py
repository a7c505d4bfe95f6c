"""Op definitions: comparisons (less_than, ..., not_equal), logical ops, isfinite / isinf /
isnan and allclose. All give bool tensors and have no gradient, as in fluid.

Comparisons broadcast Y against X with fluid's elementwise `axis` rule; `force_cpu` is
accepted (fluid places the result in host memory with it) and changes nothing here.
logical_and / _or / _xor broadcast numpy-style; fluid 1.8 requires equal element counts
(paddle 2.x broadcasts), so every program fluid 1.8 runs gives the same result here.

>>> # OP_DEFS["less_than"].grad is None
"""
from __future__ import annotations

from .math import _elementwise_infer
from .registry import broadcast_dim, define_op

COMPARE_OPS = ("less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal")


def _compare_infer(ctx):
    _elementwise_infer(ctx)  # shapes and the same-dtype rule, then the result is bool
    shape = ctx.results["Out"][0][0]
    ctx.set_output("Out", shape, "bool")


for _t in COMPARE_OPS:
    define_op(_t, inputs=["X", "Y"], outputs=["Out"], grad=None,
              attrs={"axis": ("int", -1), "force_cpu": ("bool", False)})(_compare_infer)


def _check_bool(ctx, slot):
    v = ctx.input(slot)
    ctx.check(v.dtype == "bool",
              f"{slot} '{v.name}' is {v.dtype}; {ctx.opdef.type} takes bool tensors (use a "
              f"comparison or layers.cast(x, 'bool') first)")
    return v


def _logical_binary_infer(ctx):
    x, y = _check_bool(ctx, "X"), _check_bool(ctx, "Y")
    n = max(len(x.shape), len(y.shape))
    xs = (1,) * (n - len(x.shape)) + tuple(x.shape)
    ys = (1,) * (n - len(y.shape)) + tuple(y.shape)
    for a, b in zip(xs, ys):
        ctx.check(a == b or 1 in (a, b) or -1 in (a, b),
                  f"X{list(x.shape)} and Y{list(y.shape)} do not broadcast")
    ctx.set_output("Out", tuple(broadcast_dim(a, b) for a, b in zip(xs, ys)), "bool")


for _t in ("logical_and", "logical_or", "logical_xor"):
    define_op(_t, inputs=["X", "Y"], outputs=["Out"], grad=None)(_logical_binary_infer)


@define_op("logical_not", inputs=["X"], outputs=["Out"], grad=None)
def _logical_not(ctx):
    _check_bool(ctx, "X")
    ctx.set_output_like("Out", "X")


def _overflow_infer(ctx):
    ctx.set_output("Out", (1,), "bool")  # one flag for the whole tensor


for _t in ("isfinite", "isinf", "isnan"):
    define_op(_t, inputs=["X"], outputs=["Out"], grad=None)(_overflow_infer)


@define_op("allclose", inputs=["Input", "Other"], outputs=["Out"], grad=None,
           attrs={"rtol": ("float", 1e-5), "atol": ("float", 1e-8),
                  "equal_nan": ("bool", False)})
def _allclose(ctx):
    a, b = ctx.input("Input"), ctx.input("Other")
    ctx.check(a.dtype == b.dtype, f"Input is {a.dtype} but Other is {b.dtype}: cast one")
    ctx.set_output("Out", (1,), "bool")
