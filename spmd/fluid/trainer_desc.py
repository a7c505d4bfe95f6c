"""fluid.trainer_desc: fluid 1.8's protobuf descriptions of its C++ trainers (MultiTrainer,
DistMultiTrainer, PipelineTrainer), which Executor.train_from_dataset hands to C++; spmd's
train_from_dataset runs the program itself (spmd/executor). docs/fluid_coverage.md lists the
names.
"""
from ._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "DistMultiTrainer", "MultiTrainer", "PipelineTrainer", "TrainerDesc"])
