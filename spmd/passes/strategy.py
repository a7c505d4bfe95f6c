"""BuildStrategy and ExecutionStrategy: every field fluid 1.8 has, with its 1.8 default.

Every field has one decision (`field_decisions`): it acts, because a registered pass serves it
(the pass says so where it registers, registry.py), because it is checked against the job, or
because what it asks is what spmd always does; or it is accepted so fluid scripts run unchanged,
and a value spmd does not honour warns once, naming the field and why (`warn_unacted`).
"""
from __future__ import annotations

import enum
import warnings

from ..errors import InvalidArgumentError
from ..record import FrozenRecord, Record


class ReduceStrategy(enum.IntEnum):
    """How gradients are aggregated across places: AllReduce, or Reduce to an owner + Broadcast."""

    AllReduce = 0
    Reduce = 1


class GradientScaleStrategy(enum.IntEnum):
    """How loss@GRAD is seeded: 1/num_devices (CoeffNumDevice), 1 (One), or fed (Customized)."""

    CoeffNumDevice = 0
    One = 1
    Customized = 2


_FIELD_NAMES: dict[type, frozenset] = {}


def _field_names(cls) -> frozenset:
    """The names an instance may set, as a set made once per class: its `_fields`, and what
    it keeps beside them (`_kept`: copy sets those too)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset((*cls._fields, *cls._kept))
    return names


class _Strict(Record):
    """Setting a field that does not exist is an error naming the fields (fluid's C++ binding
    raises too), so a typo never passes silently."""

    __slots__ = ()
    _kept: tuple = ()

    def __setattr__(self, name, value):
        if isinstance(getattr(type(self), name, None), property):  # a public name of a field
            return object.__setattr__(self, name, value)
        if name not in _field_names(type(self)):
            import difflib

            close = difflib.get_close_matches(name, sorted(_field_names(type(self))), n=3)
            raise InvalidArgumentError(
                f"{type(self).__name__} has no field '{name}'"
                + (f"; did you mean {close}?" if close else "")
            )
        object.__setattr__(self, name, value)


class BuildStrategy(_Strict):
    """How CompiledProgram rewrites a program (fluid.BuildStrategy); defaults are fluid 1.8's.
    Equal by its fields; `trainers_endpoints` and `mkldnn_enabled_op_types` default to a new
    list and set.

    >>> bs = BuildStrategy()
    >>> bs.reduce_strategy = BuildStrategy.ReduceStrategy.Reduce
    """

    _fields = (
        "reduce_strategy", "gradient_scale_strategy", "fuse_all_reduce_ops",
        "fuse_broadcast_ops", "memory_optimize", "enable_inplace", "sync_batch_norm",
        "enable_sequential_execution", "num_trainers", "trainer_id", "trainers_endpoints",
        "enable_backward_optimizer_op_deps", "remove_unnecessary_lock", "cache_runtime_context",
        "is_distribution", "fuse_elewise_add_act_ops", "fuse_bn_act_ops",
        "fuse_relu_depthwise_conv", "fuse_all_optimizer_ops", "enable_auto_fusion",
        "debug_graphviz_path", "nccl_comm_num", "use_hierarchical_allreduce",
        "hierarchical_allreduce_inter_nranks", "async_mode", "mkldnn_enabled_op_types")
    # and, not a field, the PassBuilder _finalize_strategy_and_create_passes made
    # (passes/pass_builder.py), kept with the strategy as fluid keeps it
    _kept = ("_pass_builder",)
    __slots__ = (*_fields, *_kept)

    ReduceStrategy = ReduceStrategy
    GradientScaleStrategy = GradientScaleStrategy

    def __init__(self, reduce_strategy: ReduceStrategy = ReduceStrategy.AllReduce,
                 gradient_scale_strategy: GradientScaleStrategy = (
                     GradientScaleStrategy.CoeffNumDevice),
                 fuse_all_reduce_ops: bool = True, fuse_broadcast_ops: bool = True,
                 memory_optimize: bool | None = None, enable_inplace: bool = True,
                 sync_batch_norm: bool = False, enable_sequential_execution: bool = False,
                 num_trainers: int = 1, trainer_id: int = 0, trainers_endpoints: list | None = None,
                 enable_backward_optimizer_op_deps: bool = True,
                 remove_unnecessary_lock: bool = True, cache_runtime_context: bool = False,
                 is_distribution: bool = False, fuse_elewise_add_act_ops: bool = False,
                 fuse_bn_act_ops: bool = False, fuse_relu_depthwise_conv: bool = False,
                 fuse_all_optimizer_ops: bool = False, enable_auto_fusion: bool = False,
                 debug_graphviz_path: str = "", nccl_comm_num: int = 1,
                 use_hierarchical_allreduce: bool = False,
                 hierarchical_allreduce_inter_nranks: int = 0, async_mode: bool = False,
                 mkldnn_enabled_op_types: set | None = None):
        # fields are set past _Strict's check: these are the fields
        set_ = object.__setattr__
        set_(self, "reduce_strategy", reduce_strategy)
        set_(self, "gradient_scale_strategy", gradient_scale_strategy)
        # pack gradients into buckets, one collective per bucket
        set_(self, "fuse_all_reduce_ops", fuse_all_reduce_ops)
        set_(self, "fuse_broadcast_ops", fuse_broadcast_ops)  # Reduce mode: a gather a bucket
        set_(self, "memory_optimize", memory_optimize)
        set_(self, "enable_inplace", enable_inplace)
        set_(self, "sync_batch_norm", sync_batch_norm)  # batch_norm statistics over all places
        set_(self, "enable_sequential_execution", enable_sequential_execution)
        set_(self, "num_trainers", num_trainers)  # checked against the number of processes
        set_(self, "trainer_id", trainer_id)  # checked against this process's rank
        set_(self, "trainers_endpoints", [] if trainers_endpoints is None else trainers_endpoints)
        set_(self, "enable_backward_optimizer_op_deps", enable_backward_optimizer_op_deps)
        set_(self, "remove_unnecessary_lock", remove_unnecessary_lock)
        set_(self, "cache_runtime_context", cache_runtime_context)
        set_(self, "is_distribution", is_distribution)
        # elementwise_add + activation as one op; batch_norm + relu as one op
        set_(self, "fuse_elewise_add_act_ops", fuse_elewise_add_act_ops)
        set_(self, "fuse_bn_act_ops", fuse_bn_act_ops)
        set_(self, "fuse_relu_depthwise_conv", fuse_relu_depthwise_conv)
        # one sgd/momentum/adam update over many parameters
        set_(self, "fuse_all_optimizer_ops", fuse_all_optimizer_ops)
        set_(self, "enable_auto_fusion", enable_auto_fusion)
        # the compiled program written there as a DOT graph
        set_(self, "debug_graphviz_path", debug_graphviz_path)
        set_(self, "nccl_comm_num", nccl_comm_num)
        set_(self, "use_hierarchical_allreduce", use_hierarchical_allreduce)
        set_(self, "hierarchical_allreduce_inter_nranks", hierarchical_allreduce_inter_nranks)
        set_(self, "async_mode", async_mode)
        set_(self, "mkldnn_enabled_op_types",
             set() if mkldnn_enabled_op_types is None else mkldnn_enabled_op_types)

    def _finalize_strategy_and_create_passes(self):
        """fluid's PassBuilder of this strategy (passes/pass_builder.py), kept with it: a
        graph_viz_pass appended there with a graph_viz_path writes the compiled program."""
        from .pass_builder import finalize_strategy

        return finalize_strategy(self)


class ExecutionStrategy(_Strict):
    """How a CompiledProgram runs (fluid.ExecutionStrategy); defaults are fluid 1.8's. Equal
    by its fields.

    >>> es = ExecutionStrategy()
    >>> es.num_iteration_per_drop_scope = 10
    """

    __slots__ = ("num_threads", "use_cuda", "allow_op_delay", "num_iteration_per_drop_scope",
                 "num_iteration_per_run", "use_thread_barrier", "use_experimental_executor",
                 "_dry_run")
    _fields = __slots__

    def __init__(self, num_threads: int = 0, use_cuda: bool = True, allow_op_delay: bool = False,
                 num_iteration_per_drop_scope: int = 100, num_iteration_per_run: int = 1,
                 use_thread_barrier: bool = False, use_experimental_executor: bool = True,
                 _dry_run: bool = False):
        set_ = object.__setattr__  # past _Strict's check: these are the fields
        set_(self, "num_threads", num_threads)
        set_(self, "use_cuda", use_cuda)
        set_(self, "allow_op_delay", allow_op_delay)
        set_(self, "num_iteration_per_drop_scope", num_iteration_per_drop_scope)
        set_(self, "num_iteration_per_run", num_iteration_per_run)
        set_(self, "use_thread_barrier", use_thread_barrier)
        set_(self, "use_experimental_executor", use_experimental_executor)
        # run the schedule without kernels: nothing changes, fetches are None
        set_(self, "_dry_run", _dry_run)

    @property
    def dry_run(self) -> bool:
        """fluid's `_dry_run` under a public name: run the schedule without kernels."""
        return self._dry_run

    @dry_run.setter
    def dry_run(self, value: bool) -> None:
        self._dry_run = value


