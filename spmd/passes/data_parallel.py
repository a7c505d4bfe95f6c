"""The data-parallel rewrite: BuildStrategy picks and orders the passes; the result is one
program that every rank compiles identically (collectives in one fixed order)."""
from __future__ import annotations

from ..core.operator import OpRole
from ..core.program import Program
from ..errors import InvalidArgumentError
from .allreduce import insert_allreduce
from .common import check_waits, mark_inline_collectives, trained_params_grads
from .graphviz import write_graphviz
from .reduce_mode import ReduceLayout, apply_reduce_mode
from .scale_loss_grad import scale_loss_grad
from .strategy import BuildStrategy, ReduceStrategy
from .sync_batch_norm import apply_sync_batch_norm


def build_data_parallel(program: Program, strategy: BuildStrategy, num_devices: int,
                        loss_name: str | None, bucket_mb: float
                        ) -> tuple[Program, ReduceLayout | None]:
    """Return (data-parallel copy of `program`, where optimizer state lives (Reduce mode only)).

    `num_devices` counts every place of every process. A program without a loss (a test
    program) only runs forward on each place's shard: nothing to rewrite. With
    `strategy.debug_graphviz_path` set, the result is also written there as a DOT graph."""
    program, layout = _rewrite(program, strategy, num_devices, loss_name, bucket_mb)
    if getattr(strategy, "debug_graphviz_path", ""):
        write_graphviz(program, strategy.debug_graphviz_path)
    return program, layout


def _rewrite(program: Program, strategy: BuildStrategy, num_devices: int,
             loss_name: str | None, bucket_mb: float) -> tuple[Program, ReduceLayout | None]:
    program = program.clone()
    layout = None
    if loss_name is None:
        if trained_params_grads(program):
            raise InvalidArgumentError(
                "with_data_parallel: this program trains parameters but no loss_name was given; "
                "pass loss_name=loss.name (without it every place would train on its own)")
        return program, layout
    losses = [op for op in program.global_block().ops if op.role is OpRole.LOSS]
    if len(losses) > 1:
        raise InvalidArgumentError(
            f"with_data_parallel: the program has {len(losses)} backward passes (minimize() or "
            f"append_backward called {len(losses)} times); a data-parallel program takes one: "
            f"sum the losses and minimize the sum once")
    scale_loss_grad(program, loss_name, strategy.gradient_scale_strategy, num_devices)
    if num_devices > 1 and getattr(strategy, "sync_batch_norm", False):
        apply_sync_batch_norm(program)
    params_grads = trained_params_grads(program)
    if num_devices == 1 or not params_grads:
        return program, layout
    if strategy.reduce_strategy == ReduceStrategy.Reduce:
        layout = apply_reduce_mode(program, params_grads, num_devices,
                                   strategy.fuse_broadcast_ops, strategy.fuse_all_reduce_ops,
                                   bucket_mb)
    else:
        insert_allreduce(program, params_grads, strategy.fuse_all_reduce_ops, bucket_mb)
    mark_inline_collectives(program.global_block())
    check_waits(program.global_block())
    return program, layout
