"""fluid.distributed.fleet: fluid 1.8's legacy Downpour parameter server over pslib (Baidu's
closed-source PS, core.Fleet), which fluid's public wheels do not run; spmd's parameter server
is fluid's gRPC transpiler mode (fluid.transpiler, fleet's
parameter_server.distribute_transpiler). docs/fluid_coverage.md lists the names.
"""
from .._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "Fleet"])
