"""paddle.distributed (static graph): this process's rank and the world size, and fleet.

>>> import spmd as paddle
>>> paddle.distributed.get_rank(), paddle.distributed.get_world_size()
(0, 1)
"""
from __future__ import annotations

from . import fleet, fs_wrapper

__all__ = ["fleet", "fs_wrapper", "get_rank", "get_world_size"]


def get_rank() -> int:
    """This process's rank in the job (PADDLE_TRAINER_ID, else the MPI rank; 0 alone)."""
    from ..comm.topology import detect

    return detect().rank


def get_world_size() -> int:
    """The number of processes in the job (1 for a plain `python train.py`)."""
    from ..comm.topology import detect

    return detect().size
