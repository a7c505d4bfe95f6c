"""fluid.incubate.fleet: `base.role_maker` and the `collective` mode."""
from . import base, collective

__all__ = ["base", "collective"]