class Unacted(FrozenRecord, frozen=True):
    """A field spmd accepts without acting on: `why` says what spmd does instead. A value
    other than the default warns, unless it is in `honoured` (what spmd does anyway)."""

    __slots__ = ("why", "honoured")
    _fields = __slots__

    def __init__(self, why: str, honoured: tuple = ()):
        object.__setattr__(self, "why", why)  # frozen: see spmd/record.py
        object.__setattr__(self, "honoured", honoured)


# Fields spmd acts on without a pass (a pass names the fields it serves where it registers):
# checked against the job (executor/parallel.py, check_endpoints), done by the executor, or
# every value asks for what spmd always does.
_ACTED = {
    "BuildStrategy": {
        "num_trainers": "checked against the number of MPI processes",
        "trainer_id": "checked against this process's MPI rank",
        "trainers_endpoints": "checked: one endpoint per trainer, trainer_id among them (the "
                              "processes connect through MPI, not at these addresses)",
        "enable_inplace": "True (the default): the compiled plan lets an update write its "
                          "new values over its input's buffer (Param for ParamOut) where "
                          "nothing else holds it (executor/inplace.py); False: never; same "
                          "numbers either way",
        "use_hierarchical_allreduce": "the cross-process allreduce reduces within each node, "
                                      "allreduces across the node leaders and broadcasts "
                                      "within the node (spmd/comm/hierarchy.py; MPI host "
                                      "arrays; refused on GPU where the layout is "
                                      "hierarchical)",
        "enable_sequential_execution": "True: ops run in program order, one thread a place, "
                                       "whatever ExecutionStrategy.num_threads says (fluid's "
                                       "sequential_execution_pass); False: num_threads > 1 "
                                       "runs independent ops at once (bitwise the same "
                                       "numbers)",
        "hierarchical_allreduce_inter_nranks": "processes per node for the hierarchical "
                                               "allreduce, checked against the job (> 1, "
                                               "dividing the processes); 0: SPMD_NODE_SIZE, "
                                               "else MPI's shared-memory nodes",
    },
    "ExecutionStrategy": {
        "_dry_run": "the executor runs the schedule without kernels: nothing changes, "
                    "fetches are None",
        "num_threads": "the threads running the ops of this process's places, as fluid's "
                       "one pool: each place gets num_threads // places, at least its own; "
                       "with more, a host place runs its independent ops at once "
                       "(executor/ssa.py: a dependency graph over the variables they read "
                       "and write; collectives, random, control-flow and host ops keep their "
                       "program order), bitwise the numbers of one thread; 0 (fluid's "
                       "default, 'decide') and 1: one op at a time per place, in program "
                       "order; GPU places always run one at a time",
    },
}

