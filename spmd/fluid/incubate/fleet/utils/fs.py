"""fluid.incubate.fleet.utils.fs: LocalFS and the FS interface of fleet's checkpoints
(spmd.fleet.fs); here `LocalFS.ls_dir` returns (dirs, files).

>>> from spmd.fluid.incubate.fleet.utils.fs import LocalFS
>>> LocalFS().need_upload_download()
False
"""
from .....fleet.fs import FS, FSFileExistsError, FSFileNotExistsError, LocalFS  # noqa: F401

__all__ = ["FS", "FSFileExistsError", "FSFileNotExistsError", "LocalFS"]
