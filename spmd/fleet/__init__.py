"""fleet, collective mode, on spmd's data-parallel engine: role makers, fluid 1.x's
`incubate.fleet.collective` and Paddle 2.x's static `paddle.distributed.fleet`. The faces
(spmd.fluid.incubate.fleet, spmd.distributed.fleet) re-export from here. Checkpoints of
fluid 1.x's fleet: checkpoint.py (TrainStatus) over fs.py (LocalFS)."""
from __future__ import annotations

from . import role_maker
from .checkpoint import TrainStatus
from .collective import Collective, CollectiveOptimizer, DistributedStrategy, fleet
from .fleet_v2 import DistributedStrategy as DistributedStrategyV2
from .fleet_v2 import Fleet
from .fs import LocalFS

__all__ = ["Collective", "CollectiveOptimizer", "DistributedStrategy", "DistributedStrategyV2",
           "Fleet", "LocalFS", "TrainStatus", "fleet", "role_maker"]
