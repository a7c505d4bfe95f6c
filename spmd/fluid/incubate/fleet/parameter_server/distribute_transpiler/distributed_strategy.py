"""fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy: the
parameter-server strategies (spmd/fleet/ps_strategy.py)."""
from ......fleet.ps_strategy import (  # noqa: F401
    AsyncStrategy,
    DistributedStrategy,
    GeoStrategy,
    HalfAsyncStrategy,
    ServerRuntimeConfig,
    StrategyFactory,
    SyncStrategy,
    TrainerRuntimeConfig,
)

__all__ = ["AsyncStrategy", "DistributedStrategy", "GeoStrategy", "HalfAsyncStrategy",
           "ServerRuntimeConfig", "StrategyFactory", "SyncStrategy", "TrainerRuntimeConfig"]
