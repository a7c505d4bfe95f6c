"""Parameter-server mode and distributed transpiling: the transpiler (nccl2 mode's
communicator init; pserver mode's trainer and pserver programs), the gRPC transport
(wire.py, rpc.py, handler.py)."""
from .slicing import HashName, PSDispatcher, RoundRobin
from .transpiler import DistributeTranspiler, DistributeTranspilerConfig

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "HashName", "PSDispatcher",
           "RoundRobin"]
