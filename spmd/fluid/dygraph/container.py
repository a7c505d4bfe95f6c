"""fluid.dygraph.container: Sequential, ParameterList, LayerList; constructing one raises.

>>> from spmd.fluid.dygraph.container import Sequential
"""
from __future__ import annotations

from ._static_only import refusing_class
from .layers import Layer

__all__ = ["Sequential", "ParameterList", "LayerList"]

Sequential = refusing_class("Sequential", "calling the fluid.layers builders one after another",
                            Layer)
ParameterList = refusing_class("ParameterList", "fluid.layers.create_parameter per parameter",
                               Layer)
LayerList = refusing_class("LayerList", "a Python list of the outputs of fluid.layers calls",
                           Layer)
