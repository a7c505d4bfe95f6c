"""Kernels, one body per op against `xp`. A kernel module is imported when a kernel it
registers is first looked up in KERNELS (the generated kernel_index.py says which module
registers which op's kernel); KERNELS.load_all() imports them all."""
from .. import lazy as _lazy
from .registry import KERNELS, get_kernel, kernel

__all__ = ["KERNELS", "get_kernel", "kernel"]

# spmd.kernels.<module> reads as before: a module not imported yet is imported on access
__getattr__, __dir__ = _lazy.attach(__name__, submodules=True)
