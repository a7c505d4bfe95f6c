"""Role makers of fleet: who this process is and who its peers are.

Collective mode (`PaddleCloudRoleMaker(is_collective=True)`, UserDefinedCollectiveRoleMaker):
every process is a worker. PaddleCloudRoleMaker reads fluid's PADDLE_* contract
(PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT);
under a plain `mpirun -n 4 python train.py` with none set, the MPI rank and size stand in
(spmd's topology cross-checks the two when both are there).

Parameter-server mode (`PaddleCloudRoleMaker()`, UserDefinedRoleMaker): a process is a
server or a worker. PaddleCloudRoleMaker reads the roles that paddle-launch --server_num
writes (spmd.ps.role.read_ps_role: TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST,
PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID, POD_IP with PADDLE_PORT).
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..comm.topology import detect
from ..errors import InvalidArgumentError, PreconditionError

__all__ = ["Role", "RoleMakerBase", "PaddleCloudRoleMaker", "UserDefinedCollectiveRoleMaker",
           "UserDefinedRoleMaker"]

_BASE_PORT = 6170  # placeholder endpoints when none are given: spmd talks MPI, not sockets


class Role:
    """fluid's role ids."""

    WORKER = 1
    SERVER = 2


class RoleMakerBase:
    """A process's role; fleet.init(role) calls generate_role() once."""

    def __init__(self):
        self._worker_endpoints: list[str] = []
        self._server_endpoints: list[str] = []
        self._current_id = 0
        self._trainers_num = 1
        self._role = Role.WORKER
        self._role_is_generated = False

    def generate_role(self):
        """Work out the role (once); the queries below call it when needed."""
        self._role_is_generated = True

    def _generated(self):
        if not self._role_is_generated:
            self.generate_role()
        return self

    def is_worker(self) -> bool:
        """Whether this process trains (every process does in collective mode)."""
        return self._generated()._role == Role.WORKER

    def is_server(self) -> bool:
        """Whether this process is a parameter server (none is in collective mode)."""
        return self._generated()._role == Role.SERVER

    def is_first_worker(self) -> bool:
        """Whether this is worker 0 (the one that saves, by convention)."""
        return self.is_worker() and self._current_id == 0

    def worker_index(self) -> int:
        """This worker's id, 0 .. worker_num() - 1 (its rank)."""
        return self._generated()._current_id

    def worker_num(self) -> int:
        """How many workers the job has."""
        return self._generated()._trainers_num

    def server_index(self) -> int:
        """A server's index among the servers (as fluid: the current id on a worker)."""
        return self._generated()._current_id

    def get_trainer_endpoints(self) -> list[str]:
        """Every worker's 'ip:port', in id order."""
        return list(self._generated()._worker_endpoints)

    def get_pserver_endpoints(self) -> list[str]:
        """Parameter-server endpoints: none in collective mode."""
        return list(self._generated()._server_endpoints)

    def to_string(self) -> str:
        """A one-line description of the role."""
        return (f"role: {'server' if self.is_server() else 'worker'}, current_id: "
                f"{self._current_id}, worker_endpoints: {self.get_trainer_endpoints()}, "
                f"server_endpoints: {self.get_pserver_endpoints()}")

    def barrier_worker(self):
        """Wait for every worker (an MPI barrier in a multi-process job)."""
        if self.get_pserver_endpoints():
            _no_worker_collectives("barrier_worker")
            return
        if detect().size > 1:
            from ..comm.mpi import world

            world().Barrier()

    barrier_all = barrier_worker

    def all_reduce_worker(self, input, output, mode: str = "sum"):
        """Reduce the 1-D array (or list) `input` elementwise over every worker with `mode`
        ("sum", "min" or "max") and write the result into `output` (an array or list of the
        same length), on every worker: MPI Allreduce on numpy buffers. Every worker must call
        it with the same length and dtype.

        >>> import numpy as np
        >>> out = np.zeros(2)
        >>> UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"]).all_reduce_worker(
        ...     np.array([1.0, 2.0]), out)
        >>> out
        array([1., 2.])
        """
        if self._generated().get_pserver_endpoints():
            _no_worker_collectives("all_reduce_worker")
            output[:] = _one_dim(input, "input")
            return
        all_reduce_workers(self._generated().worker_num(), input, output, mode)


def _no_worker_collectives(what: str) -> None:
    """Parameter-server mode: the workers share no communicator (each talks only to the
    pservers), so, as in fluid 1.x, barrier_worker and all_reduce_worker act on this worker
    alone; said once."""
    if what not in _WARNED:
        _WARNED.add(what)
        warnings.warn(
            f"fleet {what} in parameter-server mode acts on this worker alone (as in fluid "
            f"1.x: the workers share no communicator); synchronize through the pservers or "
            f"a file", stacklevel=3)


