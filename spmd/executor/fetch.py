"""What `Executor.run` hands back per fetch: a numpy array that also reads as a Python scalar
when it holds one value.

fluid 1.x fetches a loss with shape [1], and fluid programs print it with `"%f" % loss`,
`float(loss)` or `"{:.4f}".format(loss)`. numpy 2.x refuses to turn an array of ndim > 0 into
a Python scalar ("only 0-dimensional arrays can be converted to Python scalars"), so those
idioms fail on a plain array. spmd keeps fluid's shapes (a [1] loss stays [1], so `loss[0]`,
`loss.shape` and `np.concatenate` behave as in fluid) and returns `FetchedArray`, an ndarray
subclass whose scalar conversions accept exactly one element, as numpy 1.x did. Everything else
is numpy's own behaviour; `np.asarray(result)` gives a plain ndarray.

>>> import numpy as np
>>> loss = np.array([0.25], dtype="float32").view(FetchedArray)
>>> "%.2f" % loss, float(loss), "{:.3f}".format(loss), loss.shape
('0.25', 0.25, '0.250', (1,))
"""
from __future__ import annotations

import numpy as np

__all__ = ["FetchedArray", "as_fetched", "host_copy", "as_lod_tensors"]


class FetchedArray(np.ndarray):
    """A fetched value (an ndarray); float(), int(), complex() and format specs work on any
    one-element array, whatever its shape."""

    def __repr__(self):  # as fluid's plain arrays print: array([...]), in logs alike
        return repr(np.asarray(self))

    def _scalar(self, kind: str):
        if self.size != 1:
            raise TypeError(
                f"{kind}() needs a fetched value with exactly one element, got shape "
                f"{list(self.shape)}; index it (value[0]) or reduce it first (value.mean())")
        return np.asarray(self).reshape(()).item()

    def __float__(self):
        return float(self._scalar("float"))

    def __int__(self):
        return int(self._scalar("int"))

    def __complex__(self):
        return complex(self._scalar("complex"))

    def __format__(self, spec: str):
        if spec and self.size == 1:
            return format(self._scalar("format"), spec)
        return np.asarray(self).__format__(spec)


def as_fetched(value):
    """`value` (a host ndarray) viewed as a FetchedArray, each of a list's (a fetched tensor
    array) alike; other objects pass through."""
    if type(value) is np.ndarray:
        return value.view(FetchedArray)
    if isinstance(value, list):
        return [as_fetched(v) for v in value]
    return value


def host_copy(value):
    """A fetched value copied to the host (a fetch may be a view of a buffer the next step
    reuses): an array, a sparse gradient as its dense table, a tensor array as a list."""
    from ..core.scope import host_array
    from ..core.selected_rows import dense_of

    if isinstance(value, list):
        return [host_copy(v) for v in value]
    return host_array(dense_of(value), copy=True)


def as_lod_tensors(value):
    """A fetched host value for return_numpy=False: a LoDTensor, a tensor array as a
    LoDTensorArray of them (fluid's, with `len`, indexing and `np.array(item)`)."""
    from ..core.lod import LoDTensor, LoDTensorArray

    if isinstance(value, list):
        return LoDTensorArray(as_lod_tensors(v) for v in value)
    return LoDTensor(value)
