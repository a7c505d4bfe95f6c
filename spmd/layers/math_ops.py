"""fluid.layers math builders: activations, elementwise ops with fluid's `axis` broadcasting,
reductions, matmul, mul, scale, mean, sum, clamp, clip_by_norm, logsumexp, addcmul, increment.

>>> # y = relu(elementwise_add(x, b, axis=1))
"""
from __future__ import annotations

import numbers

from ..core.variable import Variable
from ..errors import InvalidArgumentError, MissingArgumentError
from .helper import LayerHelper, check_variable

__all__ = [
    "addcmul", "clamp", "clip", "clip_by_norm", "elementwise_add", "elementwise_div",
    "elementwise_floordiv", "elementwise_max", "elementwise_min", "elementwise_mod",
    "elementwise_mul", "elementwise_pow", "elementwise_sub", "exp", "gelu", "increment",
    "leaky_relu", "log", "logsumexp", "matmul", "mean", "mul", "pow", "reduce_all",
    "reduce_any", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "relu",
    "scale", "sigmoid", "sqrt", "square", "sum", "tanh",
]


# the dtypes fluid 1.8's layers accept (check_variable_and_dtype)
_FLOATS = {"float16", "float32", "float64"}
_INTS = {"int32", "int64"}
_NUMBERS = {"float32", "float64"} | _INTS


def _unary(op_type: str, x, name=None, attrs=None):
    """One op X -> Out, output dtype as the input's."""
    helper = LayerHelper(op_type, name=name)
    check_variable(x, "x", op_type)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [x]}, {"Out": [out]}, attrs or {})
    return out


def relu(x, name=None):
    """max(x, 0)."""
    return _unary("relu", x, name)


def sigmoid(x, name=None):
    """1 / (1 + exp(-x))."""
    return _unary("sigmoid", x, name)


def tanh(x, name=None):
    return _unary("tanh", x, name)


def exp(x, name=None):
    return _unary("exp", x, name)


def log(x, name=None):
    """Natural logarithm."""
    return _unary("log", x, name)


def sqrt(x, name=None):
    return _unary("sqrt", x, name)


def square(x, name=None):
    return _unary("square", x, name)


def gelu(x, approximate=False, name=None):
    """x * Phi(x); `approximate` uses the tanh formula."""
    return _unary("gelu", x, name, {"approximate": bool(approximate)})


def leaky_relu(x, alpha=0.02, name=None):
    """max(x, alpha * x), as fluid 1.8 computes it (x if x > 0 else alpha * x for
    0 <= alpha <= 1); fluid 1.8's default alpha 0.02."""
    return _unary("leaky_relu", x, name, {"alpha": alpha})


