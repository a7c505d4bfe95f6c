"""fluid.transpiler.memory_optimization_transpiler: memory_optimize and release_memory, which
fluid 1.6+ keeps only for compatibility (they do nothing; spmd's plan frees every value after
its last reader on every run, which is what they were for)."""
from __future__ import annotations

__all__ = ["memory_optimize", "release_memory"]


def memory_optimize(input_program, skip_opt_set=None, print_log=False, level=0,
                    skip_grads=False):
    """Accepted for fluid compatibility; does nothing, as in fluid 1.6+."""


def release_memory(input_program, skip_opt_set=None):
    """Accepted for fluid compatibility; see memory_optimize."""
