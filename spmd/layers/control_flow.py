"""fluid.layers control flow on sub-blocks: While, while_loop, cond, case, switch_case, Switch,
IfElse (dense: rows chosen by a [N, 1] bool mask) and ConditionalBlock, gathered here under
fluid's module name: loops in loops.py, branches in branches.py, what they share in
sub_block.py; StaticRNN is in static_rnn.py, tensor arrays and is_empty in tensor_array.py.

The ops a body's layers append go into a sub-block (Program._create_block); when the body
ends, one op in the enclosing block runs it: `while`, `conditional_block` or `recurrent`, its
inputs the values the body reads from outside it (in order of first read), its outputs the
outside variables the body writes.

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     i = fluid.layers.fill_constant([1], "int64", 0)
...     ten = fluid.layers.fill_constant([1], "int64", 10)
...     i, = fluid.layers.while_loop(lambda i: i < ten, lambda i: [i + 1], [i])
"""
from __future__ import annotations

# ConditionalBlock, select_input and the sub_block names: importable from here, as before the
# split (static_rnn, tensor_array, dynamic_rnn and decode import some of them)
from .branches import (  # noqa: F401
    ConditionalBlock,
    IfElse,
    Switch,
    case,
    cond,
    select_input,
    switch_case,
)
from .loops import While, while_loop
from .sub_block import (  # noqa: F401
    BlockGuard,
    ControlFlowTypeError,
    _check_var,
    block_io,
    body_interface,
)

__all__ = ["IfElse", "Switch", "While", "case", "cond", "switch_case", "while_loop"]
