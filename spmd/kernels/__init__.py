"""Kernels, one body per op against `xp`. A kernel module is imported when a kernel it
registers is first looked up in KERNELS (the generated kernel_index.py says which module
registers which op's kernel); KERNELS.load_all() imports them all."""
from .registry import KERNELS, get_kernel, kernel

__all__ = ["KERNELS", "get_kernel", "kernel"]
