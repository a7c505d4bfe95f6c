"""fluid.layers.filter_by_instag (PaddleRec): keep the instances whose tags meet a filter
(op and kernel in spmd/ops/contrib_tree.py, spmd/kernels/contrib_tree.py).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     ins = fluid.data("ins", [None, 4], "float32", lod_level=1)
...     tags = fluid.data("tags", [None, 1], "int64", lod_level=1)
...     wanted = fluid.data("wanted", [None], "int64")
...     out, loss_weight = filter_by_instag(ins, tags, wanted, True)
>>> out.shape
(-1, 4)
"""
from __future__ import annotations

from .helper import LayerHelper, check_variable

__all__ = ["filter_by_instag"]


def filter_by_instag(ins, ins_tag, filter_tag, is_lod, out_val_if_empty=0):
    """The instances of `ins` (its sequences when is_lod, else its rows) one of whose tags
    (sequence i of the LoD `ins_tag`) is in `filter_tag`: [out, loss_weight], out their rows
    with their LoD, loss_weight 1 per kept instance. When none is kept: one row of
    out_val_if_empty and loss_weight [[0]]. The gradient goes back to the kept rows."""
    check_variable(ins, "ins", "filter_by_instag")
    check_variable(ins_tag, "ins_tag", "filter_by_instag", dtypes={"int64"})
    check_variable(filter_tag, "filter_tag", "filter_by_instag", dtypes={"int64"})
    # fluid reads the LoD its feeds carry whatever they declare (Paddle's own test declares
    # Ins_tag with lod_level=0 and feeds tags per instance): a fed tag variable (and a fed ins
    # when is_lod) is LoD-tracked from here on, and a feed without the LoD fails in the op
    for fed in (ins_tag, ins) if is_lod else (ins_tag,):
        if fed.is_data and fed.lod_level < 1:
            fed.lod_level = 1
    helper = LayerHelper("filter_by_instag")
    out = helper.create_variable_for_type_inference(ins.dtype)
    loss_weight = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    index_map = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("filter_by_instag",
                     {"Ins": [ins], "Ins_tag": [ins_tag], "Filter_tag": [filter_tag]},
                     {"Out": [out], "LossWeight": [loss_weight], "IndexMap": [index_map]},
                     {"is_lod": bool(is_lod), "out_val_if_empty": int(out_val_if_empty)})
    return [out, loss_weight]
