"""fluid.layers math builders: activations, elementwise ops with fluid's `axis` broadcasting,
reductions, matmul, mul, scale, mean.

>>> # y = relu(elementwise_add(x, b, axis=1))
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable

__all__ = [
    "clip", "elementwise_add", "elementwise_div", "elementwise_max", "elementwise_min",
    "elementwise_mul", "elementwise_sub", "exp", "gelu", "leaky_relu", "log", "matmul", "mean",
    "mul", "pow", "reduce_max", "reduce_mean", "reduce_sum", "relu", "scale", "sigmoid", "sqrt",
    "square", "tanh",
]


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
    """x if x > 0 else alpha * x (fluid 1.8 default alpha 0.02)."""
    return _unary("leaky_relu", x, name, {"alpha": alpha})


def pow(x, factor=1.0, name=None):  # noqa: A001 - fluid's name
    """x ** factor."""
    return _unary("pow", x, name, {"factor": factor})


def clip(x, min, max, name=None):  # noqa: A002 - fluid's argument names
    """Elementwise clamp to [min, max]."""
    if min > max:
        raise InvalidArgumentError(f"clip: min={min} must be <= max={max}")
    return _unary("clip", x, name, {"min": min, "max": max})


def _elementwise(op_type: str, x, y, axis, act, name):
    helper = LayerHelper(op_type, act=act, name=name)
    check_variable(x, "x", op_type)
    check_variable(y, "y", op_type)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise InvalidArgumentError(f"{op_type}: axis must be an int, got {axis!r}")
    # fluid names the output `name` itself when one is given (not a prefix)
    if name is None:
        out = helper.create_variable_for_type_inference(x.dtype)
    else:
        out = helper.create_variable(name, x.dtype)
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


def elementwise_max(x, y, axis=-1, act=None, name=None):
    return _elementwise("elementwise_max", x, y, axis, act, name)


def elementwise_min(x, y, axis=-1, act=None, name=None):
    return _elementwise("elementwise_min", x, y, axis, act, name)


def _reduce(op_type: str, input, dim, keep_dim, name):
    helper = LayerHelper(op_type, name=name)
    check_variable(input, "input", op_type)
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
    return _reduce("reduce_sum", input, dim, keep_dim, name)


def reduce_mean(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_mean", input, dim, keep_dim, name)


def reduce_max(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_max", input, dim, keep_dim, name)


def matmul(x, y, transpose_x=False, transpose_y=False, alpha=1.0, name=None):
    """alpha * op(x) @ op(y), batched over leading dims; op transposes the last two dims when
    asked."""
    helper = LayerHelper("matmul", name=name)
    check_variable(x, "x", "matmul")
    check_variable(y, "y", "matmul")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("matmul", {"X": [x], "Y": [y]}, {"Out": [out]},
                     {"transpose_X": bool(transpose_x), "transpose_Y": bool(transpose_y),
                      "alpha": float(alpha)})
    return out


def mul(x, y, x_num_col_dims=1, y_num_col_dims=1, name=None):
    """x flattened to 2-D at x_num_col_dims, times y flattened at y_num_col_dims."""
    helper = LayerHelper("mul", name=name)
    check_variable(x, "x", "mul")
    check_variable(y, "y", "mul")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("mul", {"X": [x], "Y": [y]}, {"Out": [out]},
                     {"x_num_col_dims": x_num_col_dims, "y_num_col_dims": y_num_col_dims})
    return out


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None):
    """x * scale + bias (or (x + bias) * scale when bias_after_scale is False)."""
    helper = LayerHelper("scale", act=act, name=name)
    check_variable(x, "x", "scale")
    if name is None:
        out = helper.create_variable_for_type_inference(x.dtype)
    else:
        out = helper.create_variable(name, x.dtype)
    helper.append_op("scale", {"X": [x]}, {"Out": [out]},
                     {"scale": float(scale), "bias": float(bias),
                      "bias_after_scale": bool(bias_after_scale)})
    return helper.append_activation(out)


def mean(x, name=None):
    """The mean of all elements, shape [1]."""
    return _unary("mean", x, name)
