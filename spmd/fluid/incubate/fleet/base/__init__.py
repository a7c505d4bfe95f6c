"""fluid.incubate.fleet.base: role makers, the Fleet base class and the Mode ids."""
from . import fleet_base, mode, role_maker

__all__ = ["fleet_base", "mode", "role_maker"]
