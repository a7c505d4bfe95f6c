"""BuildStrategy.sync_batch_norm: every training batch_norm (and its gradient) becomes
sync_batch_norm, whose statistics cover the global batch across places and ranks; test-mode
and use_global_stats batch norms are left as they are (they read no batch statistics)."""
from __future__ import annotations

from .registry import register_pass

_RENAMES = {"batch_norm": "sync_batch_norm", "batch_norm_grad": "sync_batch_norm_grad"}


def apply_sync_batch_norm(program) -> int:
    """Rewrite `program` in place; returns how many ops changed."""
    changed = 0
    for op in program.global_block().ops:
        new_type = _RENAMES.get(op.type)
        if new_type and not op.attrs.get("use_global_stats", False):
            op.type = new_type
            changed += 1
    if changed:
        program._bump()
    return changed


# on one device the plain batch_norm already sees the whole batch: nothing to synchronize
@register_pass("sync_batch_norm", order=20, fields=("sync_batch_norm",),
               when=lambda ctx: ctx.training and ctx.num_devices > 1
               and ctx.strategy.sync_batch_norm)
def sync_batch_norm_pass(ctx) -> None:
    """BuildStrategy.sync_batch_norm on several devices: apply_sync_batch_norm."""
    apply_sync_batch_norm(ctx.program)
