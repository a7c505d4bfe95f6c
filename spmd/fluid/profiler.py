"""fluid.profiler: the profiler context, start/stop/reset_profiler and cuda_profiler
(implemented in spmd.profiler).

>>> import spmd.fluid.profiler as profiler
>>> profiler.reset_profiler()
"""
from __future__ import annotations

from ..profiler import cuda_profiler, profiler, reset_profiler, start_profiler, stop_profiler

__all__ = ["cuda_profiler", "reset_profiler", "profiler", "start_profiler", "stop_profiler"]
