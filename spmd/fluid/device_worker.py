"""fluid.device_worker: fluid 1.8's protobuf descriptions of the C++ device workers (Hogwild,
DownpourSGD, Section) of its dataset trainers; spmd's train_from_dataset runs the program
itself. docs/fluid_coverage.md lists the names.
"""
from ._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "DeviceWorker", "DownpourSGD", "DownpourSGDOPT", "Hogwild", "Section"])
