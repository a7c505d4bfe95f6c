"""Kernels: comparisons, logical ops, isfinite / isinf / isnan, allclose (bool results).

>>> # less_than([1, 3], [2, 2]) -> [True, False]
"""
from __future__ import annotations

from .math import align_y
from .registry import kernel


def _compare(type_, fn):
    def forward(xp, ins, attrs, want):
        x = ins["X"]
        return {"Out": fn(x, align_y(x, ins["Y"], attrs["axis"]))}

    kernel(type_)(forward)


_compare("less_than", lambda x, y: x < y)
_compare("less_equal", lambda x, y: x <= y)
_compare("greater_than", lambda x, y: x > y)
_compare("greater_equal", lambda x, y: x >= y)
_compare("equal", lambda x, y: x == y)
_compare("not_equal", lambda x, y: x != y)


@kernel("logical_and")
def logical_and(xp, ins, attrs, want):
    return {"Out": xp.logical_and(ins["X"], ins["Y"])}


@kernel("logical_or")
def logical_or(xp, ins, attrs, want):
    return {"Out": xp.logical_or(ins["X"], ins["Y"])}


@kernel("logical_xor")
def logical_xor(xp, ins, attrs, want):
    return {"Out": xp.logical_xor(ins["X"], ins["Y"])}


@kernel("logical_not")
def logical_not(xp, ins, attrs, want):
    return {"Out": xp.logical_not(ins["X"])}


@kernel("isfinite")
def isfinite(xp, ins, attrs, want):
    return {"Out": xp.isfinite(ins["X"]).all().reshape(1)}


@kernel("isinf")
def isinf(xp, ins, attrs, want):
    return {"Out": xp.isinf(ins["X"]).any().reshape(1)}


@kernel("isnan")
def isnan(xp, ins, attrs, want):
    return {"Out": xp.isnan(ins["X"]).any().reshape(1)}


@kernel("allclose")
def allclose(xp, ins, attrs, want):
    # |a - b| <= atol + rtol * |b|, as fluid (and numpy) define it
    a, b = ins["Input"], ins["Other"]
    ok = xp.isclose(a, b, rtol=attrs["rtol"], atol=attrs["atol"], equal_nan=attrs["equal_nan"])
    return {"Out": ok.all().reshape(1)}
