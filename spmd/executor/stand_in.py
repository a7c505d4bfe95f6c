"""Shape-only stand-ins (fluid's "no need buffer" inputs): after the last op that reads a value's
data, while ops that read only its shape remain (elementwise_add_grad's X and Y: an op
definition's `no_need_buffer` slots), the plan puts a `ShapeOnly` in the value's place, so its
buffer is freed (or lent to that last reader, inplace.py's DyingInputs) instead of living until
the backward pass.

A stand-in answers `shape`, `dtype`, `ndim`, `size`, `itemsize` and `nbytes` as the array did,
and `len()`; anything else (its data, arithmetic, numpy conversion) raises NoNeedBufferError
naming the variable, which the plan reports with the op.

>>> s = ShapeOnly.of(__import__("numpy").zeros((2, 3), "float32"), "fc_0.tmp_0")
>>> s.shape, s.ndim, s.size, str(s.dtype)
((2, 3), 2, 6, 'float32')
"""
from __future__ import annotations

from ..errors import PreconditionError


class NoNeedBufferError(PreconditionError):
    """A kernel touched the data of a value its op declared it reads only for its shape."""


class ShapeOnly:
    """What stays of a value whose buffer is no longer needed: its shape, dtype, ndim, size."""

    __slots__ = ("shape", "dtype", "ndim", "size", "name")

    def __init__(self, shape: tuple, dtype, name: str):
        self.shape, self.dtype, self.name = tuple(shape), dtype, name
        self.ndim = len(self.shape)
        size = 1
        for d in self.shape:
            size *= int(d)
        self.size = size

    @classmethod
    def of(cls, array, name: str) -> ShapeOnly:
        """The stand-in of `array` (of variable `name`); a stand-in stays itself."""
        if type(array) is cls or array is None:
            return array
        return cls(array.shape, array.dtype, name)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"ShapeOnly('{self.name}', shape={self.shape}, dtype={self.dtype})"

    def _touched(self, what: str):
        raise NoNeedBufferError(
            f"variable '{self.name}' was read for its data ({what}) after its buffer was "
            f"dropped: the op reading it declares that slot no-need-buffer (shape only, "
            f"OpDef.no_need_buffer), but its kernel uses the values; remove the slot from "
            f"the op definition's grad_no_need_buffer or make the kernel read only .shape")

    def __getattr__(self, attr: str):
        self._touched(f"attribute '{attr}'")

    def __array__(self, *args, **kwargs):
        self._touched("converted to an array")

    def __getitem__(self, key):
        self._touched("indexed")

    def __iter__(self):
        self._touched("iterated")

    def __bool__(self):
        self._touched("truth value")

    def __float__(self):
        self._touched("float()")

    def __index__(self):
        self._touched("int()")

    __int__ = __index__

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._touched(f"numpy.{ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        self._touched(f"numpy.{func.__name__}")


def _binary(name: str):
    def op(self, *other):
        self._touched(f"operator {name}")
    op.__name__ = name
    return op


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "pow", "rpow", "matmul", "rmatmul", "neg", "pos", "abs",
              "invert", "and", "or", "xor", "lt", "le", "gt", "ge", "iadd", "isub", "imul",
              "itruediv"):
    setattr(ShapeOnly, f"__{_name}__", _binary(f"__{_name}__"))
del _name
