"""Parameter-server mode and distributed transpiling: the transpiler (nccl2 mode's
communicator init; pserver mode's trainer and pserver programs), the gRPC transport
(wire.py, rpc.py, handler.py); the run time of both roles (trainer.py and kernels.py: the
trainer's send / recv / barrier / prefetch ops; pserver.py: `exe.run(pserver_program)` serves);
Geo-SGD (geo.py: its programs; geo_trainer.py: the trainer's pushes of parameter deltas).
"""
from . import kernels as _kernels  # noqa: F401 - the trainer ops' kernels
from .slicing import HashName, PSDispatcher, RoundRobin
from .transpiler import DistributeTranspiler, DistributeTranspilerConfig

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "HashName", "PSDispatcher",
           "RoundRobin"]
