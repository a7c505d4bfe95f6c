"""BuildStrategy.sync_batch_norm: every training batch_norm (and its gradient) becomes
sync_batch_norm, whose statistics cover the global batch across places and ranks; test-mode
and use_global_stats batch norms are left as they are (they read no batch statistics)."""
from __future__ import annotations

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
