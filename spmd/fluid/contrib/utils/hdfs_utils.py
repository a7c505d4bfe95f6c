"""fluid.contrib.utils.hdfs_utils: HDFSClient, fluid 1.8's client of the hadoop command line
(`$hadoop_home/bin/hadoop fs -D<config>=<value> ...`), and multi_download / multi_upload,
which share a directory's files among trainers and processes. Every call is one `hadoop fs`
command, retried as fluid retries it; nothing is pickled.

>>> # client = HDFSClient("/opt/hadoop", {"fs.default.name": "hdfs://nn:9000",
>>> #                                     "hadoop.job.ugi": "user,pass"})
>>> # client.upload("/data/part-0", "part-0"); client.ls("/data")
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

__all__ = ["HDFSClient", "multi_download", "multi_upload"]

_logger = logging.getLogger(__name__)


class HDFSClient:
    """`hadoop fs` commands against the file system `configs` names."""

    def __init__(self, hadoop_home: str, configs: dict):
        self.pre_commands = [os.path.join(hadoop_home, "bin", "hadoop"), "fs"]
        self.pre_commands += [f"-D{k}={v}" for k, v in configs.items()]

    def _run(self, commands: list[str], retry_times: int = 5) -> tuple[int, str, str]:
        whole = self.pre_commands + list(commands)
        code, out, err = 0, "", ""
        for attempt in range(retry_times + 1):
            proc = subprocess.run(whole, capture_output=True, text=True, check=False)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
            if code == 0:
                break
            _logger.warning("Times: %d, Error running command: %s. Return code: %d, Error: %s",
                            attempt, " ".join(whole), code, err)
        return code, out, err

    def is_exist(self, hdfs_path: str) -> bool:
        return self._run(["-test", "-e", hdfs_path], retry_times=1)[0] == 0

    def is_dir(self, hdfs_path: str) -> bool:
        return self.is_exist(hdfs_path) and self._run(["-test", "-d", hdfs_path],
                                                      retry_times=1)[0] == 0

    def is_file(self, hdfs_path: str) -> bool:
        return self.is_exist(hdfs_path) and not self.is_dir(hdfs_path)

    def upload(self, hdfs_path: str, local_path: str, overwrite: bool = False,
               retry_times: int = 5) -> bool:
        """Put `local_path` at `hdfs_path`; an existing target is replaced only with
        overwrite (else False)."""
        if not os.path.exists(local_path):
            _logger.error("local path %s does not exist", local_path)
            return False
        if self.is_exist(hdfs_path):
            if not overwrite:
                _logger.error("HDFS path %s exists and overwrite is False", hdfs_path)
                return False
            self.delete(hdfs_path)
        return self._run(["-put", local_path, hdfs_path], retry_times)[0] == 0

    def download(self, hdfs_path: str, local_path: str, overwrite: bool = False,
                 unzip: bool = False) -> bool:
        """Get `hdfs_path` into `local_path` (replacing it with overwrite)."""
        if not self.is_exist(hdfs_path):
            _logger.error("HDFS path %s does not exist", hdfs_path)
            return False
        if os.path.exists(local_path):
            if not overwrite:
                _logger.error("local path %s exists and overwrite is False", local_path)
                return False
            if os.path.isdir(local_path):
                shutil.rmtree(local_path)
            else:
                os.remove(local_path)
        self.make_local_dirs(os.path.dirname(local_path) or ".")
        ok = self._run(["-get", hdfs_path, local_path])[0] == 0
        if ok and unzip and local_path.endswith((".tar.gz", ".tgz", ".tar")):
            shutil.unpack_archive(local_path, os.path.dirname(local_path) or ".")
        return ok

    def cat(self, hdfs_path: str) -> str:
        code, out, _ = self._run(["-cat", hdfs_path], retry_times=1)
        return out.strip() if code == 0 else ""

    def delete(self, hdfs_path: str) -> bool:
        if not self.is_exist(hdfs_path):
            return True
        command = ["-rmr", hdfs_path] if self.is_dir(hdfs_path) else ["-rm", hdfs_path]
        return self._run(command)[0] == 0

    def rename(self, hdfs_src_path: str, hdfs_dst_path: str, overwrite: bool = False) -> bool:
        if overwrite and self.is_exist(hdfs_dst_path):
            self.delete(hdfs_dst_path)
        return self._run(["-mv", hdfs_src_path, hdfs_dst_path])[0] == 0

    @staticmethod
    def make_local_dirs(local_path: str) -> None:
        os.makedirs(local_path, exist_ok=True)

    def makedirs(self, hdfs_path: str) -> bool:
        if self.is_exist(hdfs_path):
            return True
        return self._run(["-mkdir", hdfs_path])[0] == 0

    @staticmethod
    def _listing(output: str) -> list[list[str]]:
        return [re.split(r"\s+", line.strip()) for line in output.strip().splitlines()
                if len(re.split(r"\s+", line.strip())) == 8]

    def ls(self, hdfs_path: str) -> list[str]:
        """The paths directly under `hdfs_path` ([] when it does not exist)."""
        if not self.is_exist(hdfs_path):
            return []
        code, out, _ = self._run(["-ls", hdfs_path], retry_times=1)
        return [cols[7] for cols in self._listing(out)] if code == 0 else []

    def lsr(self, hdfs_path: str, only_file: bool = True, sort: bool = True) -> list[str]:
        """Every path under `hdfs_path`, files only by default, oldest first with sort."""
        if not self.is_exist(hdfs_path):
            return []
        code, out, _ = self._run(["-lsr", hdfs_path], retry_times=1)
        if code:
            return []
        rows = [c for c in self._listing(out) if not (only_file and c[0].startswith("d"))]
        if sort:
            rows.sort(key=lambda c: f"{c[5]} {c[6]}")
        return [c[7] for c in rows]


def multi_download(client: HDFSClient, hdfs_path: str, local_path: str, trainer_id: int,
                   trainers: int, multi_processes: int = 5) -> list[str]:
    """Download this trainer's share (every `trainers`-th file from `trainer_id`) of the
    files under `hdfs_path` into `local_path`, `multi_processes` at a time; returns the local
    paths."""
    files = client.lsr(hdfs_path)[trainer_id::trainers]
    client.make_local_dirs(local_path)

    def fetch(remote: str) -> str:
        target = os.path.join(local_path, os.path.relpath(remote, hdfs_path))
        client.make_local_dirs(os.path.dirname(target))
        client.download(remote, target, overwrite=True)
        return target

    with ThreadPoolExecutor(max_workers=max(1, multi_processes)) as pool:
        return list(pool.map(fetch, files))


def multi_upload(client: HDFSClient, hdfs_path: str, local_path: str, multi_processes: int = 5,
                 overwrite: bool = False, sync: bool = True) -> None:
    """Upload every file under `local_path` to the same place under `hdfs_path`."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(local_path) for f in fs]

    def put(local: str) -> None:
        remote = os.path.join(hdfs_path, os.path.relpath(local, local_path))
        client.makedirs(os.path.dirname(remote))
        client.upload(remote, local, overwrite=overwrite)

    with ThreadPoolExecutor(max_workers=max(1, multi_processes)) as pool:
        list(pool.map(put, files))
