"""Kernels: tensors made from attributes or scalars (range, linspace, eye, diag, assign_value,
fill_constant_batch_size_like)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel


def _scalar(a):
    return (a.get() if hasattr(a, "get") else np.asarray(a)).reshape(-1)[0].item()


@kernel("range")
def range_(xp, ins, attrs, want):
    start, end, step = (_scalar(ins[s]) for s in ("Start", "End", "Step"))
    if step == 0 or (end - start) * step < 0:
        raise InvalidArgumentError(
            f"range: step {step} must be nonzero and point from start {start} towards end {end}")
    dtype = ins["Start"].dtype
    if np.dtype(dtype).kind == "f":
        # fluid divides in the tensors' own dtype: in float32, range(0, 0.3, 0.1) has
        # 0.3f / 0.1f = 3.0 -> 3 elements, where float64 gives 3.0000000298 -> 4
        f = np.dtype(dtype).type
        n = math.ceil(abs(float((f(end) - f(start)) / f(step))))
    else:
        n = math.ceil(abs((end - start) / step))  # fluid's length rule
    return {"Out": (start + step * xp.arange(n)).astype(dtype)}


@kernel("linspace")
def linspace(xp, ins, attrs, want):
    start, stop, num = _scalar(ins["Start"]), _scalar(ins["Stop"]), int(_scalar(ins["Num"]))
    if num <= 0:
        raise InvalidArgumentError(f"linspace: num must be > 0, got {num}")
    return {"Out": xp.linspace(start, stop, num).astype(ins["Start"].dtype)}


@kernel("eye")
def eye(xp, ins, attrs, want):
    rows, cols = attrs["num_rows"], attrs["num_columns"]
    return {"Out": xp.eye(rows, rows if cols == -1 else cols, dtype=attrs["dtype"])}


@kernel("diag")
def diag(xp, ins, attrs, want):
    return {"Out": xp.diag(ins["Diagonal"])}


_VALUE_ATTR = {"bool": "bool_values", "float32": "fp32_values", "int32": "int32_values",
               "int64": "int64_values"}


@kernel("assign_value")
def assign_value(xp, ins, attrs, want):
    dtype = attrs["dtype"]
    key = _VALUE_ATTR.get(dtype)
    if key is None:
        raise InvalidArgumentError(
            f"assign_value: dtype {dtype} is not one of {sorted(_VALUE_ATTR)}")
    return {"Out": xp.asarray(np.asarray(attrs[key], dtype=dtype).reshape(attrs["shape"]))}


@kernel("fill_constant_batch_size_like")
def fill_constant_batch_size_like(xp, ins, attrs, want):
    shape = list(attrs["shape"])
    lod = ins.get("Input@LOD")
    if lod and attrs["input_dim_idx"] == 0:  # fluid: the batch of a LoD tensor is its sequences
        shape[attrs["output_dim_idx"]] = len(lod[-1]) - 1
    else:
        shape[attrs["output_dim_idx"]] = ins["Input"].shape[attrs["input_dim_idx"]]
    value = float(attrs["str_value"]) if attrs["str_value"] else attrs["value"]
    return {"Out": xp.full(shape, value, dtype=attrs["dtype"])}
