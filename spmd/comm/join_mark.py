"""Whether this process was re-executed to join a world of env-only trainers (comm/join.py
re-executes it with SPMD_JOIN_START=1). Its own module, importing nothing, because every
rank asks at its first collective (comm/mpi.py, comm/arrivals.py, the shared buckets), and
join.py brings sockets and selectors a launched job never uses."""
from __future__ import annotations

import os

MARK = "SPMD_JOIN_START"  # set in the process re-executed under its own mpiexec


def joined_start(env=None) -> bool:
    """Whether this process was re-executed to join a world of env-only trainers."""
    env = os.environ if env is None else env
    return env.get(MARK) == "1"
