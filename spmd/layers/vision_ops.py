"""fluid.layers maxout, affine_channel, fsp_matrix, bilinear_tensor_product,
add_position_encoding, affine_grid and grid_sampler (exported through spmd.layers.vision).

The first five are short compositions of existing ops (reshape, reduce, matmul, elementwise),
which give fluid's numbers and gradients without a dedicated kernel; affine_grid and
grid_sampler have their own ops (spmd/ops/sampling.py).

>>> # y = maxout(x [N, 6, 4, 4], groups=2)   # -> [N, 3, 4, 4]
"""
from __future__ import annotations

import numbers

import numpy as np

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable

__all__ = ["add_position_encoding", "affine_channel", "affine_grid", "bilinear_tensor_product",
           "fsp_matrix", "grid_sampler", "maxout"]

_FLOATS = {"float16", "float32", "float64"}


def _op(helper, op_type, inputs, attrs=None, dtype="float32", extra=None):
    out = helper.create_variable_for_type_inference(dtype)
    outputs = {"Out": [out]}
    if extra:
        outputs[extra] = [helper.create_variable_for_type_inference(dtype, stop_gradient=True)]
    helper.append_op(op_type, inputs, outputs, attrs or {})
    return out


def _reshape(helper, x, shape):
    return _op(helper, "reshape2", {"X": [x]}, {"shape": list(shape)}, x.dtype, "XShape")