_WARNED: set = set()


class PaddleCloudRoleMaker(RoleMakerBase):
    """fluid's role maker for jobs started by a launcher (paddle-launch, mpirun, srun).

    `is_collective=True`: every process a worker (PADDLE_* or the MPI world).
    `is_collective=False` (fluid's default): a parameter-server role from TRAINING_ROLE and
    the rest (spmd.ps.role.read_ps_role), as `paddle-launch --server_num N --worker_num M`
    sets them.

    >>> role = PaddleCloudRoleMaker(is_collective=True)
    >>> role.worker_num() >= 1
    True
    """

    def __init__(self, is_collective: bool = False, **kwargs):
        super().__init__()
        self._is_collective = is_collective
        self._kwargs = kwargs  # 2.x passes e.g. path=...; none changes a collective role

    def generate_role(self):
        """Read the role from PADDLE_* or MPI (checked against each other by spmd)."""
        if self._role_is_generated:
            return
        if not self._is_collective:
            self._generate_ps_role()
            return
        topology = detect()  # PADDLE_* when set, else the MPI world; checked against each other
        self._current_id = topology.rank
        self._trainers_num = topology.size
        self._worker_endpoints = list(topology.endpoints) or [
            f"127.0.0.1:{_BASE_PORT + i}" for i in range(topology.size)]
        self._current_endpoint = (topology.current_endpoint
                                  or self._worker_endpoints[topology.rank])
        self._role_is_generated = True

    def _generate_ps_role(self):
        from ..ps.role import PSERVER, read_ps_role

        try:
            ps = read_ps_role()
        except ValueError as e:
            raise InvalidArgumentError(f"PaddleCloudRoleMaker: {e}") from None
        if ps is None:
            raise InvalidArgumentError(
                "PaddleCloudRoleMaker(is_collective=False) makes parameter-server roles, but "
                "TRAINING_ROLE (PADDLE_TRAINING_ROLE) is not set: start the job with "
                "`paddle-launch --server_num N --worker_num M train.py` (or `mpiexec -n N+M "
                "paddle-launch --server_num N train.py`), or set TRAINING_ROLE, "
                "PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM and PADDLE_TRAINER_ID "
                "(POD_IP and PADDLE_PORT on a pserver); for collective data-parallel "
                "training pass is_collective=True")
        self._role = Role.SERVER if ps.role == PSERVER else Role.WORKER
        self._current_id = ps.index
        self._trainers_num = ps.trainers_num
        self._server_endpoints = list(ps.pserver_endpoints)
        trainers = os.environ.get("PADDLE_TRAINER_ENDPOINTS", "")
        self._worker_endpoints = [e for e in trainers.split(",") if e]
        self._role_is_generated = True


class UserDefinedCollectiveRoleMaker(RoleMakerBase):
    """Collective roles given by hand: this worker's id and every worker's endpoint.

    >>> role = UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"])
    >>> role.worker_num()
    1
    """

    def __init__(self, current_id: int = 0, worker_endpoints=None):
        super().__init__()
        if not isinstance(worker_endpoints, list):
            raise InvalidArgumentError(
                f"worker_endpoints must be a list of 'ip:port' strings, got "
                f"{type(worker_endpoints).__name__}")
        if not worker_endpoints:
            raise InvalidArgumentError("worker_endpoints must name at least one worker")
        if len(set(worker_endpoints)) != len(worker_endpoints):
            raise InvalidArgumentError(f"worker_endpoints has duplicates: {worker_endpoints}")
        if not all(isinstance(e, str) for e in worker_endpoints):
            raise InvalidArgumentError("every entry of worker_endpoints must be a string")
        if not isinstance(current_id, int) or isinstance(current_id, bool):
            raise InvalidArgumentError(
                f"current_id must be an int, got {type(current_id).__name__}")
        if not 0 <= current_id < len(worker_endpoints):
            raise InvalidArgumentError(
                f"current_id={current_id} must be in [0, {len(worker_endpoints) - 1}] "
                f"(one id per entry of worker_endpoints)")
        self._current_id = current_id
        self._worker_endpoints = list(worker_endpoints)
        self._trainers_num = len(worker_endpoints)
        self._role_is_generated = True


def _one_dim(values, who: str) -> np.ndarray:
    array = np.ascontiguousarray(np.asarray(values))
    if array.ndim != 1 or array.dtype.hasobject or array.dtype.kind not in "biuf":
        raise InvalidArgumentError(
            f"{detect().tag()} all_reduce_worker: {who} must be a 1-D array (or list) of "
            f"numbers, got shape {list(array.shape)} of {array.dtype}; flatten it with "
            f"np.ravel and reshape the result")
    return array


