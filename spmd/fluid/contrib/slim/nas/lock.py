"""fluid.contrib.slim.nas.lock: lock / unlock an open file (an exclusive fcntl lock), as
slim's NAS search agents share their controller's state file.

>>> import tempfile
>>> with tempfile.TemporaryFile() as f:
...     lock(f); unlock(f)
"""
from __future__ import annotations

import os

__all__ = ["lock", "unlock"]

if os.name != "posix":
    raise RuntimeError("fluid.contrib.slim.nas.lock supports POSIX platforms (fcntl) only")

from fcntl import LOCK_EX, LOCK_UN, flock  # noqa: E402 - POSIX only, checked above


def lock(file) -> None:
    """Take the exclusive lock of the open `file` (waits for other holders)."""
    flock(file.fileno(), LOCK_EX)


def unlock(file) -> None:
    """Release it."""
    flock(file.fileno(), LOCK_UN)
