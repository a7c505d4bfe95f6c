"""Python operators on Variables, as fluid 1.8.5's math_op_patch: `a + b`, `2 * a`, `-a`,
`a / 3`, `a ** 2`, `a ** b`, `2 ** a`, `a // b`, `a % 3`, `a < b`, `a >= 0.5`.

Two Variables give one elementwise op (numpy-style broadcasting; axis=0 when the right operand's
first dim is the batch dim, as fluid), the right one first cast to the left one's dtype when
they differ (fluid's rule: `int_var + float_var` is int, `float_var + int_var` float). A Python
number gives:

- `+ - *` and unary `-`: one `scale` op. On an integer Variable the number must be integral
  (`int_var * 2.0` works, `int_var * 2.5` raises, as fluid 1.8.5 refuses it).
- `/`: `scale(1/k)` on a float Variable; on an integer one a [1] tensor of k in the Variable's
  dtype and elementwise_div, which truncates toward zero (`int_var / 2` is int, as in fluid;
  fluid also turns k = 2.5 into 2 there, and so does spmd).
- `k / a`, `k ** a`: a tensor of k shaped like `a` (fill_constant, or
  fill_constant_batch_size_like when `a` has a batch dim) and elementwise_div / _pow. It is made
  in `a`'s dtype; fluid 1.8.5 makes the batch-size-like one float32 whatever `a` is, so there
  `2 / int_var` with a batch dim fails at run time ("holds int64_t, but desires float"); spmd
  gives the integer result fluid gives without a batch dim.
- `**`: one `pow` op on a float Variable; a [1] tensor and elementwise_pow on an integer one
  (fluid's ops: the result is the float power truncated to the integer dtype).
- `//`, `%` and comparisons: a [1] tensor of the number in the Variable's dtype (fill_constant
  truncates 2.5 to 2 for an integer dtype, as fluid) and the elementwise / compare op.

Comparisons give bool Variables, `==` and `!=` too (an `equal` / `not_equal` op, as fluid 1.8.5:
`cond(i % 2 == 0, ...)`). A Python bool counts as a number there (`flag == True`, as fluid). Against
anything else (None, a str, a list) `==` answers NotImplemented, so Python's identity meaning
applies (fluid 1.8.5 fails in float() there). Hashing stays by identity: Variables remain dict keys
and set members. As in fluid, `var in some_list` compares with `==`, which appends an op and is
always true for a Variable not in the list; spmd's own code compares Variables by identity
(`is`, names, id()) for that reason.

Installed by importing spmd.layers (`monkey_patch_variable()`).

>>> # loss = (pred - label) * (pred - label) * 0.5
"""
from __future__ import annotations

import numbers

from ..core import unique_name
from ..core.variable import Variable
from ..errors import InvalidArgumentError

__all__ = ["monkey_patch_variable"]


_INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")



def _current(var):
    """The block ops go to: the one being built (a control-flow body reading `var` from an
    enclosing block computes there, every iteration), as fluid's current_block(var)."""
    return var.block.program.current_block()

def _is_scalar(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Real):
        return True
    return hasattr(value, "dtype") and getattr(value, "ndim", None) == 0  # numpy 0-d arrays


def _is_int(var: Variable) -> bool:
    return var.dtype in _INT_DTYPES


def _new_var(var: Variable, dtype=None) -> Variable:
    return _current(var).create_var(name=unique_name.generate("tmp"), dtype=dtype or var.dtype)


def _scale(var: Variable, scale: float, bias: float) -> Variable:
    out = _new_var(var)
    _current(var).append_op("scale", {"X": [var]}, {"Out": [out]},
                        {"scale": float(scale), "bias": float(bias), "bias_after_scale": True})
    return out


def _cast(var: Variable, dtype: str) -> Variable:
    out = _new_var(var, dtype)
    _current(var).append_op("cast", {"X": [var]}, {"Out": [out]},
                        {"in_dtype": var.dtype, "out_dtype": dtype})
    return out


