"""Kernels, one body per op against `xp`. Importing this package registers them in KERNELS."""
from . import activation, collective, math, nn, optim, tensor  # noqa: F401 - registration side effects
from .registry import KERNELS, get_kernel, kernel

__all__ = ["KERNELS", "get_kernel", "kernel"]
