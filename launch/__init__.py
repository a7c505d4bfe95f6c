"""paddle-launch: start a data-parallel spmd job through MPI and end it cleanly.

cli (fluid's flags) -> LaunchConfig (resolved, validated) -> launch(config). The workers run
`python -m spmd.run script.py`; the environment they get is in launch.env; the report of a
failed job in launch.report. With --server_num, a parameter-server job instead (launch.ps;
the roles' PADDLE_* variables and the MPI rank-to-role mapping in launch.env).

>>> from launch import launch, resolve_config
>>> launch(resolve_config("train.py", nproc_per_node=2))  # doctest: +SKIP
0
"""
from __future__ import annotations

from .config import LaunchConfig, UsageError, resolve_config
from .job import launch

__all__ = ["LaunchConfig", "UsageError", "launch", "resolve_config"]
