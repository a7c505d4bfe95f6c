"""File systems for fleet's checkpoints: `LocalFS`, and `FS`, the interface a remote one
(HDFS, AFS) implements for save_check_point / load_check_point.

fluid 1.8.5 keeps its FS in `paddle.distributed.fs_wrapper` (list_dirs, ls_dir, stat, mkdir,
mv, rmr, rm, delete, need_upload_download, upload, download); later fluid releases moved it
to `fluid.incubate.fleet.utils.fs` and added is_file, is_dir, is_exist, mkdirs, rename, touch
and a checked `mv`. `LocalFS` here has both sets. The one difference between the two, what
`ls_dir` returns, is kept per face: here (the later one) `(dirs, files)`; the 1.8.5 face,
spmd/distributed/fs_wrapper.py, returns one list of names.

    >>> fs = LocalFS()
    >>> fs.is_exist("/")
    True
"""
from __future__ import annotations

import os
import shutil

from ..errors import InvalidArgumentError, NotFoundError

__all__ = ["FS", "FSFileExistsError", "FSFileNotExistsError", "LocalFS"]


class FSFileExistsError(InvalidArgumentError):
    """The target of a mkdir / mv / touch exists already."""


class FSFileNotExistsError(NotFoundError):
    """The source of a mv does not exist."""


class FS:
    """What fleet's checkpoints ask of a file system. A remote one answers
    need_upload_download() with True and implements upload / download; the checkpoint is
    then written to (read from) `local_cache_path` and copied."""

    def list_dirs(self, fs_path: str) -> list[str]:
        """The names of the directories directly in `fs_path` ([] if it does not exist)."""
        raise NotImplementedError(f"{type(self).__name__}.list_dirs")

    def mv(self, fs_src_path: str, fs_dst_path: str, overwrite: bool = False,
           test_exists: bool = False) -> None:
        """Move `fs_src_path` to `fs_dst_path`."""
        raise NotImplementedError(f"{type(self).__name__}.mv")

    def delete(self, fs_path: str) -> None:
        """Remove the file or directory tree `fs_path`, if there is one."""
        raise NotImplementedError(f"{type(self).__name__}.delete")

    def need_upload_download(self) -> bool:
        """Whether files go through a local copy (a remote file system)."""
        raise NotImplementedError(f"{type(self).__name__}.need_upload_download")

    def upload(self, local_path: str, fs_path: str) -> None:
        """Copy the local `local_path` to `fs_path` (remote file systems)."""
        raise NotImplementedError(f"{type(self).__name__}.upload")

    def download(self, fs_path: str, local_path: str) -> None:
        """Copy `fs_path` to the local `local_path` (remote file systems)."""
        raise NotImplementedError(f"{type(self).__name__}.download")


class LocalFS(FS):
    """The local file system, under fluid's names for it.

    >>> import tempfile, os
    >>> root = tempfile.mkdtemp()
    >>> fs = LocalFS()
    >>> fs.mkdirs(os.path.join(root, "a", "b"))
    >>> fs.ls_dir(root)
    (['a'], [])
    """

    def ls_dir(self, fs_path: str):
        """(directories, files) directly in `fs_path`; ([], []) if it does not exist."""
        if not self.is_exist(fs_path):
            return [], []
        dirs, files = [], []
        for name in sorted(os.listdir(fs_path)):
            (dirs if os.path.isdir(os.path.join(fs_path, name)) else files).append(name)
        return dirs, files

    def list_dirs(self, fs_path: str) -> list[str]:
        """The directories directly in `fs_path`; [] if it does not exist."""
        if not self.is_exist(fs_path):
            return []
        if not self.is_dir(fs_path):
            raise InvalidArgumentError(f"list_dirs: '{fs_path}' is a file, not a directory")
        return sorted(n for n in os.listdir(fs_path) if os.path.isdir(os.path.join(fs_path, n)))

    def mkdirs(self, fs_path: str) -> None:
        """Make the directory `fs_path` and its parents (nothing if it exists)."""
        if os.path.isfile(fs_path):
            raise FSFileExistsError(f"mkdirs: '{fs_path}' is already a file")
        os.makedirs(fs_path, exist_ok=True)

    mkdir = mkdirs  # fluid 1.8.5's name

    def is_file(self, fs_path: str) -> bool:
        return os.path.isfile(fs_path)

    def is_dir(self, fs_path: str) -> bool:
        return os.path.isdir(fs_path)

    def is_exist(self, fs_path: str) -> bool:
        return os.path.exists(fs_path)

    stat = is_exist  # fluid 1.8.5's name

    def touch(self, fs_path: str, exist_ok: bool = True) -> None:
        """Make an empty file `fs_path`; if it exists, nothing (exist_ok) or an error."""
        if self.is_exist(fs_path):
            if exist_ok:
                return
            raise FSFileExistsError(f"touch: '{fs_path}' exists already (pass exist_ok=True)")
        with open(fs_path, "a"):
            pass

    def rename(self, fs_src_path: str, fs_dst_path: str) -> None:
        """os.rename: atomic on one file system."""
        os.rename(fs_src_path, fs_dst_path)

    def mv(self, src_path: str, dst_path: str, overwrite: bool = False,
           test_exists: bool = False) -> None:
        """Move `src_path` to `dst_path`; an existing `dst_path` is an error unless
        `overwrite` (then it is deleted first)."""
        if not self.is_exist(src_path):
            raise FSFileNotExistsError(f"mv: the source '{src_path}' does not exist")
        if overwrite and self.is_exist(dst_path):
            self.delete(dst_path)
        if self.is_exist(dst_path):
            raise FSFileExistsError(
                f"mv: the target '{dst_path}' exists already; pass overwrite=True to replace it")
        self.rename(src_path, dst_path)

    def rmr(self, fs_path: str) -> None:
        """Remove the directory tree `fs_path` (fluid 1.8.5's name)."""
        shutil.rmtree(fs_path)

    def rm(self, fs_path: str) -> None:
        """Remove the file `fs_path` (fluid 1.8.5's name)."""
        os.remove(fs_path)

    def delete(self, fs_path: str) -> None:
        """Remove the file or directory tree `fs_path`; nothing if there is none."""
        if not os.path.lexists(fs_path):
            return
        if os.path.isdir(fs_path) and not os.path.islink(fs_path):
            shutil.rmtree(fs_path)
        else:
            os.remove(fs_path)

    def need_upload_download(self) -> bool:
        """False: checkpoints are written in place."""
        return False

    def upload(self, local_path: str, fs_path: str) -> None:
        """A copy (a local file system needs none; kept so that LocalFS is a whole FS)."""
        _copy(local_path, fs_path)

    def download(self, fs_path: str, local_path: str) -> None:
        """A copy (see upload)."""
        _copy(fs_path, local_path)


def _copy(src: str, dst: str) -> None:
    if os.path.isdir(src):
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)
