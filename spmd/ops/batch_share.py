"""Op definition: c_loss_grad_share, the loss gradient seed of a data-parallel step whose
batches may differ in size from place to place (LoD batches dealt out by sequences).

Out = rows(X) / (rows(X) summed over every place of every rank), shaped like the loss: with
X the input of the loss's `mean`, the gradient each place then backpropagates is that of the
mean over the global batch, so N ranks on uneven shares equal 1 process on the whole batch.
Equal shares give 1 / num_devices, as CoeffNumDevice does.

>>> # 2 ranks with 3 and 5 sequences: seeds 3/8 and 5/8
"""
from __future__ import annotations

from .registry import define_op


@define_op("c_loss_grad_share", inputs=["X"], outputs=["Out"],
           attrs={"shape": "ints", "dtype": "dtype"}, grad=None, collective=True)
def _c_loss_grad_share(ctx):
    ctx.set_output("Out", ctx.attr("shape"), ctx.attr("dtype"))
