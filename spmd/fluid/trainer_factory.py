"""fluid.trainer_factory: fluid 1.8's factory of C++ trainer descriptions and its fetch-handler
monitor thread; spmd's train_from_dataset runs the program itself and calls a FetchHandler
(fluid.executor.FetchHandler). docs/fluid_coverage.md lists the names.
"""
from ._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "FetchHandlerMonitor", "TrainerFactory"])
