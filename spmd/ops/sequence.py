"""Op definitions: the sequence ops, which read the LoD of their input (spmd/core/lod.py).

A sequence op's kernel gets the LoD of its `lod_inputs` as `ins["X@LOD"]` (a tuple of offset
levels, or None when the variable carries none) and returns the LoD of its `lod_outputs` as
`res["Out@LOD"]`; shape inference sets the outputs' lod_level. Gradients read the forward
input's LoD the same way and carry none themselves.

>>> # sequence_pool(x with LoD [[0, 2, 5]], "SUM") -> 2 rows, one per sequence
"""
from __future__ import annotations

from .registry import define_op

POOL_TYPES = ("AVERAGE", "SUM", "SQRT", "LAST", "FIRST", "MAX")


@define_op("sequence_pool", inputs=["X"], outputs=["Out", "MaxIndex?"],
           attrs={"pooltype": ("str", "AVERAGE"), "is_test": ("bool", False),
                  "pad_value": ("float", 0.0)},
           nondiff_outputs=("MaxIndex",), grad_uses=("X", "MaxIndex"),
           lod_inputs=("X",), lod_outputs=("Out",))
def _sequence_pool(ctx):
    x = ctx.input("X")
    pooltype = ctx.attr("pooltype")
    ctx.check(pooltype in POOL_TYPES,
              f"pooltype '{pooltype}' is not one of {list(POOL_TYPES)}")
    ctx.check(x.lod_level >= 1,
              f"X '{x.name}' has lod_level {x.lod_level}; sequence_pool pools the sequences "
              f"of a LoD tensor: declare the data variable with lod_level=1 and feed a "
              f"LoDTensor")
    shape = (-1,) + tuple(x.shape[1:])
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("MaxIndex", shape, "int32")
    ctx.set_lod_level("Out", x.lod_level - 1)
