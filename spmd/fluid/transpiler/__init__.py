"""fluid.transpiler: DistributeTranspiler (pserver and nccl2 mode) and its config,
memory_optimize, release_memory, HashName, RoundRobin; fluid 1.8's submodules by their names
(distribute_transpiler, geo_sgd_transpiler, ps_dispatcher, memory_optimization_transpiler,
collective, details)."""
from .. import _pending
from . import collective, distribute_transpiler, memory_optimization_transpiler, ps_dispatcher
from .distribute_transpiler import DistributeTranspiler, DistributeTranspilerConfig
from .geo_sgd_transpiler import GeoSgdTranspiler
from .memory_optimization_transpiler import memory_optimize, release_memory
from .ps_dispatcher import HashName, RoundRobin

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "GeoSgdTranspiler",
           "HashName", "RoundRobin", "collective", "distribute_transpiler",
           "memory_optimization_transpiler", "memory_optimize", "ps_dispatcher",
           "release_memory"]

# fluid's other submodules (collective, details) are imported at first use
_pending.missing_names(globals(), [])
