"""fluid.contrib.memory_usage_calc: memory_usage(program, batch_size), fluid 1.8's estimate of
a program's activation memory: every LoD tensor an op of the global block writes, counted
once, a -1 dim taken as the batch, plus 5% to 10%.

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [None, 256], "float32")
...     y = fluid.layers.relu(x)
>>> low, high, unit = memory_usage(main, batch_size=4)       # y: 4 * 256 * 4 bytes
>>> round(low, 2), round(high, 2), unit
(4.2, 4.4, 'KB')
"""
from __future__ import annotations

import numpy as np

from ...core import Program
from ...core.dtypes import convert_dtype

__all__ = ["memory_usage"]


def _count(var, batch_size: int) -> int:
    count, unknown = 1, 0
    for d in var.shape:
        if d < 0:
            unknown += 1
            if unknown > 1:
                raise ValueError(f"Var {var.name} has more than one negative dim.")
            count *= batch_size * (-d)
        else:
            count *= d
    return count


def memory_usage(program, batch_size: int):
    """(lower, upper, unit): the estimate in B, KB or MB."""
    if not isinstance(program, Program):
        raise TypeError(f"Calculating Memory Usage requires Program as its Parameter. But you "
                        f"passed in {type(program)}")
    if batch_size <= 0:
        raise ValueError("The batch size need to be positive.")
    block = program.global_block()
    seen, total = {"@EMPTY@"}, 0.0
    for op in block.ops:
        for name in op.output_arg_names:
            if name in seen:
                continue
            seen.add(name)
            var = block.vars[name]
            if getattr(var, "type", "LOD_TENSOR") != "LOD_TENSOR":
                continue
            total += _count(var, batch_size) * np.dtype(convert_dtype(var.dtype)).itemsize
    unit = "B"
    for bigger in ("KB", "MB"):
        if total <= 1024:
            break
        total /= 1024
        unit = bigger
    return total * 1.05, total * 1.1, unit
