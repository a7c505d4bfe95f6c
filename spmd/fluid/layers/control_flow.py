"""fluid.layers.control_flow: fluid 1.8's module of that name (see fluid_modules), with the LoD
tensor-array layers fluid 1.8 has only there (lod_rank_table, max_sequence_len,
lod_tensor_to_array, array_to_lod_tensor, shrink_memory) and its building blocks that
programs and tests import from it: ConditionalBlock, select_input / select_output,
split_lod_tensor / merge_lod_tensor.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32")
...     mask = fluid.data("mask", [None, 1], "bool")
...     yes, no = split_lod_tensor(x, mask)
...     back = merge_lod_tensor(yes, no, x, mask)
>>> back.shape
(-1, 2)
"""
from __future__ import annotations

from ...layers import dynamic_rnn as _dynamic_rnn
from .fluid_modules import populate

# ConditionalBlock, select_input / select_output and split_lod_tensor / merge_lod_tensor come
# with CONTROL_FLOW_ONLY from spmd/layers/branches.py, fluid's type checks included
__all__ = populate(globals(), "control_flow",
                   {n: getattr(_dynamic_rnn, n) for n in _dynamic_rnn.CONTROL_FLOW_ONLY})
