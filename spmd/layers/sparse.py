"""fluid.layers' builders over sparse gradients (SelectedRows, spmd/core/selected_rows.py):
merge_selected_rows and get_tensor_from_selected_rows.

>>> # merged = merge_selected_rows(block.var("emb.w_0@GRAD"))
"""
from __future__ import annotations

from .helper import LayerHelper, check_variable

__all__ = ["get_tensor_from_selected_rows", "merge_selected_rows"]


def merge_selected_rows(x, name=None):
    """The sparse gradient `x` with each row once (repeats summed), rows in increasing order.

    >>> # merge_selected_rows(table_grad)
    """
    check_variable(x, "x", "merge_selected_rows")
    helper = LayerHelper("merge_selected_rows")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("merge_selected_rows", {"X": [x]}, {"Out": [out]})
    return out


def get_tensor_from_selected_rows(x, name=None):
    """The value rows of the sparse gradient `x` as a dense tensor [rows, ...].

    >>> # get_tensor_from_selected_rows(table_grad)
    """
    check_variable(x, "x", "get_tensor_from_selected_rows")
    helper = LayerHelper("get_tensor_from_selected_rows")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("get_tensor_from_selected_rows", {"X": [x]}, {"Out": [out]})
    return out
