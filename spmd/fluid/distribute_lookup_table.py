"""fluid.distribute_lookup_table: the program's distributed lookup table (the one
`lookup_table` with is_distributed=True) and its inputs and outputs.

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     ids = fluid.data("ids", [None, 1], "int64")
...     emb = fluid.layers.embedding(ids, [100, 8], is_distributed=True,
...                                  param_attr=fluid.ParamAttr(name="table"))
>>> find_distributed_lookup_table(main)
'table'
>>> [v.name for v in find_distributed_lookup_table_inputs(main, "table")]
['ids']
"""
from __future__ import annotations

__all__ = ["find_distributed_lookup_table", "find_distributed_lookup_table_inputs",
           "find_distributed_lookup_table_outputs"]

LOOKUP_TABLE_TYPE = "lookup_table"


def _lookups(program, table_name: str):
    return [op for op in program.global_block().ops
            if op.type == LOOKUP_TABLE_TYPE and op.input("W")[0] == table_name]


def find_distributed_lookup_table_inputs(program, table_name: str) -> list:
    """The Ids variables of the lookups of `table_name`."""
    local = program.current_block().vars
    return [local[n] for op in _lookups(program, table_name) for n in op.input("Ids")]


def find_distributed_lookup_table_outputs(program, table_name: str) -> list:
    """The Out variables of the lookups of `table_name`."""
    local = program.current_block().vars
    return [local[n] for op in _lookups(program, table_name) for n in op.output("Out")]


def find_distributed_lookup_table(program):
    """The name of the one distributed table, or None; every lookup of it must be
    distributed, and there may be only one (fluid 1.8's rule)."""
    table = None
    for op in program.global_block().ops:
        if op.type != LOOKUP_TABLE_TYPE:
            continue
        name = op.input("W")[0]
        if op.attrs.get("is_distributed"):
            if table is None:
                table = name
            elif table != name:
                raise RuntimeError("all distributed lookup_table_ops should have only one "
                                   f"table, found {table} and {name}")
        elif table is not None and name == table:
            raise RuntimeError(f"all lookup_table of {table} should be distributed")
    return table
