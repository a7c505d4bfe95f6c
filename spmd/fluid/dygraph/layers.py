"""fluid.dygraph.layers: `Layer`, the dygraph module base class; constructing one (or a
subclass) raises, naming the static way.

>>> from spmd.fluid.dygraph.layers import Layer
"""
from __future__ import annotations

from ._static_only import static_only

__all__ = ["Layer"]


class Layer:
    """fluid.dygraph.Layer: importable, so a script that defines a subclass imports; building
    one raises (a dygraph Layer holds eager parameters)."""

    _STATIC = ("a function that builds the model with fluid.layers (fc, conv2d, ...) inside "
               "program_guard")

    def __init__(self, *args, **kwargs):
        raise static_only(f"fluid.dygraph.{type(self).__name__}", self._STATIC)
