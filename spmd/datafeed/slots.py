"""The slots a dataset reads: one per variable given to set_use_var, in that order.

A MultiSlot line holds every slot in this order; a slot of a `lod_level=0` variable is dense
(each record carries exactly the values of one row of the variable's shape), any other is
sparse (a variable-length sequence, fed with its LoD). fluid 1.8 knows two value types:
"float" (float32 variables) and "uint64" (int64 variables, fed as int64).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidArgumentError

_TYPES = {"float32": "float", "int64": "uint64"}


@dataclass(frozen=True)
class Slot:
    """One slot of the MultiSlot format (fluid's `multi_slot_desc.slots`)."""

    name: str
    type: str  # "float" or "uint64"
    is_dense: bool | None  # None: not set in the description (read as False)
    shape: tuple = ()
    is_used: bool | None = True

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32 if self.type == "float" else np.int64)

    @property
    def row_size(self) -> int:
        """Values one record of a dense slot carries: the product of the known dimensions."""
        size = 1
        for d in self.shape:
            if d is not None and d > 0:
                size *= d
        return size

    def batch_shape(self, total: int) -> list[int]:
        """The dense slot's tensor shape for `total` values: its shape, the -1 inferred."""
        shape = [-1 if d is None else int(d) for d in self.shape] or [-1, 1]
        if -1 in shape:
            shape[shape.index(-1)] = total // self.row_size
        return shape


@dataclass
class SlotsDesc:
    """fluid's `proto_desc.multi_slot_desc`: the slots, in order."""

    slots: list = field(default_factory=list)


def slot_of(var) -> Slot:
    """The slot fluid's set_use_var makes for `var` (a data variable)."""
    dtype = str(getattr(var, "dtype", ""))
    if dtype not in _TYPES:
        raise InvalidArgumentError(
            f"Dataset.set_use_var: variable '{getattr(var, 'name', var)}' is {dtype}; "
            f"Currently, fluid.dataset only supports dtype=float32 and dtype=int64 "
            f"(declare it float32 or int64 and cast inside the program)")
    dense = int(getattr(var, "lod_level", 0) or 0) == 0
    shape = tuple(-1 if d is None else int(d) for d in var.shape) if dense else ()
    # fluid sets is_dense only for a dense slot (its desc() prints no is_dense otherwise)
    return Slot(name=var.name, type=_TYPES[dtype], is_dense=True if dense else None,
                shape=shape)
