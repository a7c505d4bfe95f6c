"""fluid.incubate.fleet.collective: `fleet`, `DistributedStrategy` and `TrainStatus` of fluid
1.6-1.8's collective mode, trained on spmd's data-parallel engine; fleet.save_check_point /
load_check_point write fluid's checkpoint layout atomically (spmd/fleet/checkpoint.py).

>>> from spmd.fluid.incubate.fleet.collective import fleet, DistributedStrategy
"""
from .....fleet.collective import (  # noqa: F401
    Collective,
    CollectiveOptimizer,
    DistributedStrategy,
    TrainStatus,
    fleet,
)
from .....fleet.fs import LocalFS  # noqa: F401 - fluid's module imports it too

__all__ = ["Collective", "CollectiveOptimizer", "DistributedStrategy", "TrainStatus", "fleet"]