def maxout(x, groups, name=None, axis=1):
    """Max over each run of `groups` consecutive channels: C channels -> C/groups. axis=1
    (NCHW) or -1/3 (NHWC).

    >>> # maxout(x [N, 6, 4, 4], groups=3) -> [N, 2, 4, 4]
    """
    where = "maxout"
    check_variable(x, "x", where, dtypes=_FLOATS)
    if axis not in (1, -1, 3):
        raise InvalidArgumentError(f"{where}: axis must be 1 (NCHW) or -1/3 (NHWC), got {axis}")
    if x.ndim != 4:
        raise InvalidArgumentError(f"{where}: x must be 4-D, got {list(x.shape)}")
    axis = 3 if axis == -1 else axis
    c = x.shape[axis]
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups <= 0 or (
            c > 0 and c % groups):
        raise InvalidArgumentError(f"{where}: groups={groups!r} must be a positive divisor of "
                                   f"the {c} channels")
    if axis == 1 and min(x.shape[2:]) <= 0:
        raise InvalidArgumentError(f"{where}: H and W of {x.name} {list(x.shape)} must be known")
    helper = LayerHelper(where, name=name)
    if axis == 1:
        shape = [-1, c // groups, groups, x.shape[2], x.shape[3]]
    else:
        shape = [0, 0, 0, c // groups, groups]  # 0: copy that dim of x
    grouped = _reshape(helper, x, shape)
    return _op(helper, "reduce_max", {"X": [grouped]},
               {"dim": [axis + 1], "keep_dim": False, "reduce_all": False}, x.dtype)


def affine_channel(x, scale=None, bias=None, data_layout="NCHW", name=None, act=None):
    """x * scale + bias per channel (scale, bias: [C] Variables), then `act`.

    >>> # affine_channel(x [N, 3, 8, 8], scale=s [3], bias=b [3])
    """
    where = "affine_channel"
    check_variable(x, "x", where, dtypes=_FLOATS)
    if data_layout not in ("NCHW", "NHWC"):
        raise InvalidArgumentError(f"{where}: data_layout must be 'NCHW' or 'NHWC', got "
                                   f"{data_layout!r}")
    axis = 1 if data_layout == "NCHW" else x.ndim - 1
    helper = LayerHelper(where, name=name, act=act)
    out = x
    if scale is not None:
        check_variable(scale, "scale", where)
        out = _op(helper, "elementwise_mul", {"X": [out], "Y": [scale]}, {"axis": axis}, x.dtype)
    if bias is not None:
        check_variable(bias, "bias", where)
        out = _op(helper, "elementwise_add", {"X": [out], "Y": [bias]}, {"axis": axis}, x.dtype)
    return helper.append_activation(out)


def fsp_matrix(x, y):
    """Flow-of-solution-procedure matrix: [N, C1, H, W] x [N, C2, H, W] -> [N, C1, C2],
    x_flat @ y_flat^T / (H*W).

    >>> # fsp_matrix(a [N, 3, 8, 8], b [N, 5, 8, 8]) -> [N, 3, 5]
    """
    where = "fsp_matrix"
    check_variable(x, "x", where, dtypes=_FLOATS)
    check_variable(y, "y", where, dtypes=_FLOATS)
    if x.ndim != 4 or y.ndim != 4 or list(x.shape[2:]) != list(y.shape[2:]) or min(
            x.shape[1:]) <= 0 or min(y.shape[1:]) <= 0:
        raise InvalidArgumentError(f"{where}: x and y must be 4-D with the same known H, W and "
                                   f"known channels, got {list(x.shape)} and {list(y.shape)}")
    helper = LayerHelper("fsp")
    hw = x.shape[2] * x.shape[3]
    xf = _reshape(helper, x, [0, x.shape[1], hw])
    yf = _reshape(helper, y, [0, y.shape[1], hw])
    return _op(helper, "matmul", {"X": [xf], "Y": [yf]},
               {"transpose_X": False, "transpose_Y": True, "alpha": 1.0 / hw}, x.dtype)


def bilinear_tensor_product(x, y, size, act=None, name=None, param_attr=None, bias_attr=None):
    """out[b, i] = x[b] W[i] y[b]^T + bias[i]: weight [size, M, N] (Xavier), bias [1, size].

    >>> # bilinear_tensor_product(x [B, 4], y [B, 5], size=3) -> [B, 3]
    """
    where = "bilinear_tensor_product"
    check_variable(x, "x", where, dtypes=_FLOATS)
    check_variable(y, "y", where, dtypes=_FLOATS)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] <= 0 or y.shape[1] <= 0:
        raise InvalidArgumentError(f"{where}: x and y must be 2-D [B, M], [B, N] with known "
                                   f"M, N; got {list(x.shape)} and {list(y.shape)}")
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size <= 0:
        raise InvalidArgumentError(f"{where}: size must be a positive int, got {size!r}")
    helper = LayerHelper(where, name=name, act=act, param_attr=param_attr, bias_attr=bias_attr)
    m, n = x.shape[1], y.shape[1]
    w = helper.create_parameter(helper.param_attr, [size, m, n], x.dtype)
    # x @ W[i] for every i at once: W as [M, size*N]
    wt = _op(helper, "transpose2", {"X": [w]}, {"axis": [1, 0, 2]}, x.dtype, "XShape")
    xw = _op(helper, "matmul", {"X": [x], "Y": [_reshape(helper, wt, [m, size * n])]},
             {"transpose_X": False, "transpose_Y": False, "alpha": 1.0}, x.dtype)
    prod = _op(helper, "elementwise_mul",
               {"X": [_reshape(helper, xw, [-1, size, n])],
                "Y": [_reshape(helper, y, [-1, 1, n])]}, {"axis": -1}, x.dtype)
    out = _op(helper, "reduce_sum", {"X": [prod]}, {"dim": [2], "keep_dim": False,
                                                    "reduce_all": False}, x.dtype)
    if helper.bias_attr is not False:
        b = helper.create_parameter(helper.bias_attr, [1, size], x.dtype, is_bias=True)
        out = _op(helper, "elementwise_add", {"X": [out], "Y": [b]}, {"axis": -1}, x.dtype)
    return helper.append_activation(out)


def _position_table(length: int, size: int) -> np.ndarray:
    """fluid's encoding: column k < size/2 is sin(pos / 10000^(k / (size/2 - 1))), column
    size/2 + k the cosine of the same angle."""
    half = size // 2
    pos = np.arange(length, dtype=np.float64)[:, None]
    k = np.arange(half, dtype=np.float64)[None, :]
    angle = pos / np.power(10000.0, k / (half - 1)) if half > 1 else pos / 10000.0
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def add_position_encoding(input, alpha, beta, name=None):
    """alpha * input + beta * PE for input [N, L, D] (D even), PE the sinusoid table of
    _position_table.

    >>> # add_position_encoding(x [N, 10, 16], alpha=1.0, beta=1.0)
    """
    where = "add_position_encoding"
    check_variable(input, "input", where, dtypes={"float32", "float64"})
    if input.ndim != 3 or input.shape[1] <= 0 or input.shape[2] <= 0 or input.shape[2] % 2:
        raise InvalidArgumentError(f"{where}: input must be [N, L, D] with known L and even D, "
                                   f"got {list(input.shape)}")
    helper = LayerHelper(where, name=name)
    table = _position_table(input.shape[1], input.shape[2])
    pe = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    # assign_value holds float32, as in fluid; a float64 input gets the table cast
    helper.append_op("assign_value", {}, {"Out": [pe]},
                     {"shape": list(table.shape), "dtype": "float32",
                      "fp32_values": [float(v) for v in table.reshape(-1)]})
    if input.dtype != "float32":
        pe = _op(helper, "cast", {"X": [pe]}, {"in_dtype": "float32", "out_dtype": input.dtype},
                 input.dtype)
    scaled = _op(helper, "scale", {"X": [input]}, {"scale": float(alpha), "bias": 0.0},
                 input.dtype)
    pe_scaled = _op(helper, "scale", {"X": [pe]}, {"scale": float(beta), "bias": 0.0},
                    input.dtype)
    return _op(helper, "elementwise_add", {"X": [scaled], "Y": [pe_scaled]}, {"axis": 1},
               input.dtype)



def affine_grid(theta, out_shape, name=None):
    """Sampling grid [N, H, W, 2] of the affine maps theta [N, 2, 3] over [-1, 1]^2, for
    out_shape [N, C, H, W] (a list, or an int32 Variable read at run time).

    >>> # grid = affine_grid(theta [N, 2, 3], out_shape=[N, 3, 8, 8])   # -> [N, 8, 8, 2]
    """
    where = "affine_grid"
    check_variable(theta, "theta", where, dtypes={"float32", "float64"})
    helper = LayerHelper(where)
    inputs, attrs = {"Theta": [theta]}, {}
    if isinstance(out_shape, Variable):
        check_variable(out_shape, "out_shape", where, dtypes={"int32"})
        inputs["OutputShape"] = [out_shape]
    elif isinstance(out_shape, (list, tuple)) and len(out_shape) == 4 and all(
            isinstance(d, numbers.Integral) for d in out_shape):
        attrs["output_shape"] = [int(d) for d in out_shape]
    else:
        raise InvalidArgumentError(f"{where}: out_shape must be 4 ints [N, C, H, W] or a "
                                   f"Variable, got {out_shape!r}")
    out = helper.create_variable_for_type_inference(theta.dtype)
    helper.append_op(where, inputs, {"Output": [out]}, attrs)
    return out


def grid_sampler(x, grid, name=None):
    """Bilinear sampling of x [N, C, H, W] at grid [N, Ho, Wo, 2] ((x, y) in [-1, 1], the
    corner pixels' centers at +-1; points outside read zero) -> [N, C, Ho, Wo].

    >>> # out = grid_sampler(x, affine_grid(theta, [N, 3, 8, 8]))
    """
    where = "grid_sampler"
    check_variable(x, "x", where, dtypes={"float32", "float64"})
    check_variable(grid, "grid", where, dtypes={"float32", "float64"})
    helper = LayerHelper(where, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(where, {"X": [x], "Grid": [grid]}, {"Output": [out]},
                     {"use_cudnn": True})
    return out