def pow(x, factor=1.0, name=None):  # noqa: A001 - fluid's name
    """x ** factor; factor a float or a [1] float32 Variable (read at run time). On an
    integer x fluid 1.8 raises to int(factor), wrapping on overflow."""
    check_variable(x, "x", "pow", _INTS | {"float32", "float64"})
    if not isinstance(factor, Variable):
        return _unary("pow", x, name, {"factor": float(factor)})
    check_variable(factor, "factor", "pow", {"float32"})
    factor.stop_gradient = True
    helper = LayerHelper("pow", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("pow", {"X": [x], "FactorTensor": [factor]}, {"Out": [out]})
    return out


def clip(x, min, max, name=None):  # noqa: A002 - fluid's argument names
    """Elementwise clamp to [min, max] (float tensors, as fluid 1.8's layer)."""
    check_variable(x, "x", "clip", _FLOATS)
    if min > max:
        raise InvalidArgumentError(f"clip: min={min} must be <= max={max}")
    helper = LayerHelper("clip", name=name)
    # fluid 1.8.5 names the output `name` itself when given (not a prefix)
    out = (helper.create_variable_for_type_inference(x.dtype) if name is None
           else helper.create_variable(name, x.dtype))
    helper.append_op("clip", {"X": [x]}, {"Out": [out]}, {"min": min, "max": max})
    return out


def _elementwise(op_type: str, x, y, axis, act, name):
    helper = LayerHelper(op_type, act=act, name=name)
    check_variable(x, "x", op_type, _FLOATS | _INTS)
    check_variable(y, "y", op_type, _FLOATS | _INTS)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise InvalidArgumentError(f"{op_type}: axis must be an int, got {axis!r}")
    # fluid 1.8.5: `name` is a prefix (elementwise_add(..., name="a") is a.tmp_0)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(op_type, {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": axis})
    return helper.append_activation(out)


def elementwise_add(x, y, axis=-1, act=None, name=None):
    """x + y, y broadcast against x from dimension `axis` (-1: trailing dims, numpy-like).

    >>> # elementwise_add(x [N, 3, 4, 5], y [3, 4], axis=1)
    """
    return _elementwise("elementwise_add", x, y, axis, act, name)


def elementwise_sub(x, y, axis=-1, act=None, name=None):
    return _elementwise("elementwise_sub", x, y, axis, act, name)


def elementwise_mul(x, y, axis=-1, act=None, name=None):
    return _elementwise("elementwise_mul", x, y, axis, act, name)


def elementwise_div(x, y, axis=-1, act=None, name=None):
    return _elementwise("elementwise_div", x, y, axis, act, name)


def elementwise_pow(x, y, axis=-1, act=None, name=None):
    """x ** y elementwise, y broadcast from `axis` as in elementwise_add.

    >>> # out = fluid.layers.elementwise_pow(x, y)
    """
    return _elementwise("elementwise_pow", x, y, axis, act, name)


def elementwise_floordiv(x, y, axis=-1, act=None, name=None):
    """x / y rounded toward zero, for int32 / int64 tensors only (as fluid 1.8; no gradient).

    >>> # q = fluid.layers.elementwise_floordiv(x, y)
    """
    return _elementwise("elementwise_floordiv", x, y, axis, act, name)


def elementwise_mod(x, y, axis=-1, act=None, name=None):
    """Remainder of x / y: for ints with x's sign (as C), for floats with y's (as Python).

    >>> # r = fluid.layers.elementwise_mod(x, y)
    """
    return _elementwise("elementwise_mod", x, y, axis, act, name)


def elementwise_max(x, y, axis=-1, act=None, name=None):
    return _elementwise("elementwise_max", x, y, axis, act, name)


def elementwise_min(x, y, axis=-1, act=None, name=None):
    return _elementwise("elementwise_min", x, y, axis, act, name)


def _reduce(op_type: str, input, dim, keep_dim, name, dtypes=None):
    helper = LayerHelper(op_type, name=name)
    check_variable(input, "input", op_type, dtypes)
    if dim is not None and not isinstance(dim, (list, tuple)):
        dim = [dim]
    for d in dim or []:
        if isinstance(d, bool) or not isinstance(d, int) or not -input.ndim <= d < input.ndim:
            raise InvalidArgumentError(
                f"{op_type}: dim {d!r} is out of range for input {input.name} of rank "
                f"{input.ndim} (expected ints in [{-input.ndim}, {input.ndim - 1}])")
    # fluid 1.8: naming every dim is the same as naming none (the result is [1], not [])
    reduce_all = not dim or len(set(d % input.ndim for d in dim)) == input.ndim
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(op_type, {"X": [input]}, {"Out": [out]},
                     {"dim": list(dim) if dim else [0], "keep_dim": bool(keep_dim),
                      "reduce_all": reduce_all})
    return out


def reduce_sum(input, dim=None, keep_dim=False, name=None):
    """Sum over `dim` (an int or a list; None: everything, giving shape [1] as fluid 1.8)."""
    return _reduce("reduce_sum", input, dim, keep_dim, name, _NUMBERS)


def reduce_mean(input, dim=None, keep_dim=False, name=None):
    """Mean over `dim`; an integer input gives the integer mean truncated toward zero, as
    fluid 1.8."""
    return _reduce("reduce_mean", input, dim, keep_dim, name, _NUMBERS)


def reduce_max(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_max", input, dim, keep_dim, name)


def reduce_min(input, dim=None, keep_dim=False, name=None):
    """Minimum over `dim` (an int or a list; None: everything, shape [1]).

    >>> # m = fluid.layers.reduce_min(x, dim=1)
    """
    return _reduce("reduce_min", input, dim, keep_dim, name)


def reduce_prod(input, dim=None, keep_dim=False, name=None):
    """Product over `dim` (an int or a list; None: everything, shape [1]).

    >>> # p = fluid.layers.reduce_prod(x, dim=[0, 1])
    """
    return _reduce("reduce_prod", input, dim, keep_dim, name)


def reduce_all(input, dim=None, keep_dim=False, name=None):
    """Logical AND of a bool tensor over `dim` (no gradient).

    >>> # ok = fluid.layers.reduce_all(mask)
    """
    return _reduce("reduce_all", input, dim, keep_dim, name, {"bool"})


def reduce_any(input, dim=None, keep_dim=False, name=None):
    """Logical OR of a bool tensor over `dim` (no gradient).

    >>> # hit = fluid.layers.reduce_any(mask, dim=1)
    """
    return _reduce("reduce_any", input, dim, keep_dim, name, {"bool"})


def matmul(x, y, transpose_x=False, transpose_y=False, alpha=1.0, name=None):
    """alpha * op(x) @ op(y), batched over leading dims; op transposes the last two dims when
    asked."""
    helper = LayerHelper("matmul", name=name)
    check_variable(x, "x", "matmul", _FLOATS)
    check_variable(y, "y", "matmul", _FLOATS)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("matmul", {"X": [x], "Y": [y]}, {"Out": [out]},
                     {"transpose_X": bool(transpose_x), "transpose_Y": bool(transpose_y),
                      "alpha": float(alpha)})
    return out


def mul(x, y, x_num_col_dims=1, y_num_col_dims=1, name=None):
    """x flattened to 2-D at x_num_col_dims, times y flattened at y_num_col_dims."""
    helper = LayerHelper("mul", name=name)
    check_variable(x, "x", "mul", _FLOATS)
    check_variable(y, "y", "mul", _FLOATS)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("mul", {"X": [x], "Y": [y]}, {"Out": [out]},
                     {"x_num_col_dims": x_num_col_dims, "y_num_col_dims": y_num_col_dims})
    return out


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None):
    """x * scale + bias (or (x + bias) * scale when bias_after_scale is False); scale may be a
    [1] Variable, read at run time. On an integer x, scale and bias are cast to x's dtype
    first (scale 0.5 gives zeros), as fluid 1.8 does."""
    helper = LayerHelper("scale", act=act, name=name)
    check_variable(x, "x", "scale", _FLOATS | _INTS | {"int8", "int16", "uint8"})
    out = helper.create_variable_for_type_inference(x.dtype)  # `name` a prefix, as fluid
    inputs = {"X": [x]}
    attrs = {"bias": float(bias), "bias_after_scale": bool(bias_after_scale)}
    if isinstance(scale, Variable):
        inputs["ScaleTensor"] = [scale]
    else:
        attrs["scale"] = float(scale)
    helper.append_op("scale", inputs, {"Out": [out]}, attrs)
    return helper.append_activation(out)


def mean(x, name=None):
    """The mean of all elements, shape [1] (float tensors, as fluid 1.8's layer)."""
    check_variable(x, "x", "mean", _FLOATS)
    return _unary("mean", x, name)


def sum(x):  # noqa: A001 - fluid's name
    """The elementwise sum of a Variable or a list of Variables (one `sum` op).

    >>> # total = fluid.layers.sum([a, b, c])
    """
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if not xs:
        raise InvalidArgumentError("sum: x is an empty list; give at least one Variable")
    for v in xs:
        check_variable(v, "x", "sum", {"float32", "float64", "int32", "int64"})
    helper = LayerHelper("sum", x=xs)
    out = helper.create_variable_for_type_inference(helper.input_dtype("x"))
    helper.append_op("sum", {"X": xs}, {"Out": [out]})
    return out


# fluid 1.8's clamp defaults are sys.float_info.min / max stored as float32 attributes: 0.0
# and inf. So clamp(x, max=m) also clips negatives to 0, as in fluid.
_CLAMP_DEFAULT_MIN, _CLAMP_DEFAULT_MAX = 0.0, float("inf")


def clamp(input, min=None, max=None, output=None, name=None):  # noqa: A002 - fluid's names
    """Clip to [min, max]; each bound a number or a one-element Variable. An unset min is 0.0,
    an unset max inf (fluid 1.8's effective defaults).

    >>> # y = fluid.layers.clamp(x, min=-1.0, max=1.0)
    """
    if min is None and max is None:
        raise InvalidArgumentError("clamp: give min, max or both")
    check_variable(input, "input", "clamp")
    inputs = {"X": [input]}
    attrs = {"min": _CLAMP_DEFAULT_MIN, "max": _CLAMP_DEFAULT_MAX}
    for arg, slot, value in (("min", "Min", min), ("max", "Max", max)):
        if value is None:
            continue
        if hasattr(value, "block"):
            check_variable(value, arg, "clamp", {"float32", "float64", "int32"})
            value.stop_gradient = True
            inputs[slot] = [value]
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidArgumentError(
                f"clamp: {arg} must be a float or a Variable, got {value!r}")
        else:
            attrs[arg] = float(value)
    helper = LayerHelper("clamp", name=name)
    if output is None:
        output = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("clip", inputs, {"Out": [output]}, attrs)
    return output


def clip_by_norm(x, max_norm, name=None):
    """x * max_norm / ||x||_2 when the L2 norm of x exceeds max_norm, else x (no gradient).
    The output variable is called `name` when one is given.

    >>> # g = fluid.layers.clip_by_norm(grad, max_norm=1.0)
    """
    check_variable(x, "x", "clip_by_norm", {"float32", "float64"})
    if isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real):
        raise InvalidArgumentError(f"clip_by_norm: max_norm must be a float, got {max_norm!r}")
    helper = LayerHelper("clip_by_norm", name=name)
    out = (helper.create_variable_for_type_inference(x.dtype) if name is None
           else helper.create_variable(name, x.dtype, persistable=False))
    helper.append_op("clip_by_norm", {"X": [x]}, {"Out": [out]}, {"max_norm": float(max_norm)})
    return out


