"""fluid.incubate.fleet: `base.role_maker`, the `collective` mode and `utils.fs`."""
from . import base, collective, utils

__all__ = ["base", "collective", "utils"]
