"""nccl2 mode: the startup program gets the communicator-init op (c_comm_init). Run by every
trainer, it checks the endpoints against the MPI world and makes the communicator: NCCL on a
GPU (the unique id made on trainer 0 and broadcast over MPI; no ports are opened), MPI on CPU."""
from __future__ import annotations

from ..core.operator import OpRole


def append_comm_init(startup_program, trainer_id: int, endpoints: list[str],
                     current_endpoint: str):
    startup_program.global_block().append_op(
        "c_comm_init", attrs={"nranks": len(endpoints), "rank": trainer_id,
                              "endpoints": list(endpoints), "current_endpoint": current_endpoint},
        role=OpRole.COMMUNICATE)
