"""Which gradients are sparse (SelectedRows): an embedding's table gradient with
is_sparse=True, and a sum of such gradients only (one table looked up twice). The
data-parallel passes gather these (c_allgather_rows) instead of reducing them densely."""
from __future__ import annotations

from collections import defaultdict

from ..core.operator import OpRole
from .common import last_writer, make_op, place_after

_SPARSE_GRAD_OPS = ("lookup_table_grad", "lookup_table_v2_grad")


def sparse_gradients(program) -> set[str]:
    """Names of the global block's variables that hold SelectedRows when written."""
    sparse: set[str] = set()
    dense: set[str] = set()
    for op in program.global_block().ops:
        if op.type in _SPARSE_GRAD_OPS and op.attrs.get("is_sparse"):
            made = set(op.output("W@GRAD"))
        elif op.type == "sum" and op.input("X") and all(n in sparse for n in op.input("X")):
            made = set(op.output("Out"))
        else:
            dense.update(op.output_arg_names)
            continue
        sparse.update(made)
    return sparse - dense


def gather_sparse_gradients(program, params_grads) -> list:
    """Insert a c_allgather_rows right after the last writer of each sparse gradient in
    `params_grads`; returns the (param, grad) pairs left, the dense ones. Every rank then
    applies the whole sparse gradient to its own copy of the table (the same update on the
    same values), so the table is neither reduced densely nor sharded in Reduce mode."""
    sparse = sparse_gradients(program)
    block = program.global_block()
    last = last_writer(block)
    after = defaultdict(list)
    for _, grad in params_grads:
        if grad in sparse:
            after[last[grad]].append(make_op(block, "c_allgather_rows", {"X": [grad]},
                                             {"Out": [grad]}, {}, OpRole.COMMUNICATE))
    if after:
        place_after(block, after)
    return [(p, g) for p, g in params_grads if g not in sparse]