# Fields whose values (other than the default and `honoured`) spmd does not act on: each warns
# once per process, by name. None of them changes the numbers a program computes.
_UNACTED = {
    "BuildStrategy": {
        "enable_backward_optimizer_op_deps": Unacted(
            "optimizer ops run after the whole backward pass, in program order, either way"),
        "remove_unnecessary_lock": Unacted("spmd's ops take no locks: each place runs on a "
                                           "thread of its own"),
        # fluid's compiler overwrites it from the program (parameter-server mode) anyway
        "is_distribution": Unacted("fluid's compiler sets it from the program itself; spmd "
                                   "trains with collectives, which MPI connects"),
        "fuse_relu_depthwise_conv": Unacted("relu and depthwise_conv2d run as two kernels"),
        "enable_auto_fusion": Unacted("no automatic fusion: only the fusions asked for by "
                                      "name (fuse_elewise_add_act_ops, fuse_bn_act_ops)"),
        # fluid 1.8: True caches each op's RuntimeContext (a speed knob); spmd's compiled plan
        # binds every op once and reuses it every run, whatever the value
        "cache_runtime_context": Unacted("the compiled plan binds every op once and reuses "
                                         "it every run, whatever this says"),
        "nccl_comm_num": Unacted("one communicator per process is used"),
        "async_mode": Unacted("gradients are always aggregated synchronously"),
        "mkldnn_enabled_op_types": Unacted("there are no MKL-DNN kernels"),
    },
    # performance and memory knobs of fluid's executors: none changes the numbers
    "ExecutionStrategy": {
        "use_cuda": Unacted("the executor's place decides where ops run"),
        "allow_op_delay": Unacted("ops run in program order"),
        "use_thread_barrier": Unacted("the places meet in their collectives"),
        "use_experimental_executor": Unacted("spmd has one executor, the compiled plan"),
        "num_iteration_per_drop_scope": Unacted("temporaries are freed after every step"),
        # fluid 1.8.5's default executor also runs each exe.run once (measured), and its other
        # executor fails on a second iteration of the same feed
        "num_iteration_per_run": Unacted("each exe.run runs one step, as fluid 1.8's "
                                         "executor does"),
    },
}
_warned: set[str] = set()


