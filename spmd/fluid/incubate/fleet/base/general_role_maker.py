"""fluid 1.8's GeneralRoleMaker: the roles of a parameter-server job from the PaddleCloud
variables (TRAINING_ROLE, PADDLE_TRAINER_ID / PADDLE_PSERVER_ID or POD_IP + PADDLE_PORT,
PADDLE_TRAINER_ENDPOINTS, PADDLE_PSERVERS_IP_PORT_LIST), with collectives among the trainers,
among the servers and among all of them (barrier, all_reduce, all_gather) for FleetUtil's
global metrics and PaddleRec's barriers.

fluid runs those collectives on Gloo with a rendezvous store on HDFS (`path`, hdfs_name,
hdfs_ugi) or on an HTTP server (http_ip_port). spmd's store is a folder every process sees
(`path`: a shared or local file system): each step of a group, every member writes its
array there (atomically, as a .npy) and reads the others'. HDFS and HTTP stores are refused
with the reason; nothing is pickled (all_gather sends JSON).

>>> # role = GeneralRoleMaker(path="/shared/job_42/gloo")   # with the PaddleCloud variables set
>>> # fleet.init(role); role.all_reduce_worker(np.array([n]), out)
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

from .....errors import CommunicationError, InvalidArgumentError
from .....fleet.role_maker import Role, RoleMakerBase

__all__ = ["GeneralRoleMaker"]

_POLL_S = 0.01


class _FileGroup:
    """Collectives of `size` processes (this one `rank`) through files under `folder`."""

    def __init__(self, folder: str, rank: int, size: int, timeout_s: float):
        self.folder, self.rank, self.size, self.timeout_s = folder, rank, size, timeout_s
        self.step = 0
        os.makedirs(folder, exist_ok=True)

    def _exchange(self, value: np.ndarray) -> list[np.ndarray]:
        step_dir = os.path.join(self.folder, str(self.step))
        os.makedirs(step_dir, exist_ok=True)
        mine = os.path.join(step_dir, f"{self.rank}.npy")
        with open(mine + ".tmp", "wb") as f:
            np.save(f, np.asarray(value), allow_pickle=False)
        os.replace(mine + ".tmp", mine)  # the others never read a half-written file
        paths = [os.path.join(step_dir, f"{r}.npy") for r in range(self.size)]
        deadline = time.monotonic() + self.timeout_s
        while not all(os.path.exists(p) for p in paths):
            if time.monotonic() > deadline:
                missing = [r for r, p in enumerate(paths) if not os.path.exists(p)]
                raise CommunicationError(
                    f"GeneralRoleMaker: step {self.step} of the group in '{self.folder}' "
                    f"waited {self.timeout_s} s for members {missing} of {self.size} "
                    f"(rank {self.rank}); a member is slow or gone (run_timeout_seconds)")
            time.sleep(_POLL_S)
        got = [np.load(p, allow_pickle=False) for p in paths]
        if self.step:  # every member wrote this step, so all are done reading the last one
            previous = os.path.join(self.folder, str(self.step - 1), f"{self.rank}.npy")
            if os.path.exists(previous):
                os.remove(previous)
        self.step += 1
        return got

    def barrier(self) -> None:
        self._exchange(np.zeros(1, np.int8))

    def all_reduce(self, value: np.ndarray, mode: str) -> np.ndarray:
        reduce = {"sum": np.add, "max": np.maximum, "min": np.minimum}.get(mode)
        if reduce is None:
            raise ValueError(f"unknown mode: {mode}")
        parts = self._exchange(np.ascontiguousarray(value))
        out = parts[0].copy()
        for part in parts[1:]:
            out = reduce(out, part)
        return out

    def all_gather(self, obj) -> list:
        data = np.frombuffer(json.dumps(obj).encode(), np.uint8)
        return [json.loads(part.tobytes().decode()) for part in self._exchange(data)]


class GeneralRoleMaker(RoleMakerBase):
    """Roles from the PaddleCloud variables, collectives through the folder `path` (see the
    module)."""

    def __init__(self, **kwargs):
        super().__init__()
        self._hdfs_name = kwargs.get("hdfs_name", "")
        self._hdfs_ugi = kwargs.get("hdfs_ugi", "")
        self._path = kwargs.get("path", "").rstrip("/")
        self._init_timeout_seconds = kwargs.get("init_timeout_seconds", 3600)
        self._run_timeout_seconds = kwargs.get("run_timeout_seconds", 9999999)
        if kwargs.get("http_ip_port"):
            raise InvalidArgumentError(
                "GeneralRoleMaker: http_ip_port (fluid's HTTP rendezvous for Gloo) is not in "
                "spmd; give path=<a folder every process sees>")
        if self._hdfs_name:
            raise InvalidArgumentError(
                "GeneralRoleMaker: an HDFS store (hdfs_name / hdfs_ugi) is not in spmd; give "
                "path=<a folder every process sees, a shared file system>")
        self._prefix = os.getenv("SYS_JOB_ID", "")
        self._node_type_comm = None
        self._all_comm = None

    def generate_role(self):
        if self._role_is_generated:
            return
        env = os.environ
        for name in ("PADDLE_PSERVERS_IP_PORT_LIST", "TRAINING_ROLE",
                     "PADDLE_TRAINER_ENDPOINTS"):
            if name not in env:
                raise InvalidArgumentError(f"GeneralRoleMaker: {name} is not set (the "
                                           f"PaddleCloud variables give every process its "
                                           f"role)")
        if not self._path:
            raise InvalidArgumentError("GeneralRoleMaker: path is empty; give path=<a folder "
                                       "every process sees> for its rendezvous")
        servers = env["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
        workers = env["PADDLE_TRAINER_ENDPOINTS"].split(",")
        training_role = env["TRAINING_ROLE"]
        if training_role not in ("TRAINER", "PSERVER"):
            raise ValueError("TRAINING_ROLE must be PSERVER or TRAINER")
        if training_role == "TRAINER":
            role, current_id = Role.WORKER, int(env["PADDLE_TRAINER_ID"])
            endpoint, group, members, kind = workers[current_id], workers, len(workers), "trainer"
        else:
            if env.get("PADDLE_PSERVER_ID") is not None:
                current_id = int(env["PADDLE_PSERVER_ID"])
                endpoint = servers[current_id]
            else:
                endpoint = f"{env['POD_IP']}:{env['PADDLE_PORT']}"
                if endpoint not in servers:
                    raise InvalidArgumentError(f"GeneralRoleMaker: this pserver's {endpoint} "
                                               f"is not in PADDLE_PSERVERS_IP_PORT_LIST "
                                               f"{servers}")
                current_id = servers.index(endpoint)
            role, group, members, kind = Role.SERVER, servers, len(servers), "pserver"
        root = os.path.join(self._path, self._prefix) if self._prefix else self._path
        timeout = float(self._run_timeout_seconds)
        self._node_type = 1 if role == Role.WORKER else 0
        self._node_type_comm = _FileGroup(os.path.join(root, kind), group.index(endpoint),
                                          members, timeout)
        everyone = workers + servers
        self._rank, self._size = everyone.index(endpoint), len(everyone)
        self._all_comm = _FileGroup(os.path.join(root, "all"), self._rank, self._size, timeout)
        self._cur_endpoint = endpoint
        self._role, self._current_id = role, current_id
        self._trainers_num = len(workers)
        self._worker_endpoints, self._server_endpoints = workers, servers
        self._role_is_generated = True
        self._all_comm.barrier()  # every process is there before the first collective

    # -- queries ---------------------------------------------------------------------------------
    def _server_num(self) -> int:
        return len(self._generated()._server_endpoints)

    def _worker_num(self) -> int:
        return self.worker_num()

    def get_local_endpoint(self) -> str:
        return self._generated()._cur_endpoint

    def is_first_worker(self) -> bool:
        return self.is_worker() and self.worker_index() == 0

    # -- collectives -----------------------------------------------------------------------------
    def _barrier_worker(self):
        if self.is_worker():
            self._node_type_comm.barrier()

    def _barrier_server(self):
        if self.is_server():
            self._node_type_comm.barrier()

    def _barrier_all(self):
        self._generated()._all_comm.barrier()

    def barrier_worker(self):
        self._barrier_worker()

    def barrier_all(self):
        self._barrier_all()

    def _all_reduce(self, input, output, mode="sum"):
        """`output` = `input` reduced over this process's kind (trainers or pservers)."""
        got = self._generated()._node_type_comm.all_reduce(np.asarray(input), mode)
        output[...] = got.reshape(np.shape(output))

    def all_reduce_worker(self, input, output, mode="sum"):
        if not self.is_worker():
            print("warning: current role is not worker in all_reduce_worker")
            return
        self._all_reduce(input, output, mode)

    def _all_gather(self, input):
        return self._generated()._all_comm.all_gather(input)

    def all_gather(self, input):
        return self._all_gather(input)

    def _worker_gather(self, input):
        if not self.is_worker():
            return None
        return self._node_type_comm.all_gather(input)
