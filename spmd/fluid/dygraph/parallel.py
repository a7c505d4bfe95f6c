"""fluid.dygraph.parallel: ParallelEnv reads the job's layout (harmless in static programs);
prepare_context and DataParallel are dygraph-only and raise, naming CompiledProgram.

>>> from spmd.fluid.dygraph.parallel import ParallelEnv
>>> ParallelEnv().nranks >= 1
True
"""
from __future__ import annotations

from ._static_only import refusing_class, static_only
from .layers import Layer

__all__ = ["prepare_context", "ParallelEnv", "DataParallel"]

_STATIC_DP = ("fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name), launched "
              "with mpirun / paddle-launch")


class ParallelEnv:
    """This process's place in the job: nranks, local_rank, dev_id, current_endpoint,
    trainer_endpoints (from the launcher's PADDLE_* variables, else MPI)."""

    def __init__(self):
        from ...comm.topology import detect

        t = detect()
        self.nranks, self.local_rank = t.size, t.rank
        self.trainer_endpoints = list(t.endpoints)
        self.current_endpoint = t.current_endpoint or ""
        self.dev_id = t.local_rank


Env = ParallelEnv


def prepare_context(strategy=None):
    """Refused: sets up dygraph data parallelism."""
    raise static_only("fluid.dygraph.prepare_context()", _STATIC_DP)


DataParallel = refusing_class("DataParallel", _STATIC_DP, Layer)
