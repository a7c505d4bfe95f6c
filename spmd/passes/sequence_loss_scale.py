"""Loss scaling for LoD batches: the loss gradient seed is this place's share of the global
batch instead of 1 / num_devices.

A LoD batch is dealt out by whole sequences, so places and ranks may hold different numbers
of them (5 sequences over 2 places: 2 and 3), and averaging per-place mean losses with equal
weights would then differ from the mean over the global batch. Weighting each place by its
rows of the mean's input gives exactly the one-process gradient, whether the loss averages
sequences (a pooled classifier, a CRF) or tokens (per-word tagging). Dense programs keep
fluid's CoeffNumDevice: their batches are split evenly, and this costs one small allreduce a
step.
"""
from __future__ import annotations

from ..core.operator import OpRole
from .registry import register_pass
from .strategy import GradientScaleStrategy


def _mean_input(block, loss_name: str) -> str | None:
    """The variable the loss averages (the input of the `mean` writing it), or None."""
    for op in block.ops:
        if op.type == "mean" and loss_name in op.output_arg_names:
            return op.input("X")[0]
    return None


def share_loss_grad(program, loss_name: str) -> bool:
    """Replace the loss gradient seed with c_loss_grad_share of the mean's input; False when
    the loss is not a `mean` (its seed stays 1 / num_devices)."""
    block = program.global_block()
    source = _mean_input(block, loss_name)
    grad = program.grad_var_map.get(loss_name)
    if source is None or grad is None:
        return False
    for i, op in enumerate(block.ops):
        if op.role is OpRole.LOSS and grad in op.output_arg_names and op.type == "fill_constant":
            seed = block.append_op(
                "c_loss_grad_share", {"X": [source]}, {"Out": [grad]},
                {"shape": list(op.attrs["shape"]), "dtype": op.attrs["dtype"]},
                role=OpRole.LOSS)
            block.ops.pop()
            block.ops[i] = seed
            program._bump()
            return True
    return False


# after scale_loss_grad (order 10) has seeded 1 / num_devices, which this replaces
@register_pass("sequence_loss_scale", order=11, fields=("gradient_scale_strategy",),
               when=lambda ctx: ctx.training and ctx.num_devices > 1
               and ctx.strategy.gradient_scale_strategy == GradientScaleStrategy.CoeffNumDevice
               and ctx.reads_lod_data())
def sequence_loss_scale_pass(ctx) -> None:
    """share_loss_grad on a LoD program trained on several devices."""
    share_loss_grad(ctx.program, ctx.loss_name)
