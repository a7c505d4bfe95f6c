"""Op definitions: `fused_sgd`, `fused_momentum`, `fused_adam`, one update of several
parameters of one optimizer kind (BuildStrategy.fuse_all_optimizer_ops, passes/fuse_optimizer.py).

Each takes the slots of sgd / momentum / adam, each per-parameter slot a list (the learning rate
and adam's beta tensors shared: fused.SHARED_SLOTS). fluid 1.8's fuse_*_op_pass reach the same
with coalesce_tensor and one plain op; here the kernel (spmd/kernels/optim_fused.py) lays the
members end to end itself.
"""
from __future__ import annotations

from .fused import FUSED_UPDATES, SHARED_SLOTS
from .optim_common import check_scalar
from .registry import OP_DEFS, define_op


def _define_fused_update(base: str, fused: str):
    bdef = OP_DEFS[base]

    def spec(slot):
        if slot.name in SHARED_SLOTS:
            return slot.name + ("?" if slot.optional else "")
        return slot.name + "*"

    per_member = [s.name for s in bdef.inputs if s.name not in SHARED_SLOTS]
    outputs = [s.name for s in bdef.outputs]

    def infer(ctx):
        params = ctx.inputs("Param")
        ctx.check(len(params) > 0, "needs at least one parameter in Param")
        for slot in per_member + outputs:
            count = len(ctx.inputs(slot)) if slot in per_member else ctx.num_outputs(slot)
            ctx.check(count == len(params),
                      f"{slot} lists {count} variables for {len(params)} parameters")
        for slot in SHARED_SLOTS:
            check_scalar(ctx, slot)
        for i, p in enumerate(params):
            g = ctx.inputs("Grad")[i]
            ctx.check(tuple(g.shape) == tuple(p.shape),
                      f"Grad {g.name}{list(g.shape)} must have the shape of Param "
                      f"{p.name}{list(p.shape)}")
        for slot in outputs:  # ParamOut from Param, Moment1Out from Moment1, ...
            source = slot[:-len("Out")]
            for i, v in enumerate(ctx.inputs(source)):
                ctx.set_output(slot, v.shape, v.dtype, index=i)

    define_op(fused, inputs=[spec(s) for s in bdef.inputs], outputs=[o + "*" for o in outputs],
              attrs=dict(bdef.attrs), grad=None)(infer)


for _base, _fused in FUSED_UPDATES.items():
    _define_fused_update(_base, _fused)
