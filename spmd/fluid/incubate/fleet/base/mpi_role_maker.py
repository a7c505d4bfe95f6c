"""fluid 1.8's MPISymetricRoleMaker: the roles of an MPI job of pslib's symmetric layout, two
processes per node: even world ranks are parameter servers, odd ranks workers (index
rank // 2 in both), the servers' endpoints their hosts' IPs at one port every node derives
from the server count. Workers (and servers) get a communicator of their own, for
barrier_worker / all_reduce_worker and FleetUtil's global metrics.

Everything crosses the network as numpy buffers (mpi4py's Allgather / Allgatherv /
Allreduce), never pickled: all_gather sends JSON.

>>> # role = MPISymetricRoleMaker()   # under mpiexec -n 2k
>>> # role.generate_role(); role.is_worker(), role.worker_index(), role.worker_num()
"""
from __future__ import annotations

import json
import random
import socket

import numpy as np

from .....errors import InvalidArgumentError
from .....fleet.role_maker import Role, RoleMakerBase

__all__ = ["MPIRoleMaker", "MPISymetricRoleMaker"]

_OPS = ("sum", "max", "min")


def _mpi():
    """(mpi4py.MPI, the world communicator), through spmd's start-up of MPI."""
    from .....comm.mpi import world

    comm = world()  # first: spmd starts MPI (and its supervisor) in its own order
    from mpi4py import MPI

    return MPI, comm


def _gather_bytes(comm, payload: bytes) -> list[bytes]:
    """Every rank's `payload`, in rank order (sizes first, then one Allgatherv)."""
    sizes = np.zeros(comm.Get_size(), np.int64)
    comm.Allgather(np.array([len(payload)], np.int64), sizes)
    out = np.empty(int(sizes.sum()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    from mpi4py import MPI

    comm.Allgatherv(np.frombuffer(payload, np.uint8).copy(),
                    [out, sizes.tolist(), offsets.tolist(), MPI.BYTE])
    return [out[o:o + s].tobytes() for o, s in zip(offsets, sizes)]


class MPIRoleMaker(RoleMakerBase):
    """A role maker over the MPI world: its rank, size, barrier and gathers."""

    def __init__(self):
        super().__init__()
        self.MPI, self._comm = _mpi()
        self._node_type_comm = None
        self._ips = None
        self._ip = None

    def _get_rank(self) -> int:
        self._rank = self._comm.Get_rank()
        return self._rank

    def _get_size(self) -> int:
        self._size = self._comm.Get_size()
        return self._size

    def _all_gather(self, obj):
        """Every rank's `obj` (JSON-serializable), in rank order."""
        self._barrier_all()
        return [json.loads(b.decode()) for b in _gather_bytes(self._comm,
                                                               json.dumps(obj).encode())]

    def _worker_gather(self, obj):
        if self.is_worker():
            self._node_type_comm.Barrier()
            return [json.loads(b.decode())
                    for b in _gather_bytes(self._node_type_comm, json.dumps(obj).encode())]
        return None

    def _barrier_all(self):
        self._comm.Barrier()

    def _finalize(self):
        """Nothing: spmd's MPI world ends with the process."""

    def _get_ips(self):
        if not self._ips:
            self._ips = self._all_gather(self.get_local_ip())
        return self._ips

    def get_local_ip(self) -> str:
        self._ip = socket.gethostbyname(socket.gethostname())
        return self._ip

    def generate_role(self):
        raise InvalidArgumentError("MPIRoleMaker is a base: use MPISymetricRoleMaker")


class MPISymetricRoleMaker(MPIRoleMaker):
    """Even world ranks serve, odd ranks train; see the module."""

    def __init__(self):
        super().__init__()
        self._node_type = None
        self._proc_per_node = 2
        self._pserver_rand_port = 0

    def _check_role_generation(self):
        if not self._role_is_generated:
            raise NameError("generate_role() should be called first")
        return True

    def generate_role(self):
        if self._role_is_generated:
            return
        ips = self._get_ips()
        self._worker_endpoints = ips[1::2]
        self._server_endpoints = ips[::2]
        rank, size = self._get_rank(), self._get_size()
        self._node_type = 0 if rank % self._proc_per_node % 2 == 0 else 1
        self._node_type_comm = self._comm.Split(self._node_type)
        self._role = Role.WORKER if self._node_type == 1 else Role.SERVER
        self._current_id = rank // self._proc_per_node
        self._trainers_num = size // self._proc_per_node
        self._role_is_generated = True

    # -- queries (fluid's integer results; its Python 3 build returns floats) -------------------
    def is_worker(self) -> bool:
        return self._check_role_generation() and self._node_type == 1

    def is_server(self) -> bool:
        return self._check_role_generation() and self._node_type == 0

    def is_first_worker(self) -> bool:
        return self.is_worker() and self.worker_index() == 0

    def worker_num(self) -> int:
        self._check_role_generation()
        return self._get_size() // self._proc_per_node

    def _worker_num(self) -> int:
        return self.worker_num()

    def _server_num(self) -> int:
        if not self._role_is_generated:
            self.generate_role()
        return (self._get_size() + 1) // self._proc_per_node

    def worker_index(self) -> int:
        if not self._role_is_generated:
            self.generate_role()
        return self._rank // self._proc_per_node

    def server_index(self) -> int:
        if not self._role_is_generated:
            self.generate_role()
        return self._rank // self._proc_per_node

    def get_pserver_endpoints(self) -> list[str]:
        """The servers' 'ip:port': one port in [60001, 64000] drawn from the server count, so
        every node derives the same one."""
        if self._pserver_rand_port <= 0:
            self._pserver_rand_port = random.Random(self._server_num()).randint(60001, 64000)
        return [f"{ip}:{self._pserver_rand_port}" for ip in self._server_endpoints]

    def get_trainer_endpoints(self) -> list[str]:
        self._check_role_generation()
        return list(self._worker_endpoints)

    # -- collectives -----------------------------------------------------------------------------
    def all_gather(self, input):
        if not self._role_is_generated:
            self.generate_role()
        return self._all_gather(input)

    def _all_reduce(self, input, output, mode="sum"):
        """`output` = `input` reduced over this process's kind (workers or servers)."""
        if not self._role_is_generated:
            self.generate_role()
        if mode not in _OPS:
            raise ValueError(f"unknown mode: {mode}")
        op = {"sum": self.MPI.SUM, "max": self.MPI.MAX, "min": self.MPI.MIN}[mode]
        send = np.ascontiguousarray(input)
        recv = np.empty_like(send)
        self._node_type_comm.Allreduce(send, recv, op=op)
        output[...] = recv.reshape(np.shape(output))

    def all_reduce_worker(self, input, output, mode="sum"):
        if not self._role_is_generated:
            self.generate_role()
        if not self.is_worker():
            print("warning: current role is not worker in all_reduce_worker")
            return
        self._all_reduce(input, output, mode)

    def barrier_worker(self):
        if not self._role_is_generated:
            self.generate_role()
        if self.is_worker():
            self._node_type_comm.Barrier()
        else:
            print("warning: current role is not worker in barrier_worker")

    def barrier_all(self):
        if not self._role_is_generated:
            self.generate_role()
        self._comm.Barrier()

    def _barrier_worker(self):
        if self._check_role_generation() and self.is_worker():
            self._node_type_comm.Barrier()

    def _barrier_server(self):
        if self._check_role_generation() and self.is_server():
            self._node_type_comm.Barrier()
