"""Python operators on Variables, as fluid's math_op_patch: `a + b`, `2 * a`, `-a`, `a / 3`,
`a ** 2`, `a ** b`, `2 ** a`, `a // b`, `a % 3`, `a < b`, `a >= 0.5`. Two Variables give
elementwise ops (numpy-style broadcasting, axis=-1); a Python number gives one `scale` op (or
`pow` for `**`) for + - * / **, and a [1] constant tensor for //, %, comparisons and `2 ** a`.
Comparisons give bool Variables. `==` and `!=` keep Python's identity meaning (fluid 1.8 makes
them ops, which would break `var in list`); use layers.equal / not_equal.

Installed by importing spmd.layers (`monkey_patch_variable()`).

>>> # loss = (pred - label) * (pred - label) * 0.5
"""
from __future__ import annotations

import numbers

from ..core import unique_name
from ..core.variable import Variable
from ..errors import InvalidArgumentError

__all__ = ["monkey_patch_variable"]


def _is_scalar(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Real):
        return True
    return hasattr(value, "dtype") and getattr(value, "ndim", None) == 0  # numpy 0-d arrays


def _new_var(var: Variable) -> Variable:
    return var.block.create_var(name=unique_name.generate("tmp"), dtype=var.dtype)


def _scale(var: Variable, scale: float, bias: float) -> Variable:
    out = _new_var(var)
    var.block.append_op("scale", {"X": [var]}, {"Out": [out]},
                        {"scale": float(scale), "bias": float(bias), "bias_after_scale": True})
    return out


def _elementwise(op_type: str, x: Variable, y: Variable) -> Variable:
    if x.block.program is not y.block.program:
        raise InvalidArgumentError(
            f"{op_type}: {x.name} and {y.name} belong to different programs")
    if x.dtype != y.dtype:
        raise InvalidArgumentError(
            f"{op_type}: {x.name} is {x.dtype} but {y.name} is {y.dtype}; cast one of them "
            f"(fluid.layers.cast) first")
    out = _new_var(x)
    x.block.append_op(op_type, {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": -1})
    return out


def _unsupported(symbol: str, self, other):
    raise InvalidArgumentError(
        f"unsupported operand for {symbol}: Variable {self.name} and {type(other).__name__} "
        f"{other!r}; use a Variable or a Python number")


def _binary(op_type: str, symbol: str, scalar_fn, reverse: bool = False):
    """A dunder method: Variable (op) Variable -> elementwise op; Variable (op) number ->
    scalar_fn(var, number)."""

    def method(self, other):
        if isinstance(other, Variable):
            x, y = (other, self) if reverse else (self, other)
            return _elementwise(op_type, x, y)
        if _is_scalar(other):
            return scalar_fn(self, float(other))
        return _unsupported(symbol, self, other)

    return method


def _div_scalar(var, value):
    if value == 0:
        raise InvalidArgumentError(f"{var.name} / 0: division by zero")
    return _scale(var, 1.0 / value, 0.0)


def _rdiv_scalar(var, value):
    """value / var as value * var ** -1: one pow and one scale, valid for any batch size."""
    out = _new_var(var)
    var.block.append_op("pow", {"X": [var]}, {"Out": [out]}, {"factor": -1.0})
    return _scale(out, value, 0.0)


def _fill_scalar(like: Variable, value: float) -> Variable:
    """A [1] tensor holding `value` in like's dtype (fluid's create_scalar)."""
    out = _new_var(like)
    like.block.append_op("fill_constant", {}, {"Out": [out]},
                         {"shape": [1], "value": float(value), "dtype": like.dtype})
    out.stop_gradient = True
    return out


def _pow(self, other):
    if _is_scalar(other):  # one pow op: the same numbers as fluid's fill_constant + pow
        out = _new_var(self)
        self.block.append_op("pow", {"X": [self]}, {"Out": [out]}, {"factor": float(other)})
        return out
    if isinstance(other, Variable):
        return _elementwise("elementwise_pow", self, other)
    return _unsupported("**", self, other)


def _rpow(self, other):
    if _is_scalar(other):
        return _elementwise("elementwise_pow", _fill_scalar(self, other), self)
    return _unsupported("**", self, other)


def _tensor_binary(op_type: str, symbol: str, compare: bool = False):
    """Variable (op) Variable-or-number, a number made a [1] tensor first (as fluid does);
    comparisons (their ops infer bool) stop gradients."""

    def method(self, other):
        if _is_scalar(other):
            other = _fill_scalar(self, other)
        elif not isinstance(other, Variable):
            return _unsupported(symbol, self, other)
        out = _elementwise(op_type, self, other)
        if compare:
            out.stop_gradient = True
        return out

    return method


def _neg(self):
    return _scale(self, -1.0, 0.0)


_METHODS = {
    "__add__": _binary("elementwise_add", "+", lambda v, s: _scale(v, 1.0, s)),
    "__radd__": _binary("elementwise_add", "+", lambda v, s: _scale(v, 1.0, s), reverse=True),
    "__sub__": _binary("elementwise_sub", "-", lambda v, s: _scale(v, 1.0, -s)),
    "__rsub__": _binary("elementwise_sub", "-", lambda v, s: _scale(v, -1.0, s), reverse=True),
    "__mul__": _binary("elementwise_mul", "*", lambda v, s: _scale(v, s, 0.0)),
    "__rmul__": _binary("elementwise_mul", "*", lambda v, s: _scale(v, s, 0.0), reverse=True),
    "__truediv__": _binary("elementwise_div", "/", _div_scalar),
    "__rtruediv__": _binary("elementwise_div", "/", _rdiv_scalar, reverse=True),
    "__neg__": _neg,
    "__pow__": _pow,
    "__rpow__": _rpow,
    "__floordiv__": _tensor_binary("elementwise_floordiv", "//"),
    "__mod__": _tensor_binary("elementwise_mod", "%"),
    "__lt__": _tensor_binary("less_than", "<", True),
    "__le__": _tensor_binary("less_equal", "<=", True),
    "__gt__": _tensor_binary("greater_than", ">", True),
    "__ge__": _tensor_binary("greater_equal", ">=", True),
}


def monkey_patch_variable():
    """Install the operators on spmd.core.Variable (idempotent)."""
    for name, method in _METHODS.items():
        setattr(Variable, name, method)
