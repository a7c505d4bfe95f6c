"""fluid.incubate.fleet.parameter_server.pslib: fleet over pslib (Baidu's closed-source parameter
server, core.Fleet), which fluid's public wheels do not run; spmd's fleet parameter server is
incubate.fleet.parameter_server.distribute_transpiler. docs/fluid_coverage.md lists the names.
"""
from ....._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "DownpourOptimizer", "PSLib", "fleet_embedding"])
