"""paddle.distributed.fs_wrapper, where fluid 1.8.5 keeps the file systems of fleet's
checkpoints: `FS` and `LocalFS` (spmd.fleet.fs), with 1.8.5's `ls_dir`, one list of names.

>>> from spmd.distributed.fs_wrapper import LocalFS
>>> LocalFS().stat("/")
True
"""
from __future__ import annotations

import os

from ..fleet import fs as _fs
from ..fleet.fs import FS

__all__ = ["FS", "LocalFS"]


class LocalFS(_fs.LocalFS):
    """fluid 1.8.5's LocalFS: as spmd.fleet.fs.LocalFS, but ls_dir lists every name.

    >>> import tempfile
    >>> LocalFS().ls_dir(tempfile.mkdtemp())
    []
    """

    def ls_dir(self, fs_path: str) -> list[str]:
        """Every name directly in `fs_path` (files and directories)."""
        return sorted(os.listdir(fs_path))
