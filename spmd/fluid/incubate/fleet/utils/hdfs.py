"""fluid.incubate.fleet.utils.hdfs: fleet's HDFSClient, contrib.utils' client with fleet's
download / upload (a trainer's share of a directory, several files at a time) and
upload_dir.

>>> # client = HDFSClient("/opt/hadoop", configs); client.download("/data", "./data", 4)
"""
from __future__ import annotations

import os

from ....contrib.utils import hdfs_utils

__all__ = ["HDFSClient"]


class HDFSClient(hdfs_utils.HDFSClient):
    @staticmethod
    def split_files(files: list, trainer_id: int, trainers: int) -> list:
        """This trainer's contiguous share of `files` (the first ones get one more)."""
        per, extra = divmod(len(files), trainers)
        start = trainer_id * per + min(trainer_id, extra)
        return files[start:start + per + (1 if trainer_id < extra else 0)]

    def download(self, hdfs_path, local_path, multi_processes=5, overwrite=False,
                 retry_times=5):
        """Every file under `hdfs_path` into `local_path` (files only when `hdfs_path` is a
        file); returns the local paths."""
        if not self.is_dir(hdfs_path):
            target = os.path.join(local_path, os.path.basename(hdfs_path))
            self.make_local_dirs(local_path)
            return [target] if super().download(hdfs_path, target, overwrite) else []
        return hdfs_utils.multi_download(self, hdfs_path, local_path, 0, 1, multi_processes)

    def upload(self, hdfs_path, local_path, multi_processes=5, overwrite=False,
               retry_times=5):
        """`local_path` (a file or a directory's files) to `hdfs_path`."""
        if os.path.isdir(local_path):
            return hdfs_utils.multi_upload(self, hdfs_path, local_path, multi_processes,
                                           overwrite)
        return super().upload(hdfs_path, local_path, overwrite, retry_times)

    def upload_dir(self, dest_dir, local_dir, overwrite=False):
        """`local_dir` as `dest_dir/<its name>`."""
        target = os.path.join(dest_dir, os.path.basename(os.path.normpath(local_dir)))
        if self.is_exist(target) and overwrite:
            self.delete(target)
        self.makedirs(dest_dir)
        return self._run(["-put", local_dir, dest_dir])[0] == 0
