"""fluid.DistributeTranspiler and DistributeTranspilerConfig.

nccl2 mode appends the communicator-init op to the startup program; the trainers then run
`ParallelExecutor(num_trainers=..., trainer_id=...)` (or CompiledProgram.with_data_parallel)
across processes. Endpoints are checked against the MPI world: their count must be the number
of processes, and `trainer_id` this process's rank.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from ..comm.topology import detect
from ..core.program import default_main_program, default_startup_program
from ..errors import InvalidArgumentError
from ..passes.comm_init import append_comm_init


@dataclass
class DistributeTranspilerConfig:
    """fluid's fields and defaults; `mode` is "pserver" (fluid's default) or "nccl2"."""

    slice_var_up: bool = True
    split_method: type | None = None
    min_block_size: int = 8192
    mode: str = "pserver"
    print_log: bool = False
    wait_port: bool = True
    sync_mode: bool = True
    runtime_split_send_recv: bool = False
    nccl_comm_num: int = 1
    use_hierarchical_allreduce: bool = False
    hierarchical_allreduce_inter_nranks: int = 0


class DistributeTranspiler:
    """>>> # config = fluid.DistributeTranspilerConfig(); config.mode = "nccl2"
    >>> # t = fluid.DistributeTranspiler(config=config)
    >>> # t.transpile(trainer_id, trainers="ip0:6170,ip1:6170", current_endpoint="ip1:6170")
    """

    def __init__(self, config: DistributeTranspilerConfig | None = None):
        self.config = config or DistributeTranspilerConfig()
        self._program = None

    def transpile(self, trainer_id, program=None, pservers="127.0.0.1:6174", trainers=1,
                  sync_mode=True, startup_program=None, current_endpoint="127.0.0.1:6174",
                  workers=None):
        """nccl2 mode: `trainers` is the comma-separated trainer endpoints (fluid's documented
        example names it `workers`; both are accepted)."""
        self._program = program or default_main_program()
        startup = startup_program or default_startup_program()
        if self.config.mode != "nccl2":
            raise InvalidArgumentError(
                f"DistributeTranspilerConfig.mode={self.config.mode!r}: spmd trains with "
                f"collectives (mode='nccl2'); parameter-server mode is not available in this "
                f"version")
        endpoints = _endpoints(workers if workers is not None else trainers)
        topology = detect()
        tag = topology.tag()
        if len(endpoints) != topology.size:
            raise InvalidArgumentError(
                f"{tag} transpile: {len(endpoints)} trainer endpoint(s) {endpoints} but the MPI "
                f"world has {topology.size} process(es); start one process per endpoint "
                f"(mpirun -n {len(endpoints)})")
        if trainer_id != topology.rank:
            raise InvalidArgumentError(
                f"{tag} transpile: trainer_id={trainer_id} but this process is MPI rank "
                f"{topology.rank}; pass trainer_id=<MPI rank> (PADDLE_TRAINER_ID)")
        if endpoints[trainer_id] != current_endpoint:
            raise InvalidArgumentError(
                f"{tag} transpile: current_endpoint={current_endpoint} but trainer "
                f"{trainer_id}'s endpoint is {endpoints[trainer_id]}")
        append_comm_init(startup, trainer_id, endpoints, current_endpoint)

    def get_trainer_program(self, wait_port=True):
        """nccl2 mode trains the main program as it is."""
        if self._program is None:
            raise InvalidArgumentError("call transpile() before get_trainer_program()")
        return self._program


def _endpoints(trainers) -> list[str]:
    if not isinstance(trainers, str) or not trainers.strip():
        raise InvalidArgumentError(
            f"nccl2 mode needs the trainer endpoints as 'ip:port,ip:port,...', got {trainers!r}")
    return [e.strip() for e in trainers.split(",") if e.strip()]


class RoundRobin:
    """Parameter-server placement: variables to endpoints in turn."""

    def __init__(self, pserver_endpoints):
        self.eps, self._next = list(pserver_endpoints), 0

    def dispatch(self, varlist):
        out = []
        for _ in varlist:
            out.append(self.eps[self._next])
            self._next = (self._next + 1) % len(self.eps)
        return out

    def reset(self):
        self._next = 0


class HashName:
    """Parameter-server placement: a variable's endpoint from a stable hash of its name."""

    def __init__(self, pserver_endpoints):
        self.eps = list(pserver_endpoints)

    def dispatch(self, varlist):
        return [self.eps[zlib.crc32(v.name.encode()) % len(self.eps)] for v in varlist]

    def reset(self):
        pass
