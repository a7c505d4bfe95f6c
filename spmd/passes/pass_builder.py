"""BuildStrategy._finalize_strategy_and_create_passes(): fluid 1.8's PassBuilder, the list of
graph passes a data-parallel compile applies, named as fluid names them.

The list follows fluid 1.8.5's ParallelExecutorPassBuilder for the strategy's fields (checked
against fluid 1.8.5 for each field that adds or removes a pass). spmd's rewrite is its own
(passes/registry.py), so the names are fluid's description of it; what the list changes in
spmd is what a program can ask of it: a `graph_viz_pass` given a `graph_viz_path` (appended or
inserted by the user, or there from debug_graphviz_path) writes the compiled program as a DOT
graph to that path (passes/graphviz.py).

>>> from spmd.passes.strategy import BuildStrategy
>>> builder = finalize_strategy(BuildStrategy())
>>> builder.all_passes()[0].type()
'coalesce_grad_tensor_pass'
"""
from __future__ import annotations

from ..errors import InvalidArgumentError, SpmdError

__all__ = ["FluidPass", "PassBuilder", "finalize_strategy", "graphviz_paths"]

GRAPH_VIZ = "graph_viz_pass"


class FluidPass:
    """One entry of a PassBuilder: its fluid name (`type()`) and attributes (`set`, `has`)."""

    def __init__(self, name: str):
        self._name = name
        self._attrs: dict[str, object] = {}

    def type(self) -> str:
        return self._name

    def has(self, key: str) -> bool:
        return key in self._attrs

    def set(self, key: str, value) -> None:
        """Set attribute `key` once; setting it again is an error, as fluid's Pass::Set."""
        if key in self._attrs:
            raise SpmdError(f"pass '{self._name}' already has the attribute '{key}' "
                            f"(= {self._attrs[key]!r}); an attribute is set once")
        self._attrs[key] = value

    def get(self, key: str):
        return self._attrs.get(key)

    def __repr__(self) -> str:
        return f"FluidPass({self._name!r})"


class PassBuilder:
    """The passes of a finalized BuildStrategy, in order (fluid.core.PassBuilder)."""

    def __init__(self, passes: list[FluidPass]):
        self._passes = list(passes)

    def all_passes(self) -> list[FluidPass]:
        return list(self._passes)

    def append_pass(self, name: str) -> FluidPass:
        p = FluidPass(_checked_name(name))
        self._passes.append(p)
        return p

    def insert_pass(self, index: int, name: str) -> FluidPass:
        if not 0 <= index <= len(self._passes):
            raise InvalidArgumentError(
                f"PassBuilder.insert_pass: index {index} is outside 0..{len(self._passes)}")
        p = FluidPass(_checked_name(name))
        self._passes.insert(index, p)
        return p

    def remove_pass(self, index: int) -> None:
        if not 0 <= index < len(self._passes):
            raise InvalidArgumentError(
                f"PassBuilder.remove_pass: index {index} is outside 0..{len(self._passes) - 1}")
        del self._passes[index]


def _checked_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"a pass name must be a non-empty str, got {name!r}")
    return name


def _names(strategy) -> list[str]:
    """fluid 1.8.5's pass names for `strategy`, in its order."""
    all_reduce = int(strategy.reduce_strategy) == 0
    viz = bool(strategy.debug_graphviz_path)
    on = [
        (viz, GRAPH_VIZ),  # the original graph
        (strategy.enable_sequential_execution, "sequential_execution_pass"),
        (strategy.sync_batch_norm, "sync_batch_norm_pass"),
        (strategy.fuse_relu_depthwise_conv, "fuse_relu_depthwise_conv_pass"),
        (strategy.fuse_bn_act_ops, "fuse_bn_act_pass"),
        (strategy.fuse_elewise_add_act_ops, "fuse_elewise_add_act_pass"),
        (all_reduce and strategy.fuse_all_reduce_ops, "coalesce_grad_tensor_pass"),
        (all_reduce and strategy.fuse_all_optimizer_ops, "fuse_adam_op_pass"),
        (all_reduce and strategy.fuse_all_optimizer_ops, "fuse_sgd_op_pass"),
        (all_reduce and strategy.fuse_all_optimizer_ops, "fuse_momentum_op_pass"),
        (viz, GRAPH_VIZ),  # the fused graph
        (True, "add_reader_dependency_pass"),
        (True, "all_reduce_mode_multi_devices_pass" if all_reduce
         else "reduce_mode_multi_devices_pass"),
        (all_reduce and strategy.fuse_all_reduce_ops, "fuse_all_reduce_op_pass"),
        (viz, "multi_devices_print_pass"),
        (all_reduce, "all_reduce_deps_pass"),
        (True, "modify_op_lock_and_record_event_pass"),
        (True, "multi_devices_check_pass"),
    ]
    return [name for wanted, name in on if wanted]


def finalize_strategy(strategy) -> PassBuilder:
    """The strategy's PassBuilder, made on the first call and kept with the strategy (the
    compile reads it): fluid's BuildStrategy._finalize_strategy_and_create_passes."""
    builder = getattr(strategy, "_pass_builder", None)
    if builder is None:
        passes = [FluidPass(name) for name in _names(strategy)]
        for p in passes:
            if p.type() == GRAPH_VIZ:
                p.set("graph_viz_path", strategy.debug_graphviz_path)
        builder = PassBuilder(passes)
        strategy._pass_builder = builder  # not a field: kept beside them (BuildStrategy._kept)
    return builder


def graphviz_paths(strategy) -> list[str]:
    """The paths the finalized strategy's graph_viz_passes write to, besides
    debug_graphviz_path (which the graphviz pass writes itself)."""
    builder = getattr(strategy, "_pass_builder", None)
    if builder is None:
        return []
    paths = [p.get("graph_viz_path") for p in builder.all_passes() if p.type() == GRAPH_VIZ]
    return [path for path in dict.fromkeys(paths)
            if path and path != strategy.debug_graphviz_path]
