"""fluid.dygraph.backward_strategy: BackwardStrategy holds a dygraph option; it is a plain
settings object, harmless to build.

>>> from spmd.fluid.dygraph.backward_strategy import BackwardStrategy
>>> BackwardStrategy().sort_sum_gradient
False
"""
from __future__ import annotations

__all__ = ["BackwardStrategy"]


class BackwardStrategy:
    """`sort_sum_gradient` only matters to dygraph's backward pass; static gradients are
    always summed in a fixed order."""

    def __init__(self):
        self.sort_sum_gradient = False
