"""fluid.contrib.mixed_precision.fp16_utils: the op-finding helpers of fluid 1.8's float16
rewrite (find_true_prev_op, find_true_post_op, find_op_index). The float16 rewrite itself
(rewrite_program, update_loss_scaling, update_role_var_grad) is not in spmd, which trains in
the program's dtype (see decorator.py); docs/fluid_coverage.md says so.

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32")
...     y = fluid.layers.relu(x)
...     z = fluid.layers.scale(y)
>>> ops = main.global_block().ops
>>> find_true_prev_op(ops, ops[1], y.name).type
'relu'
>>> [op.type for op in find_true_post_op(ops, ops[0], y.name)]
['scale']
"""
from __future__ import annotations

from ..._pending import missing_names

__all__ = ["find_op_index", "find_true_post_op", "find_true_prev_op"]


def find_true_prev_op(ops, cur_op, var_name: str):
    """The one op before `cur_op` in `ops` that writes `var_name`, or None; two such ops are
    a ValueError (the rewrite needs one producer)."""
    writers = []
    for op in ops:
        if op is cur_op:
            break
        if var_name in op.output_arg_names:
            writers.append(op)
    if len(writers) > 1:
        raise ValueError(f"There must be only one previous op that outputs {var_name} "
                         f"variable, found {len(writers)}: {[o.type for o in writers]}")
    return writers[0] if writers else None


def find_true_post_op(ops, cur_op, var_name: str):
    """The ops after `cur_op` in `ops` that read `var_name`, or None when there is none."""
    ops = list(ops)
    start = next((i for i, op in enumerate(ops) if op is cur_op), len(ops) - 1)
    readers = [op for op in ops[start + 1:] if var_name in op.input_arg_names]
    return readers or None


def find_op_index(block, cur_op) -> int:
    """The index of `cur_op` in `block` (a Block, or anything with `.ops`), or -1."""
    ops = list(getattr(block, "ops", block))
    return next((i for i, op in enumerate(ops) if op is cur_op), -1)


missing_names(globals(), ["rewrite_program", "update_loss_scaling", "update_role_var_grad"])
