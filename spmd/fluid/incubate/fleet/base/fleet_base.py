"""fluid.incubate.fleet.base.fleet_base: the Fleet base class and the optimizer wrapper."""
from .....fleet.base import FleetBase as Fleet
from .....fleet.collective import CollectiveOptimizer as DistributedOptimizer
from .mode import Mode

__all__ = ["DistributedOptimizer", "Fleet", "Mode"]