def _elementwise(op_type: str, x: Variable, y: Variable, out_dtype=None) -> Variable:
    """x (op) y; y cast to x's dtype first when they differ, as fluid does."""
    if x.block.program is not y.block.program:
        raise InvalidArgumentError(
            f"{op_type}: {x.name} and {y.name} belong to different programs")
    if x.dtype != y.dtype:
        y = _cast(y, x.dtype)
    out = _new_var(x, out_dtype)
    # fluid's choice: a batch-sized right operand aligns from dim 0
    axis = 0 if y.shape and y.shape[0] == -1 else -1
    _current(x).append_op(op_type, {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": axis})
    return out


def _unsupported(symbol: str, self, other):
    raise InvalidArgumentError(
        f"unsupported operand for {symbol}: Variable {self.name} and {type(other).__name__} "
        f"{other!r}; use a Variable or a Python number")


def _integral(var: Variable, value, symbol: str) -> float:
    """value as a float; an integer Variable takes only integral numbers (fluid asserts so)."""
    value = float(value)
    if _is_int(var) and value != int(value):
        raise InvalidArgumentError(
            f"{var.name} {symbol} {value}: {var.name} is {var.dtype} and {value} is not an "
            f"integer (fluid 1.8 refuses it too); cast first, e.g. "
            f"fluid.layers.cast({var.name}, 'float32') {symbol} {value}")
    return value


def _binary(op_type: str, symbol: str, scalar_fn, reverse: bool = False):
    """A dunder method: Variable (op) Variable -> elementwise op; Variable (op) number ->
    scalar_fn(var, number)."""

    def method(self, other):
        if isinstance(other, Variable):
            x, y = (other, self) if reverse else (self, other)
            return _elementwise(op_type, x, y)
        if _is_scalar(other):
            return scalar_fn(self, _integral(self, other, symbol))
        return _unsupported(symbol, self, other)

    return method


def _fill_scalar(like: Variable, value: float) -> Variable:
    """A [1] tensor holding `value` in like's dtype (fluid's create_scalar)."""
    out = _new_var(like)
    _current(like).append_op("fill_constant", {}, {"Out": [out]},
                         {"shape": [1], "value": float(value), "dtype": like.dtype})
    out.stop_gradient = True
    return out


def _fill_like(like: Variable, value: float) -> Variable:
    """A tensor of like's shape and dtype holding `value` (fluid's create_tensor, or
    create_tensor_with_batchsize when like has a batch dim: the first -1 is taken from like
    at run time, later ones are 1)."""
    out = _new_var(like)
    shape, batch = [], -1
    for i, d in enumerate(like.shape):
        if d < 0 and batch < 0:
            batch = i
        shape.append(1 if d < 0 and batch != i else d)
    if batch < 0:
        _current(like).append_op("fill_constant", {}, {"Out": [out]},
                             {"shape": shape, "value": float(value), "dtype": like.dtype})
    else:
        _current(like).append_op("fill_constant_batch_size_like", {"Input": [like]}, {"Out": [out]},
                             {"shape": shape, "value": float(value), "dtype": like.dtype,
                              "input_dim_idx": batch, "output_dim_idx": batch})
    out.stop_gradient = True
    return out


def _truediv(self, other):
    if isinstance(other, Variable):
        return _elementwise("elementwise_div", self, other)
    if not _is_scalar(other):
        return _unsupported("/", self, other)
    value = float(other)
    if value == 0 or (_is_int(self) and int(value) == 0):
        raise InvalidArgumentError(
            f"{self.name} / {other}: division by zero"
            + (f" ({self.dtype} divides by int({other}) = 0, as fluid)" if value else ""))
    if _is_int(self):  # an integer quotient, truncated toward zero, as fluid
        return _elementwise("elementwise_div", self, _fill_scalar(self, value))
    return _scale(self, 1.0 / value, 0.0)


def _reverse_tensor_op(op_type: str, symbol: str):
    """number (op) Variable: a tensor of the number shaped like the Variable, then the op."""

    def method(self, other):
        if not _is_scalar(other):
            return _unsupported(symbol, self, other)
        return _elementwise(op_type, _fill_like(self, other), self)

    return method


def _pow(self, other):
    if isinstance(other, Variable):
        return _elementwise("elementwise_pow", self, other)
    if not _is_scalar(other):
        return _unsupported("**", self, other)
    if _is_int(self):  # fluid's elementwise_pow on integers (pow would give floats)
        return _elementwise("elementwise_pow", self, _fill_scalar(self, other))
    # one pow op: the same numbers as fluid's fill_constant + elementwise_pow
    out = _new_var(self)
    _current(self).append_op("pow", {"X": [self]}, {"Out": [out]}, {"factor": float(other)})
    return out


def _tensor_binary(op_type: str, symbol: str, compare: bool = False):
    """Variable (op) Variable-or-number, a number made a [1] tensor first (as fluid does);
    comparisons (their ops infer bool) stop gradients."""

    def method(self, other):
        if _is_scalar(other):
            other = _fill_scalar(self, other)
        elif not isinstance(other, Variable):
            return _unsupported(symbol, self, other)
        out = _elementwise(op_type, self, other, "bool" if compare else None)
        if compare:
            out.stop_gradient = True
        return out

    return method


def _equality(op_type: str, symbol: str):
    """`==` / `!=`: a compare op against a Variable or a number (a bool included, as fluid);
    NotImplemented otherwise, so `var == None` is False instead of fluid's float() error."""
    compare = _tensor_binary(op_type, symbol, True)

    def method(self, other):
        if isinstance(other, bool):
            other = int(other)
        if isinstance(other, Variable) or _is_scalar(other):
            return compare(self, other)
        return NotImplemented

    return method


def _neg(self):
    return _scale(self, -1.0, 0.0)


def _astype(self, dtype):
    """fluid's var.astype(dtype): a cast op."""
    from .tensor import cast

    return cast(self, dtype)


_METHODS = {
    "__add__": _binary("elementwise_add", "+", lambda v, s: _scale(v, 1.0, s)),
    "__radd__": _binary("elementwise_add", "+", lambda v, s: _scale(v, 1.0, s), reverse=True),
    "__sub__": _binary("elementwise_sub", "-", lambda v, s: _scale(v, 1.0, -s)),
    "__rsub__": _binary("elementwise_sub", "-", lambda v, s: _scale(v, -1.0, s), reverse=True),
    "__mul__": _binary("elementwise_mul", "*", lambda v, s: _scale(v, s, 0.0)),
    "__rmul__": _binary("elementwise_mul", "*", lambda v, s: _scale(v, s, 0.0), reverse=True),
    "__truediv__": _truediv,
    "__rtruediv__": _reverse_tensor_op("elementwise_div", "/"),
    "__neg__": _neg,
    "astype": _astype,
    "__pow__": _pow,
    "__rpow__": _reverse_tensor_op("elementwise_pow", "**"),
    "__floordiv__": _tensor_binary("elementwise_floordiv", "//"),
    "__mod__": _tensor_binary("elementwise_mod", "%"),
    "__lt__": _tensor_binary("less_than", "<", True),
    "__le__": _tensor_binary("less_equal", "<=", True),
    "__gt__": _tensor_binary("greater_than", ">", True),
    "__ge__": _tensor_binary("greater_equal", ">=", True),
    "__eq__": _equality("equal", "=="),
    "__ne__": _equality("not_equal", "!="),
}


def monkey_patch_variable():
    """Install the operators on spmd.core.Variable (idempotent)."""
    for name, method in _METHODS.items():
        setattr(Variable, name, method)
    # defining __eq__ on a class drops its hash; Variables stay hashable by identity, as fluid's
    Variable.__hash__ = object.__hash__
