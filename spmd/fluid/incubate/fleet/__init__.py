"""fluid.incubate.fleet: `base.role_maker`, the `collective` mode, the `parameter_server`
mode (its distribute_transpiler fleet) and `utils.fs`."""
from . import base, collective, parameter_server, utils

__all__ = ["base", "collective", "parameter_server", "utils"]
