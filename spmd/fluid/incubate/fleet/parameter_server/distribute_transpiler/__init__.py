"""fluid.incubate.fleet.parameter_server.distribute_transpiler: fleet in parameter-server mode
(spmd/fleet/parameter_server.py) and its strategies (spmd/fleet/ps_strategy.py).

>>> from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
>>> from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy \
...     import StrategyFactory
"""
from ......fleet.parameter_server import (  # noqa: F401
    DistributedTranspiler,
    TranspilerOptimizer,
    fleet,
)
from ......fleet.ps_strategy import (  # noqa: F401
    AsyncStrategy,
    DistributedStrategy,
    GeoStrategy,
    HalfAsyncStrategy,
    StrategyFactory,
    SyncStrategy,
    TrainerRuntimeConfig,
)
from ......ps.transpiler import DistributeTranspilerConfig  # noqa: F401
from . import distributed_strategy  # noqa: F401

__all__ = ["AsyncStrategy", "DistributeTranspilerConfig", "DistributedStrategy",
           "DistributedTranspiler", "GeoStrategy", "HalfAsyncStrategy", "StrategyFactory",
           "SyncStrategy", "TrainerRuntimeConfig", "TranspilerOptimizer", "fleet"]
