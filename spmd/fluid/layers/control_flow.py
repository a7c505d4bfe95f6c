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
from ...layers.branches import ConditionalBlock, select_input
from ...layers.helper import LayerHelper
from .fluid_modules import populate

__all__ = populate(globals(), "control_flow",
                   {n: getattr(_dynamic_rnn, n) for n in _dynamic_rnn.CONTROL_FLOW_ONLY})
_EXTRA = {"ConditionalBlock": ConditionalBlock, "select_input": select_input}
globals().update(_EXTRA)


def split_lod_tensor(input, mask, level=0):
    """(the rows of `input` where `mask` is true, the others), as fluid's IfElse splits."""
    helper = LayerHelper("split_lod_tensor")
    out_true = helper.create_variable_for_type_inference(input.dtype)
    out_false = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("split_lod_tensor", {"X": [input], "Mask": [mask]},
                     {"OutTrue": [out_true], "OutFalse": [out_false]}, {"level": level})
    return out_true, out_false


def merge_lod_tensor(in_true, in_false, x, mask, level=0):
    """The rows of `in_true` and `in_false` put back in `x`'s order by `mask`."""
    helper = LayerHelper("merge_lod_tensor")
    out = helper.create_variable_for_type_inference(in_true.dtype)
    helper.append_op("merge_lod_tensor",
                     {"X": [x], "Mask": [mask], "InTrue": [in_true], "InFalse": [in_false]},
                     {"Out": [out]}, {"level": level})
    return out


def select_output(input, outputs, mask):
    """Write `input` into outputs[mask] (the other outputs are left as they are)."""
    helper = LayerHelper("select_output")
    helper.append_op("select_output", {"X": [input], "Mask": [mask]}, {"Out": list(outputs)},
                     {})
    return outputs
