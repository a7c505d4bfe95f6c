"""fluid.incubate.fleet.collective: `fleet` and `DistributedStrategy` of fluid 1.6-1.8's
collective mode, trained on spmd's data-parallel engine.

>>> from spmd.fluid.incubate.fleet.collective import fleet, DistributedStrategy
"""
from .....fleet.collective import (  # noqa: F401
    Collective,
    CollectiveOptimizer,
    DistributedStrategy,
    fleet,
)

__all__ = ["Collective", "CollectiveOptimizer", "DistributedStrategy", "fleet"]
