"""The data-parallel rewrite: the registered passes (registry.py) whose condition holds, in
their order, on a copy of the program; the result is one program that every rank compiles
identically (collectives in one fixed order)."""
from __future__ import annotations

from ..core.operator import OpRole
from ..core.program import Program
from ..errors import InvalidArgumentError, UnimplementedError
from .common import PassContext, trained_params_grads
from .registry import PASSES
from .state_sharding import StateSharding
from .strategy import BuildStrategy, check_endpoints


def build_data_parallel(program: Program, strategy: BuildStrategy, num_devices: int,
                        loss_name: str | None, bucket_mb: float
                        ) -> tuple[Program, StateSharding | None]:
    """Return (data-parallel copy of `program`, where optimizer state lives (Reduce mode only)).

    `num_devices` counts every place of every process. A program without a loss (a test
    program) only runs forward on each place's shard: nothing to rewrite. With
    `strategy.debug_graphviz_path` set, the result is also written there as a DOT graph.

    >>> from spmd.core import Program
    >>> copy, layout = build_data_parallel(Program(), BuildStrategy(), 2, None, 32.0)
    >>> layout is None
    True
    """
    check_endpoints(strategy)
    program = program.clone()
    if num_devices > 1:
        _refuse_optimizer_in_control_flow(program)
    _check_losses(program, loss_name)
    ctx = PassContext(program, strategy, num_devices, loss_name, bucket_mb)
    PASSES.run(ctx)
    return ctx.program, ctx.sharding


def build_one_place(program: Program, strategy: BuildStrategy) -> tuple[Program, list[str]]:
    """(a copy of `program` rewritten by the passes registered for one place, their names):
    a CompiledProgram(program, strategy) run without with_data_parallel. No loss is named
    there, so the program's own backward pass, if it has one, says what it trains; its seed
    stays as minimize() wrote it (fluid's one-place compile adds no loss scaling).

    >>> from spmd.core import Program
    >>> build_one_place(Program(), BuildStrategy(fuse_all_optimizer_ops=True))[1]
    []
    """
    program = program.clone()
    ctx = PassContext(program, strategy, 1, _loss_of(program))
    applied = PASSES.run(ctx, one_place=True)
    return ctx.program, applied


def _loss_of(program: Program) -> str | None:
    """The loss whose gradient the program's one backward pass seeds, or None."""
    block = program.global_block()
    seeded = {n for op in block.ops if op.role is OpRole.LOSS for n in op.output_arg_names}
    losses = [f for f, g in program.grad_var_map.items() if g in seeded]
    return losses[0] if len(losses) == 1 else None


def _refuse_optimizer_in_control_flow(program: Program):
    """fluid 1.8 refuses an optimizer inside a control-flow block on several places
    (NotImplementedError): which branch updates which parameter would differ per place."""
    for block in program.blocks[1:]:
        op = next((op for op in block.ops if op.role is OpRole.OPTIMIZE), None)
        if op is not None:
            raise UnimplementedError(
                f"with_data_parallel: op '{op.type}' of block {block.idx} updates a parameter "
                f"inside control flow; like fluid 1.8 (\"If optimizer is used in control flow, "
                f"training on multi-places is not supported now\"), a program whose optimizer "
                f"runs in a conditional or loop block trains on one place only: run it with "
                f"exe.run(program) on one place, or compute the branch's loss with "
                f"layers.cond / layers.case and call minimize() once, outside the branch")


def _check_losses(program: Program, loss_name: str | None):
    """A training program is compiled with its loss, and has one backward pass."""
    if loss_name is None:
        if trained_params_grads(program):
            raise InvalidArgumentError(
                "with_data_parallel: this program trains parameters but no loss_name was given; "
                "pass loss_name=loss.name (without it every place would train on its own)")
        return
    losses = [op for op in program.global_block().ops if op.role is OpRole.LOSS]
    if len(losses) > 1:
        raise InvalidArgumentError(
            f"with_data_parallel: the program has {len(losses)} backward passes (minimize() or "
            f"append_backward called {len(losses)} times); a data-parallel program takes one: "
            f"sum the losses and minimize the sum once")
