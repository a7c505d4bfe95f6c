"""Kernels: creation, copying and reshaping of tensors."""
from __future__ import annotations

from .registry import kernel


@kernel("fill_constant")
def fill_constant(xp, ins, attrs, want):
    value = float(attrs["str_value"]) if attrs["str_value"] else attrs["value"]
    return {"Out": xp.full(attrs["shape"], value, dtype=attrs["dtype"])}


@kernel("fill_any_like")
def fill_any_like(xp, ins, attrs, want):
    x = ins["X"]
    dtype = attrs["dtype"]
    return {"Out": xp.full(x.shape, attrs["value"], dtype=x.dtype if dtype in (None, -1) else dtype)}


@kernel("fill_zeros_like")
def fill_zeros_like(xp, ins, attrs, want):
    return {"Out": xp.zeros_like(ins["X"])}


@kernel("assign")
def assign(xp, ins, attrs, want):
    return {"Out": ins["X"].copy()}
