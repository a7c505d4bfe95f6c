"""fluid.incubate.fleet.parameter_server: the DistributeTranspiler-based fleet (spmd's pserver
runtime); fluid's pslib fleet is not provided.

>>> from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
"""
from . import distribute_transpiler

__all__ = ["distribute_transpiler"]
