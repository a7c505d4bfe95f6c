"""fluid.layers comparisons and logic: less_than ... not_equal (control_flow.py, with `cond=`
and less_than's `force_cpu`), elementwise_equal, logical_and/or/xor/not, isfinite, has_inf,
has_nan, allclose. Every result is bool and stops gradients.

>>> # mask = fluid.layers.less_than(x, y); both = fluid.layers.logical_and(mask, other)
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable

__all__ = [
    "allclose", "elementwise_equal", "equal", "greater_equal", "greater_than", "has_inf",
    "has_nan", "isfinite", "less_equal", "less_than", "logical_and", "logical_not",
    "logical_or", "logical_xor", "not_equal",
]

_NUMERIC = {"float32", "float64", "int32", "int64"}


def _compare(op_type: str, x, y, cond, attrs=None):
    check_variable(x, "x", op_type, _NUMERIC)
    check_variable(y, "y", op_type, _NUMERIC)
    helper = LayerHelper(op_type)
    if cond is None:
        cond = helper.create_variable_for_type_inference("bool", stop_gradient=True)
    else:
        check_variable(cond, "cond", op_type)
    helper.append_op(op_type, {"X": [x], "Y": [y]}, {"Out": [cond]}, attrs or {})
    return cond


def less_than(x, y, force_cpu=None, cond=None):
    """x < y elementwise, written into `cond` when given; `force_cpu` is accepted as in fluid.

    >>> # done = fluid.layers.less_than(i, limit)
    """
    if force_cpu is not None and not isinstance(force_cpu, bool):
        raise InvalidArgumentError(f"less_than: force_cpu must be a bool, got {force_cpu!r}")
    attrs = {} if force_cpu is None else {"force_cpu": force_cpu}
    return _compare("less_than", x, y, cond, attrs)


def less_equal(x, y, cond=None):
    """x <= y elementwise.

    >>> # m = fluid.layers.less_equal(x, y)
    """
    return _compare("less_equal", x, y, cond)


def greater_than(x, y, cond=None):
    """x > y elementwise.

    >>> # m = fluid.layers.greater_than(x, y)
    """
    return _compare("greater_than", x, y, cond)


def greater_equal(x, y, cond=None):
    """x >= y elementwise.

    >>> # m = fluid.layers.greater_equal(x, y)
    """
    return _compare("greater_equal", x, y, cond)


def equal(x, y, cond=None):
    """x == y elementwise.

    >>> # m = fluid.layers.equal(x, y)
    """
    return _compare("equal", x, y, cond)


def not_equal(x, y, cond=None):
    """x != y elementwise.

    >>> # m = fluid.layers.not_equal(x, y)
    """
    return _compare("not_equal", x, y, cond)


def elementwise_equal(x, y, name=None):
    """x == y elementwise (the `equal` op).

    >>> # m = fluid.layers.elementwise_equal(x, y)
    """
    helper = LayerHelper("elementwise_equal", name=name)
    check_variable(x, "x", "elementwise_equal")
    check_variable(y, "y", "elementwise_equal")
    out = helper.create_variable_for_type_inference("bool", stop_gradient=True)
    helper.append_op("equal", {"X": [x], "Y": [y]}, {"Out": [out]}, {"force_cpu": False})
    return out


def _logical(op_type: str, x, y, out, name):
    check_variable(x, "x", op_type, {"bool"})
    inputs = {"X": [x]}
    if y is not None:
        check_variable(y, "y", op_type, {"bool"})
        inputs["Y"] = [y]
    helper = LayerHelper(op_type, name=name)
    if out is None:
        out = helper.create_variable_for_type_inference("bool")
    else:
        check_variable(out, "out", op_type)
    helper.append_op(op_type, inputs, {"Out": [out]})
    return out


def logical_and(x, y, out=None, name=None):
    """x AND y for bool tensors.

    >>> # both = fluid.layers.logical_and(a, b)
    """
    return _logical("logical_and", x, y, out, name)


def logical_or(x, y, out=None, name=None):
    """x OR y for bool tensors.

    >>> # either = fluid.layers.logical_or(a, b)
    """
    return _logical("logical_or", x, y, out, name)


def logical_xor(x, y, out=None, name=None):
    """x XOR y for bool tensors.

    >>> # one = fluid.layers.logical_xor(a, b)
    """
    return _logical("logical_xor", x, y, out, name)


def logical_not(x, out=None, name=None):
    """NOT x for a bool tensor.

    >>> # inv = fluid.layers.logical_not(a)
    """
    return _logical("logical_not", x, None, out, name)


def _flag(op_type: str, layer: str, x, dtype):
    check_variable(x, "x", layer)
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(op_type, {"X": [x]}, {"Out": [out]})
    return out


def isfinite(x):
    """[True] when every element of x is finite (no inf, no nan), else [False].

    >>> # ok = fluid.layers.isfinite(loss)
    """
    check_variable(x, "x", "isfinite", _NUMERIC)
    return _flag("isfinite", "isfinite", x, "bool")


def has_inf(x):
    """[True] when some element of x is +-inf: a bool [1] tensor (fluid 1.8 fetches bool too
    but declares the variable with x's dtype; spmd declares bool).

    >>> # bad = fluid.layers.has_inf(grad)
    """
    return _flag("isinf", "has_inf", x, "bool")


def has_nan(x):
    """[True] when some element of x is nan.

    >>> # bad = fluid.layers.has_nan(grad)
    """
    return _flag("isnan", "has_nan", x, "bool")


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False, name=None):  # noqa: A002
    """[True] when |input - other| <= atol + rtol * |other| everywhere.

    >>> # same = fluid.layers.allclose(a, b, rtol=1e-4)
    """
    for arg, v in (("rtol", rtol), ("atol", atol)):
        if not isinstance(v, float):
            raise InvalidArgumentError(f"allclose: {arg} must be a float, got {v!r}")
    if not isinstance(equal_nan, (bool, numbers.Integral)):
        raise InvalidArgumentError(f"allclose: equal_nan must be a bool, got {equal_nan!r}")
    check_variable(input, "input", "allclose")
    check_variable(other, "other", "allclose")
    helper = LayerHelper("allclose", name=name)
    out = helper.create_variable_for_type_inference("bool")
    helper.append_op("allclose", {"Input": [input], "Other": [other]}, {"Out": [out]},
                     {"rtol": rtol, "atol": atol, "equal_nan": bool(equal_nan)})
    return out
