"""fluid.incubate.fleet.utils.fleet_barrier_util: check_all_trainers_ready, fluid 1.8's barrier
of the parameter-server fleet's trainers through files on HDFS: each trainer puts
`ready.<epoch>.<trainer id>.done` into `ready_path` and waits until the folder holds a
multiple of the trainer count. The hadoop client is HDFSClient (`$HADOOP_HOME/bin/hadoop fs`
with fs.default.name = $FS_NAME and hadoop.job.ugi = $FS_UGI).

>>> # check_all_trainers_ready("/user/job/ready", epoch=3)   # after fleet.init(role)
"""
from __future__ import annotations

import os
import time

from ....contrib.utils import HDFSClient
from ..parameter_server.distribute_transpiler import fleet

__all__ = ["check_all_trainers_ready"]

POLL_SECONDS = 10  # fluid's wait between two listings of ready_path


def check_all_trainers_ready(ready_path, epoch):
    """Block until every trainer of the fleet has reached `epoch` (its file is in
    `ready_path`)."""
    trainer_num = fleet.worker_num()
    trainer_id = fleet.worker_index()
    configs = {"fs.default.name": os.getenv("FS_NAME"),
               "hadoop.job.ugi": os.getenv("FS_UGI")}
    node_ready = f"ready.{epoch}.{trainer_id}.done"
    with open(node_ready, "w"):
        pass
    client = HDFSClient(os.getenv("HADOOP_HOME", ""), configs)
    if not client.is_dir(ready_path):
        client.makedirs(ready_path)
    # into the folder, as a file of its own: fluid's upload(hdfs_path=ready_path, overwrite)
    # replaces the folder itself, dropping the other trainers' files
    client.upload(hdfs_path=f"{ready_path.rstrip('/')}/{node_ready}", local_path=node_ready,
                  overwrite=True, retry_times=0)
    print(f"PUT {node_ready} ON HDFS {ready_path} OK")
    while True:
        ready_num = len(client.ls(ready_path))
        print(f"have {trainer_num - ready_num % trainer_num} trainers need to be ready")
        if ready_num % trainer_num == 0:
            break
        time.sleep(POLL_SECONDS)
    print("All trainers are ready, continue training")
