"""BuildStrategy and ExecutionStrategy: every field fluid 1.8 has, with its 1.8 default.

Fields spmd does not act on are accepted so fluid scripts run unchanged; each says so below, and
setting one to a value other than its default warns once, naming it (`warn_unacted`).
"""
from __future__ import annotations

import enum
import warnings
from dataclasses import MISSING, dataclass, field, fields

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
    """How CompiledProgram rewrites a program (fluid.BuildStrategy); defaults are fluid 1.8's.

    >>> bs = BuildStrategy()
    >>> bs.reduce_strategy = BuildStrategy.ReduceStrategy.Reduce
    """

    reduce_strategy: ReduceStrategy = ReduceStrategy.AllReduce
    gradient_scale_strategy: GradientScaleStrategy = GradientScaleStrategy.CoeffNumDevice
    fuse_all_reduce_ops: bool = True  # pack gradients into buckets, one allreduce per bucket
    fuse_broadcast_ops: bool = True  # Reduce mode: one broadcast per bucket of parameters
    memory_optimize: bool | None = None  # the plan always frees every value after its last use
    enable_inplace: bool = True  # the plan frees dead values either way
    sync_batch_norm: bool = False  # batch_norm statistics over all places
    enable_sequential_execution: bool = False  # spmd always runs ops in program order
    num_trainers: int = 1  # checked against the number of processes
    trainer_id: int = 0  # checked against this process's rank
    trainers_endpoints: list = field(default_factory=list)  # the launcher's endpoints are used
    enable_backward_optimizer_op_deps: bool = True  # ops run in program order either way
    remove_unnecessary_lock: bool = True  # no locks: one thread per place
    cache_runtime_context: bool = False  # plans are always cached
    is_distribution: bool = False  # set by fluid's transpiler; MPI decides here
    # not acted on (warned once when changed): fusions and debugging aids of fluid's C++ passes
    fuse_elewise_add_act_ops: bool = False
    fuse_bn_act_ops: bool = False
    fuse_relu_depthwise_conv: bool = False
    fuse_all_optimizer_ops: bool = False
    enable_auto_fusion: bool = False
    debug_graphviz_path: str = ""
    nccl_comm_num: int = 1  # one communicator per process
    use_hierarchical_allreduce: bool = False
    hierarchical_allreduce_inter_nranks: int = 0
    async_mode: bool = False
    mkldnn_enabled_op_types: set = field(default_factory=set)

    ReduceStrategy = ReduceStrategy
    GradientScaleStrategy = GradientScaleStrategy


@dataclass
class ExecutionStrategy(_Strict):
    """How a CompiledProgram runs (fluid.ExecutionStrategy); defaults are fluid 1.8's.

    >>> es = ExecutionStrategy()
    >>> es.num_iteration_per_drop_scope = 10
    """

    num_threads: int = 0  # a performance hint: spmd runs one thread per place
    use_cuda: bool = True  # the place decides
    allow_op_delay: bool = False  # ops run in program order either way
    num_iteration_per_drop_scope: int = 100  # temporaries are dropped after every step anyway
    num_iteration_per_run: int = 1  # fluid 1.8's default executor runs one step: so does spmd
    use_thread_barrier: bool = False  # the places meet in their collectives either way
    use_experimental_executor: bool = True  # one executor here: the compiled plan
    _dry_run: bool = False  # run the schedule without kernels: nothing changes, fetches are None


# Fields whose non-default values spmd does not honour: each warns once, by name.
_UNACTED = {
    "BuildStrategy": {
        "fuse_elewise_add_act_ops": "the add and the activation run as two kernels (same numbers)",
        "fuse_bn_act_ops": "batch_norm and the activation run as two kernels (same numbers)",
        "fuse_relu_depthwise_conv": "relu and depthwise_conv2d run as two kernels",
        "fuse_all_optimizer_ops": "each parameter keeps its own optimizer op (same numbers)",
        "enable_auto_fusion": "no kernel fusion is done",
        "nccl_comm_num": "one communicator per process is used",
        "use_hierarchical_allreduce": "one flat allreduce is used",
        "hierarchical_allreduce_inter_nranks": "one flat allreduce is used",
        "async_mode": "gradients are always aggregated synchronously",
        "mkldnn_enabled_op_types": "there are no MKL-DNN kernels",
    },
    # performance and memory knobs of fluid's executors: none changes the numbers
    "ExecutionStrategy": {
        "num_threads": "each place runs on one thread of its own",
        "use_cuda": "the executor's place decides where ops run",
        "allow_op_delay": "ops run in program order",
        "use_thread_barrier": "the places meet in their collectives",
        "use_experimental_executor": "spmd has one executor, the compiled plan",
        "num_iteration_per_drop_scope": "temporaries are freed after every step",
        # fluid 1.8.5's default executor also runs each exe.run once (measured), and its other
        # executor fails on a second iteration of the same feed
        "num_iteration_per_run": "each exe.run runs one step, as fluid 1.8's executor does",
    },
}
_warned: set[str] = set()


def forget_warnings() -> None:
    """Let every field warn again (a notebook re-running a cell, a test checking the warning).

    >>> forget_warnings()
    """
    _warned.clear()


def warn_unacted(strategy) -> list[str]:
    """Warn once per field (per process) for each field of `strategy` that was changed from
    its default but that spmd does not act on; return the names warned about now.

    >>> warn_unacted(BuildStrategy())
    []
    """
    # a subclass (fleet's DistributedStrategy) has its base class's fields
    kind = next((c.__name__ for c in type(strategy).__mro__ if c.__name__ in _UNACTED),
                type(strategy).__name__)
    table = _UNACTED.get(kind, {})
    defaults = {f.name: (f.default if f.default_factory is MISSING else f.default_factory())
                for f in fields(strategy)}
    warned = []
    for name, why in table.items():
        key = f"{kind}.{name}"
        value = getattr(strategy, name)
        if key in _warned or value == defaults[name]:
            continue
        _warned.add(key)
        warned.append(name)
        warnings.warn(f"{key}={value!r} is accepted but not acted on by spmd: {why}",
                      stacklevel=3)
    return warned
