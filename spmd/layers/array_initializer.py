"""Initializers that write given values (fluid.initializer.NumpyArrayInitializer and
BilinearInitializer) with one assign_value op in the startup program, as fluid 1.8 does.

>>> import numpy as np
>>> NumpyArrayInitializer(np.eye(2, dtype="float32")).value.shape
(2, 2)
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from .initializer import Initializer

__all__ = ["Bilinear", "BilinearInitializer", "NumpyArrayInitializer"]

# dtype of the variable -> the assign_value attribute that carries its values
_VALUE_ATTRS = {"float32": "fp32_values", "float16": "fp32_values", "int32": "int32_values",
                "int64": "int64_values", "bool": "bool_values"}
_MAX_VALUES = 1024 * 1024  # assign_value keeps its values in the program, as fluid's does


def _assign(var, block, values: np.ndarray, who: str):
    if tuple(values.shape) != tuple(var.shape):
        raise InvalidArgumentError(
            f"{who}: value of shape {list(values.shape)} cannot initialize '{var.name}' of "
            f"shape {list(var.shape)}; give an array of the variable's shape")
    attr = _VALUE_ATTRS.get(var.dtype)
    if attr is None:
        raise InvalidArgumentError(
            f"{who}: '{var.name}' has dtype {var.dtype}; fluid's assign_value carries "
            f"{sorted(_VALUE_ATTRS)} only: create the variable as float32 (or cast after)")
    if values.size > _MAX_VALUES:
        raise InvalidArgumentError(
            f"{who}: {values.size} values for '{var.name}' is more than assign_value carries "
            f"({_MAX_VALUES}); save the array with fluid.io.save_vars and load it instead")
    flat = values.astype("float32" if attr == "fp32_values" else var.dtype).reshape(-1)
    return block._prepend_op("assign_value", outputs={"Out": [var]},
                             attrs={"shape": list(var.shape), "dtype": var.dtype,
                                    attr: flat.tolist()})


class NumpyArrayInitializer(Initializer):
    """Sets the variable to a given numpy array (of the variable's shape).

    >>> init = NumpyArrayInitializer(np.zeros((3, 2), dtype="float32"))
    >>> # fc(x, size=2, param_attr=ParamAttr(initializer=init))
    """

    def __init__(self, value):
        if not isinstance(value, np.ndarray):
            raise InvalidArgumentError(
                f"NumpyArrayInitializer expects a numpy.ndarray, got {type(value).__name__}")
        self.value = value

    _FP16_TMP_PREFIX = "numpy_array_init"

    def _init(self, var, block):
        return _assign(var, block, self.value, "NumpyArrayInitializer")

    def __repr__(self):
        return f"NumpyArrayInitializer(shape={list(self.value.shape)})"


class BilinearInitializer(Initializer):
    """Bilinear-upsampling weights for a [C_out, C_in, K, K] conv2d_transpose filter.

    The row index is computed as fluid 1.8 computes it under Python 3, `(i / K) % K` with true
    division, so the weights equal real Paddle's bit for bit.

    >>> BilinearInitializer()
    BilinearInitializer()
    """

    _FP16_TMP_PREFIX = "bilinear_init"

    def _init(self, var, block):
        shape = tuple(var.shape)
        if len(shape) != 4 or shape[2] != shape[3]:
            raise InvalidArgumentError(
                f"BilinearInitializer: '{var.name}' must be a 4-D filter with square kernels "
                f"([C_out, C_in, K, K]), got shape {list(shape)}")
        size = shape[3]
        f = math.ceil(size / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        i = np.arange(math.prod(shape), dtype="float64")
        x, y = i % size, (i / size) % size
        weight = ((1 - np.abs(x / f - c)) * (1 - np.abs(y / f - c))).astype("float32")
        return _assign(var, block, weight.reshape(shape), "BilinearInitializer")

    def __repr__(self):
        return "BilinearInitializer()"


Bilinear = BilinearInitializer
