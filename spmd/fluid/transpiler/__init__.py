"""fluid.transpiler: DistributeTranspiler (nccl2 mode), memory_optimize, release_memory."""
from ..ps.transpiler import (  # noqa: F401
    DistributeTranspiler,
    DistributeTranspilerConfig,
    HashName,
    RoundRobin,
)


def memory_optimize(input_program, skip_opt_set=None, print_log=False, level=0,
                    skip_grads=False):
    """Accepted for fluid compatibility, and does nothing, as in fluid 1.6+: spmd's plan frees
    every value right after its last reader on every run, which is what this pass was for."""


def release_memory(input_program, skip_opt_set=None):
    """Accepted for fluid compatibility; see memory_optimize."""