def logsumexp(x, dim=None, keepdim=False, out=None, name=None):
    """log(sum(exp(x))) over `dim` (None: everything), built as exp, reduce_sum, log as in
    fluid 1.8; written into `out` when given.

    >>> # lse = fluid.layers.logsumexp(x, dim=1)
    """
    if x is None:
        raise MissingArgumentError("logsumexp: x is None; give the Variable to reduce")
    check_variable(x, "x", "logsumexp", {"float32", "float64"})
    total = reduce_sum(exp(x), dim, keepdim)
    if out is None:
        return log(total, name)
    check_variable(out, "out", "logsumexp", {x.dtype})
    LayerHelper("logsumexp").append_op("log", {"X": [total]}, {"Out": [out]})
    return out


def addcmul(input, tensor1, tensor2, value=1.0, out=None, name=None):  # noqa: A002
    """input + value * tensor1 * tensor2 (value a float for float tensors, an int for ints);
    written into `out` when given.

    >>> # y = fluid.layers.addcmul(x, a, b, value=0.5)
    """
    dtypes = {"float32", "float64", "int32", "int64"}
    for arg, v in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        check_variable(v, arg, "addcmul", dtypes)
    want = float if input.dtype in ("float32", "float64") else int
    if isinstance(value, bool) or not isinstance(value, want):
        raise InvalidArgumentError(
            f"addcmul: value must be a {want.__name__} for {input.dtype} input, got {value!r}")
    result = elementwise_add(input, elementwise_mul(tensor1, tensor2) * value)
    if out is None:
        return result
    from .tensor import assign

    return assign(result, out)


def increment(x, value=1.0, in_place=True):
    """x + value for a one-element x (a loop counter); with in_place (the default) the result
    is written back into x itself, as fluid does.

    >>> # i = fluid.layers.increment(i, value=1.0)
    """
    check_variable(x, "x", "increment", {"float32", "float64", "int32", "int64"})
    helper = LayerHelper("increment")
    out = x if in_place else helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("increment", {"X": [x]}, {"Out": [out]}, {"step": float(value)})
    return out
