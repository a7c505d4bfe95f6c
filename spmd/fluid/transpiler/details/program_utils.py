"""fluid.transpiler.details.program_utils: finding and deleting ops, and fluid's readable
listing of a program (program_to_code, block_to_code, op_to_code, variable_to_code).

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32")
...     y = fluid.layers.relu(x)
>>> block = main.global_block()
>>> find_op_by_output_arg(block, y.name), find_op_by_input_arg(block, "x")
(0, 0)
>>> op_to_code(main.global_block().ops[0]).split(" = ")[0]
"{Out=['relu_0.tmp_0']}"
"""
from __future__ import annotations

import sys

from ....core.variable import Parameter

__all__ = ["block_to_code", "delete_ops", "find_op_by_input_arg", "find_op_by_output_arg",
           "get_indent_space", "op_to_code", "program_to_code", "variable_to_code"]


def delete_ops(block, ops) -> None:
    """Remove each of `ops` from `block` (one not in it is reported and skipped, as in fluid)."""
    for op in ops:
        try:
            block._remove_op(list(block.ops).index(op))
        except ValueError as exc:
            print(exc)


def find_op_by_input_arg(block, arg_name: str) -> int:
    """The index of the first op reading `arg_name`, or -1."""
    return next((i for i, op in enumerate(block.ops) if arg_name in op.input_arg_names), -1)


def find_op_by_output_arg(block, arg_name: str, reverse: bool = False) -> int:
    """The index of the first (last, with reverse) op writing `arg_name`, or -1."""
    indexed = list(enumerate(block.ops))
    for i, op in reversed(indexed) if reverse else indexed:
        if arg_name in op.output_arg_names:
            return i
    return -1


def get_indent_space(indent: int, space_num: int = 4) -> str:
    return " " * (indent * space_num)


def variable_to_code(var) -> str:
    """`[persist ][trainable ]parameter|var name : fluid.TYPE.shape(..).astype(dtype)`."""
    text = f"{var.name} : fluid.{var.type}"
    if var.type in ("LOD_TENSOR", "SELECTED_ROWS"):
        text += f".shape{tuple(var.shape)}.astype({var.dtype})"
    if isinstance(var, Parameter):
        text = ("trainable parameter " if var.trainable else "parameter ") + text
    else:
        text = "var " + text
    return ("persist " + text) if var.persistable else text


def _slots(names, get) -> str:
    return "{" + ", ".join(f"{n}={get(n)}" for n in names) + "}"


def op_to_code(op, skip_op_callstack: bool = True) -> str:
    """`{Out=[...]} = type(inputs={X=[...]}, attr = value, ...)`."""
    attrs = []
    for name in sorted(op.attr_names):
        if skip_op_callstack and name == "op_callstack":
            continue
        kind = op._block_attr_kinds().get(name) if hasattr(op, "_block_attr_kinds") else None
        if kind == "block":  # fluid prints a block attribute as its index
            attrs.append(f"{name} = block[{op._block_attr_id(name)}]")
        elif kind == "blocks":
            attrs.append(f"{name} = blocks{op._blocks_attr_ids(name)}")
        else:
            attrs.append(f"{name} = {op.attr(name)}")
    inputs = _slots(op.input_names, op.input)
    outputs = _slots(op.output_names, op.output)
    call = f"{op.type}(inputs={inputs}, {', '.join(attrs)})"
    return f"{outputs} = {call}" if outputs != "{}" else call


def block_to_code(block, block_idx: int, fout=None, skip_op_callstack: bool = False) -> None:
    """Print `block`'s variables (sorted by name) and ops to `fout` (stdout)."""
    fout = fout or sys.stdout
    print(f"{{ // block {block_idx}", file=fout)
    names = sorted(block.vars)
    for name in names:
        print(get_indent_space(1) + variable_to_code(block.vars[name]), file=fout)
    if names:
        print("", file=fout)
    for op in block.ops:
        print(get_indent_space(1) + op_to_code(op, skip_op_callstack), file=fout)
    print("}", file=fout)


def program_to_code(prog, fout=None, skip_op_callstack: bool = True) -> None:
    """Print every block of `prog`."""
    for idx, block in enumerate(prog.blocks):
        block_to_code(block, idx, fout, skip_op_callstack)
