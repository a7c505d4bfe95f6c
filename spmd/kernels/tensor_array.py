"""Kernels: tensor arrays: create_array, write_to_array, read_from_array, lod_array_length,
tensor_array_to_tensor, sum_tensor_array and their gradients.

A tensor array is a Python list (None where nothing was written); its LoD is the list of its
elements' LoDs. Writing one makes a new list: values are never changed in place, so a loop's
saved states stay what they were.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .control_flow import add_values, scalar_int
from .registry import kernel


def _index(i, op: str) -> int:
    k = scalar_int(i, f"{op}'s index I")
    if k < 0:
        raise InvalidArgumentError(f"{op}: index I is {k}; tensor array indices start at 0")
    return k


@kernel("create_array")
def create_array(xp, ins, attrs, want):
    return {"Out": []}


@kernel("write_to_array")
def write_to_array(xp, ins, attrs, want):
    k = _index(ins["I"], "array_write")
    given = ins.get("Array")
    if given is not None and not isinstance(given, list):
        raise InvalidArgumentError(
            f"array_write: Array must be a tensor array (fluid.layers.create_array), got a "
            f"{type(given).__name__}")
    array = list(given or [])  # a new list: the old array value stays as it was
    if k >= len(array):
        array.extend([None] * (k + 1 - len(array)))
    array[k] = ins["X"]
    return {"Out": array, "Out@LOD": _element_lods(ins.get("Array@LOD"), len(array), k,
                                                    ins.get("X@LOD"))}


def _element_lods(lods, length: int, k: int, lod):
    """An array's LoD (its elements' LoDs) with element k's set to `lod`; None while no
    element has one."""
    if lods is None and lod is None:
        return None
    lods = list(lods or ())
    lods.extend([None] * (length - len(lods)))
    lods[k] = lod
    return lods


@kernel("write_to_array_grad")
def write_to_array_grad(xp, ins, attrs, want):
    k = _index(ins["I"], "array_write's gradient")
    dout = ins["Out@GRAD"] or []
    res = {}
    if "X@GRAD" in want:
        g = dout[k] if k < len(dout) else None
        res["X@GRAD"] = xp.zeros_like(ins["X"]) if g is None else g
    if "Array@GRAD" in want:  # element k was overwritten: nothing flows to what it held
        rest = list(dout)
        if k < len(rest):
            rest[k] = None
        res["Array@GRAD"] = rest
    return res


@kernel("read_from_array")
def read_from_array(xp, ins, attrs, want):
    array, k = ins["X"], _index(ins["I"], "array_read")
    if k >= len(array) or array[k] is None:
        raise InvalidArgumentError(
            f"array_read: index {k} of a tensor array of length {len(array)} holds no tensor; "
            f"write it with array_write first")
    lods = ins.get("X@LOD")
    return {"Out": array[k], "Out@LOD": lods[k] if lods and k < len(lods) else None}


@kernel("read_from_array_grad")
def read_from_array_grad(xp, ins, attrs, want):
    array, k = ins["X"], _index(ins["I"], "array_read's gradient")
    grad = [None] * len(array)
    grad[k] = ins["Out@GRAD"]
    return {"X@GRAD": grad}


@kernel("lod_array_length")
def lod_array_length(xp, ins, attrs, want):
    return {"Out": xp.asarray([len(ins["X"])], dtype=np.int64)}


def _array_items(array, op: str) -> list:
    if not array:
        raise InvalidArgumentError(f"{op}: the tensor array is empty")
    missing = [i for i, a in enumerate(array) if a is None]
    if missing:
        raise InvalidArgumentError(f"{op}: elements {missing} of the tensor array were never "
                                   f"written")
    return array


@kernel("tensor_array_to_tensor")
def tensor_array_to_tensor(xp, ins, attrs, want):
    items = _array_items(ins["X"], "tensor_array_to_tensor")
    axis = attrs["axis"]
    if attrs["use_stack"]:
        out = xp.stack(items, axis=axis)
        sizes = [1] * len(items)
    else:
        out = xp.concatenate(items, axis=axis)
        sizes = [a.shape[axis] for a in items]
    return {"Out": out, "OutIndex": xp.asarray(sizes, dtype=np.int32)}


@kernel("tensor_array_to_tensor_grad")
def tensor_array_to_tensor_grad(xp, ins, attrs, want):
    items, dout, axis = ins["X"], ins["Out@GRAD"], attrs["axis"]
    if attrs["use_stack"]:
        ax = axis if axis >= 0 else axis + dout.ndim
        return {"X@GRAD": [xp.take(dout, i, axis=ax) for i in range(len(items))]}
    bounds = np.cumsum([a.shape[axis] for a in items])[:-1].tolist()
    return {"X@GRAD": xp.split(dout, bounds, axis=axis)}


@kernel("sum_tensor_array")
def sum_tensor_array(xp, ins, attrs, want):
    out = None
    for a in ins["X"]:
        out = add_values(out, list(a) if isinstance(a, list) else a)
    return {"Out": out}

