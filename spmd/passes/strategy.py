"""BuildStrategy and ExecutionStrategy: every field fluid 1.8 has, with its 1.8 default.

Fields spmd does not act on are accepted so fluid scripts run unchanged; each says so below.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields

from ..errors import InvalidArgumentError


class ReduceStrategy(enum.IntEnum):
    """How gradients are aggregated across places: AllReduce, or Reduce to an owner + Broadcast."""

    AllReduce = 0
    Reduce = 1


class GradientScaleStrategy(enum.IntEnum):
    """How loss@GRAD is seeded: 1/num_devices (CoeffNumDevice), 1 (One), or fed (Customized)."""

    CoeffNumDevice = 0
    One = 1
    Customized = 2


class _Strict:
    """Setting a field that does not exist is an error naming the fields (fluid's C++ binding
    raises too), so a typo never passes silently."""

    def __setattr__(self, name, value):
        if name not in {f.name for f in fields(self)}:
            import difflib

            close = difflib.get_close_matches(name, [f.name for f in fields(self)], n=3)
            raise InvalidArgumentError(
                f"{type(self).__name__} has no field '{name}'"
                + (f"; did you mean {close}?" if close else "")
            )
        object.__setattr__(self, name, value)


@dataclass
class BuildStrategy(_Strict):
    """How CompiledProgram rewrites a program (fluid.BuildStrategy).

    >>> bs = BuildStrategy()
    >>> bs.reduce_strategy = BuildStrategy.ReduceStrategy.Reduce
    """

    reduce_strategy: ReduceStrategy = ReduceStrategy.AllReduce
    gradient_scale_strategy: GradientScaleStrategy = GradientScaleStrategy.CoeffNumDevice
    fuse_all_reduce_ops: bool = False  # pack gradients into buckets, one allreduce per bucket
    fuse_broadcast_ops: bool = False  # Reduce mode: one broadcast per bucket of parameters
    memory_optimize: bool = False  # accepted; the plan frees every value after its last use
    enable_inplace: bool = False  # accepted; the plan frees dead values either way
    fuse_elewise_add_act_ops: bool = False  # accepted; numerically identical either way
    fuse_bn_act_ops: bool = False  # accepted, no effect
    fuse_relu_depthwise_conv: bool = False  # accepted, no effect
    fuse_all_optimizer_ops: bool = False  # accepted, no effect
    enable_auto_fusion: bool = False  # accepted, no effect
    sync_batch_norm: bool = False  # accepted; batch_norm statistics stay per place
    enable_sequential_execution: bool = False  # spmd always runs ops in program order
    debug_graphviz_path: str = ""  # accepted, no effect
    num_trainers: int = 1
    trainer_id: int = 0
    trainers_endpoints: list = field(default_factory=list)
    nccl_comm_num: int = 1  # accepted; one communicator is used
    use_hierarchical_allreduce: bool = False  # accepted, no effect
    hierarchical_allreduce_inter_nranks: int = 0  # accepted, no effect
    enable_backward_optimizer_op_deps: bool = True  # accepted, no effect
    cache_runtime_context: bool = False  # accepted, no effect
    remove_unnecessary_lock: bool = True  # accepted, no effect
    is_distribution: bool = False  # accepted, no effect
    async_mode: bool = False  # accepted, no effect
    mkldnn_enabled_op_types: list = field(default_factory=list)  # accepted, no effect

    ReduceStrategy = ReduceStrategy
    GradientScaleStrategy = GradientScaleStrategy


@dataclass
class ExecutionStrategy(_Strict):
    """How a CompiledProgram runs (fluid.ExecutionStrategy)."""

    num_threads: int = 0  # thread pool size for the SSA executor; 0 = number of places
    use_cuda: bool = False  # accepted; the place decides
    allow_op_delay: bool = False  # accepted, no effect
    num_iteration_per_drop_scope: int = 100  # accepted; temporaries are dropped every step
    num_iteration_per_run: int = 1  # accepted, no effect: one run is one step
    use_thread_barrier: bool = False  # accepted, no effect
    dry_run: bool = False  # accepted, no effect
