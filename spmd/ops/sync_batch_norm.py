"""Op definition: sync_batch_norm, batch_norm whose batch statistics are taken over every place
of every rank (BuildStrategy.sync_batch_norm; see spmd/passes/sync_batch_norm.py).

Same slots and attributes as batch_norm. Its kernel and its gradient's kernel are collectives:
they sum per-channel statistics across the data-parallel world, so N ranks on 1/N of a batch
normalize, and differentiate, exactly as one process on the whole batch."""
from __future__ import annotations

from .nn import _batch_norm
from .registry import OP_DEFS, define_op

_BN = OP_DEFS["batch_norm"]

define_op("sync_batch_norm",
          inputs=[s.name + ("?" if s.optional else "") for s in _BN.inputs],
          outputs=[s.name + ("?" if s.optional else "") for s in _BN.outputs],
          attrs=dict(_BN.attrs), no_grad_inputs=_BN.no_grad_inputs,
          nondiff_outputs=_BN.nondiff_outputs, grad_uses=_BN.grad_uses,
          collective=True)(_batch_norm)
