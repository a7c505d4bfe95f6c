"""paddle.distributed.fleet (Paddle 2.x, static graph, collective mode): module functions
bound to one Fleet, as in Paddle.

>>> import spmd.distributed.fleet as fleet
>>> fleet.init(is_collective=True)
>>> fleet.worker_index()
0
"""
from __future__ import annotations

from ...fleet.fleet_v2 import DistributedStrategy, Fleet
from ...fleet.role_maker import PaddleCloudRoleMaker, Role

fleet = Fleet()
init = fleet.init
distributed_optimizer = fleet.distributed_optimizer
worker_index = fleet.worker_index
worker_num = fleet.worker_num
is_first_worker = fleet.is_first_worker
is_worker = fleet.is_worker
is_server = fleet.is_server
worker_endpoints = fleet.worker_endpoints
server_num = fleet.server_num
server_index = fleet.server_index
server_endpoints = fleet.server_endpoints
barrier_worker = fleet.barrier_worker
init_worker = fleet.init_worker
stop_worker = fleet.stop_worker
save_persistables = fleet.save_persistables
save_inference_model = fleet.save_inference_model
split_files = fleet.split_files


def __getattr__(name):
    if name in ("main_program", "startup_program"):  # set by minimize()
        return getattr(fleet, name)
    raise AttributeError(f"module 'paddle.distributed.fleet' has no attribute '{name}'")


__all__ = ["DistributedStrategy", "Fleet", "PaddleCloudRoleMaker", "Role",
           "barrier_worker", "distributed_optimizer", "fleet",
           "init", "init_worker", "is_first_worker", "is_server", "is_worker",
           "save_inference_model", "save_persistables", "server_endpoints", "server_index",
           "server_num", "split_files", "stop_worker", "worker_endpoints", "worker_index",
           "worker_num"]