def _kind(strategy) -> str:
    """'BuildStrategy' or 'ExecutionStrategy' for an instance or class, subclasses included
    (fleet's DistributedStrategy has its base class's fields)."""
    cls = strategy if isinstance(strategy, type) else type(strategy)
    return next((c.__name__ for c in cls.__mro__ if c.__name__ in _UNACTED), cls.__name__)


def field_defaults(strategy) -> dict[str, object]:
    """Field name -> default, in their order, of a BuildStrategy or ExecutionStrategy (class
    or instance; subclasses: their base's fields); a new list or set for the mutable ones.

    >>> field_defaults(ExecutionStrategy)["num_iteration_per_drop_scope"]
    100
    """
    fresh = BuildStrategy() if _kind(strategy) == "BuildStrategy" else ExecutionStrategy()
    return {name: getattr(fresh, name) for name in fresh._fields}


def field_decisions(strategy) -> dict[str, str]:
    """Field name -> what spmd does with it, for a BuildStrategy or ExecutionStrategy (class
    or instance): 'acts: ...' (with the passes that serve it) or 'warns: ...'.

    >>> field_decisions(ExecutionStrategy)["use_cuda"]
    "warns: the executor's place decides where ops run"
    """
    from .registry import PASSES  # loads every pass module, which import this one

    kind = _kind(strategy)
    served = PASSES.fields_served() if kind == "BuildStrategy" else {}
    names = set((BuildStrategy if kind == "BuildStrategy" else ExecutionStrategy)._fields)
    unknown = sorted(set(served) - names)
    if unknown:
        raise InvalidArgumentError(f"passes serve {unknown}, which are not {kind} fields")
    decisions: dict[str, str] = {}
    for table in ({n: f"acts: passes {p}" for n, p in served.items()},
                  {n: f"acts: {why}" for n, why in _ACTED.get(kind, {}).items()},
                  {n: f"warns: {u.why}" for n, u in _UNACTED.get(kind, {}).items()}):
        twice = sorted(set(table) & set(decisions))
        if twice:  # one decision per field: a pass serving a field it warns about is a bug
            raise InvalidArgumentError(f"{kind} fields {twice} have two decisions")
        decisions.update(table)
    return decisions


def check_endpoints(strategy: BuildStrategy) -> None:
    """trainers_endpoints, when given, lists one endpoint per trainer and trainer_id is one of
    them (as fluid 1.8 checks); num_trainers itself is checked against the MPI world.

    >>> check_endpoints(BuildStrategy())
    """
    endpoints, n, rank = strategy.trainers_endpoints, strategy.num_trainers, strategy.trainer_id
    if not endpoints:
        return
    if n > 1 and len(endpoints) != n:
        raise InvalidArgumentError(
            f"BuildStrategy.trainers_endpoints lists {len(endpoints)} endpoint(s) {endpoints} "
            f"but num_trainers={n}; give one endpoint per trainer")
    if not 0 <= rank < len(endpoints):
        raise InvalidArgumentError(
            f"BuildStrategy.trainer_id={rank} is not an index of trainers_endpoints "
            f"{endpoints}; pass trainer_id=<MPI rank>")


def forget_warnings() -> None:
    """Let every field warn again (a notebook re-running a cell, a test checking the warning).

    >>> forget_warnings()
    """
    _warned.clear()


def warn_unacted(strategy) -> list[str]:
    """Warn once per field (per process) for each field of `strategy` whose value spmd does
    not act on (see field_decisions); return the names warned about now.

    >>> warn_unacted(BuildStrategy())
    []
    """
    kind = _kind(strategy)
    defaults = field_defaults(strategy)
    warned = []
    for name, unacted in _UNACTED.get(kind, {}).items():
        key = f"{kind}.{name}"
        value = getattr(strategy, name)
        if key in _warned or value == defaults[name] or value in unacted.honoured:
            continue
        _warned.add(key)
        warned.append(name)
        warnings.warn(f"{key}={value!r} is accepted but not acted on by spmd: {unacted.why}",
                      stacklevel=3)
    return warned