def all_reduce_workers(workers: int, input, output, mode: str = "sum") -> None:
    """RoleMakerBase.all_reduce_worker for a job of `workers` workers (see there)."""
    if mode not in ("sum", "min", "max"):
        raise InvalidArgumentError(
            f"all_reduce_worker: unknown mode {mode!r}; expected 'sum', 'min' or 'max'")
    result = _one_dim(input, "input").copy()
    if len(output) != len(result):
        raise InvalidArgumentError(
            f"{detect().tag()} all_reduce_worker: output has {len(output)} elements, input "
            f"{len(result)}; pass an output of the input's length")
    if isinstance(output, np.ndarray) and output.dtype != result.dtype:
        raise InvalidArgumentError(
            f"{detect().tag()} all_reduce_worker: output is {output.dtype}, input "
            f"{result.dtype}; pass arrays of one dtype")
    if workers > 1:
        _reduce_over_mpi(workers, result, mode)
    if isinstance(output, np.ndarray):
        output[...] = result
    else:  # a list, as fluid's role makers also take: Python numbers
        for i, value in enumerate(result.tolist()):
            output[i] = value


def _reduce_over_mpi(workers: int, result: np.ndarray, mode: str) -> None:
    from ..comm.mpi import MPICommunicator

    comm = MPICommunicator()
    tag = f"[rank {comm.rank}/{comm.size}]"
    if comm.size != workers:
        raise PreconditionError(
            f"{tag} all_reduce_worker: the role has {workers} workers but MPI connects "
            f"{comm.size} processes; start one process per worker endpoint (mpirun -n "
            f"{workers} or paddle-launch)")
    # lengths and dtypes first: a mismatch is named here instead of garbling the buffers
    shape = comm.allgather(np.array([result.size, ord(result.dtype.char)], np.int64))
    if (shape != shape[0]).any():
        seen = ", ".join(f"rank {r}: {n} x {np.dtype(chr(c)).name}"
                         for r, (n, c) in enumerate(shape.tolist()))
        raise InvalidArgumentError(
            f"{tag} all_reduce_worker: the workers passed different inputs ({seen}); every "
            f"worker must pass a 1-D array of one length and dtype")
    comm.allreduce(result, mode)


class UserDefinedRoleMaker(RoleMakerBase):
    """Parameter-server roles given by hand: this process's id within its role, whether it
    serves or trains, the number of workers and every server's endpoint (fluid's checks).

    >>> role = UserDefinedRoleMaker(0, Role.SERVER, 2, ["127.0.0.1:6170", "127.0.0.1:6171"])
    >>> role.is_server(), role.server_index(), role.worker_num()
    (True, 0, 2)
    """

    def __init__(self, current_id: int = 0, role: int = Role.WORKER, worker_num: int = 0,
                 server_endpoints=None):
        super().__init__()
        if not isinstance(server_endpoints, list):
            raise InvalidArgumentError(
                f"server_endpoints must be a list of 'ip:port' strings, got "
                f"{type(server_endpoints).__name__}")
        if not server_endpoints:
            raise InvalidArgumentError("server_endpoints must name at least one server")
        if not all(isinstance(e, str) for e in server_endpoints):
            raise InvalidArgumentError("every entry of server_endpoints must be a string")
        if len(set(server_endpoints)) != len(server_endpoints):
            raise InvalidArgumentError(f"server_endpoints has duplicates: {server_endpoints}")
        if role not in (Role.WORKER, Role.SERVER):
            raise InvalidArgumentError(
                f"role must be Role.WORKER ({Role.WORKER}) or Role.SERVER ({Role.SERVER}), "
                f"got {role!r}")
        for name, value in (("current_id", current_id), ("worker_num", worker_num)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidArgumentError(f"{name} must be an int, got {type(value).__name__}")
        if worker_num <= 0:
            raise InvalidArgumentError(f"worker_num must be at least 1, got {worker_num}")
        limit = len(server_endpoints) if role == Role.SERVER else worker_num
        if not 0 <= current_id < limit:
            what = "len(server_endpoints)" if role == Role.SERVER else "worker_num"
            raise InvalidArgumentError(
                f"current_id={current_id} must be in [0, {limit - 1}] ({what} = {limit})")
        self._server_endpoints = list(server_endpoints)
        self._role = role
        self._current_id = current_id
        self._trainers_num = worker_num
        self._role_is_generated = True
