"""Seed loss@GRAD by BuildStrategy.gradient_scale_strategy (fluid 1.8's semantics):
CoeffNumDevice 1/num_devices (the gradient allreduce then averages), One 1, Customized: the
user feeds loss@GRAD."""
from __future__ import annotations

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .registry import register_pass
from .strategy import GradientScaleStrategy


# every value of the field seeds differently, so it runs for each training compile; first, as
# the seed is part of the backward pass that the later passes rewrite around
@register_pass("scale_loss_grad", order=10, fields=("gradient_scale_strategy",),
               when=lambda ctx: ctx.training)
def scale_loss_grad_pass(ctx) -> None:
    """Seed ctx.loss_name's gradient as ctx.strategy.gradient_scale_strategy says."""
    scale_loss_grad(ctx.program, ctx.loss_name, ctx.strategy.gradient_scale_strategy,
                    ctx.num_devices)


def scale_loss_grad(program, loss_name: str, strategy: GradientScaleStrategy,
                    num_devices: int):
    """Rewrite `program` in place: its loss@GRAD seed is 1/num_devices, 1, or removed (fed)."""
    block = program.global_block()
    grad = program.grad_var_map.get(loss_name)
    if grad is None:
        raise InvalidArgumentError(
            f"loss_name '{loss_name}' has no gradient in this program: pass the loss that "
            f"optimizer.minimize() was called with")
    seeds = [i for i, op in enumerate(block.ops)
             if op.role is OpRole.LOSS and grad in op.output_arg_names]
    if not seeds:
        raise InvalidArgumentError(f"no op seeds '{grad}': was minimize() called on the loss?")
    (index,) = seeds
    if strategy == GradientScaleStrategy.CoeffNumDevice:
        block.ops[index].attrs["value"] = 1.0 / num_devices
    elif strategy == GradientScaleStrategy.Customized:
        del block.ops[index]
        block.vars[grad].is_data = True  # fed by the user, per place
    program._bump()
