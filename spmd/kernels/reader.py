"""Kernels: reader ops."""
from __future__ import annotations

import os

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel


@kernel("load")
def load(xp, ins, attrs, want):
    """Read one variable saved by spmd.io (an .npy file, with or without its extension)."""
    path = attrs["file_path"]
    if not os.path.exists(path) and os.path.exists(path + ".npy"):
        path += ".npy"
    try:
        with open(path, "rb") as f:
            array = np.load(f, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InvalidArgumentError(
            f"load op: cannot read '{attrs['file_path']}': {e}; give a file written by "
            f"fluid.io.save_vars / save_params / save_persistables") from None
    if not isinstance(array, np.ndarray):
        raise InvalidArgumentError(
            f"load op: '{path}' is an .npz archive (save_vars with filename=); the load op "
            f"reads one variable per file: use fluid.io.load_vars with filename= instead")
    if attrs["load_as_fp16"]:
        array = array.astype(np.float16)
    return {"Out": xp.asarray(array)}
