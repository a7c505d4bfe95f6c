"""Distributed transpiling: nccl2 mode (collective training); parameter-server mode's
program split, server and client are to come."""
from .transpiler import DistributeTranspiler, DistributeTranspilerConfig, HashName, RoundRobin

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "HashName", "RoundRobin"]
