"""fluid.layers loops over a sub-block: While (`with loop.block():`) and while_loop (body and
condition as functions). StaticRNN is in static_rnn.py, DynamicRNN in dynamic_rnn.py.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     i = fluid.layers.fill_constant([1], "int64", 0)
...     ten = fluid.layers.fill_constant([1], "int64", 10)
...     i, = fluid.layers.while_loop(lambda i: i < ten, lambda i: [i + 1], [i])
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .helper import LayerHelper
from .sub_block import (
    BlockGuard,
    ControlFlowTypeError,
    _check_scalar_bool,
    _check_var,
    _flatten,
    _pack,
    _same_structure,
    body_interface,
)
from .tensor import assign

__all__ = ["While", "while_loop"]


class While:
    """Repeat the ops of `with loop.block():` while `cond` (a bool [1] Variable, which the body
    updates) is true.

    >>> import spmd.fluid as fluid
    >>> with fluid.program_guard(fluid.Program(), fluid.Program()):
    ...     i = fluid.layers.fill_constant([1], "int64", 0)
    ...     n = fluid.layers.fill_constant([1], "int64", 10)
    ...     c = fluid.layers.less_than(i, n)
    ...     loop = fluid.layers.While(c)
    ...     with loop.block():
    ...         i = fluid.layers.increment(i, 1, in_place=True)
    ...         _ = fluid.layers.less_than(i, n, cond=c)
    """

    BEFORE_WHILE_BLOCK, IN_WHILE_BLOCK, AFTER_WHILE_BLOCK = 0, 1, 2

    def __init__(self, cond, is_test=False, name=None):
        self.helper = LayerHelper("while", name=name)
        self.cond_var = _check_scalar_bool(cond, "cond", "fluid.layers.While")
        self.is_test = bool(is_test)
        self.status = While.BEFORE_WHILE_BLOCK

    def block(self) -> BlockGuard:
        self.status = While.IN_WHILE_BLOCK
        return BlockGuard(self.helper.main_program, self._complete)

    def _complete(self, body):
        self.status = While.AFTER_WHILE_BLOCK
        cond = self.cond_var.name
        inputs, outputs = body_interface(body, "fluid.layers.While")
        x = [n for n in inputs if n != cond]
        if cond not in outputs:
            raise InvalidArgumentError(
                f"fluid.layers.While: the loop body never updates its condition '{cond}', so "
                f"it would run forever; write it in the body, e.g. "
                f"fluid.layers.less_than(i, n, cond={cond})")
        body.parent_block.append_op(
            "while", {"X": x, "Condition": [cond]}, {"Out": outputs},
            {"sub_block": body.idx, "is_test": self.is_test, "x_names": x,
             "out_names": outputs, "cond_name": cond})



def while_loop(cond, body, loop_vars, is_test=False, name=None):
    """Run `body(*loop_vars)` while `cond(*loop_vars)` (a bool [1] Variable) is true; `body`
    returns new values of the same structure. Returns the loop variables (updated in place).

    >>> # i, x = fluid.layers.while_loop(lambda i, x: i < n, lambda i, x: [i + 1, x * 2], [i, x])
    """
    if not callable(cond):
        raise ControlFlowTypeError("while_loop: cond must be callable")
    if not callable(body):
        raise ControlFlowTypeError("while_loop: body must be callable")
    if not isinstance(loop_vars, (list, tuple)):
        raise ControlFlowTypeError(
            f"while_loop: loop_vars must be a list or tuple, got {type(loop_vars).__name__}")
    if len(loop_vars) == 0:
        raise InvalidArgumentError("while_loop: loop_vars is empty")
    pre_cond = cond(*loop_vars)
    _check_scalar_bool(pre_cond, "the value cond returns", "while_loop")
    loop = While(pre_cond, is_test, name)
    with loop.block():
        # a copy of the lists and dicts among loop_vars (the same Variables): a body that
        # rebinds their items in place leaves loop_vars as they were, so the assigns below
        # write the loop's own variables (fluid 1.8.5's copy_mutable_vars)
        outputs = body(*_pack(list(loop_vars), _flatten(list(loop_vars))))
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        if not _same_structure(list(outputs), list(loop_vars)):
            raise InvalidArgumentError(
                f"while_loop: body must return the same structure as loop_vars ({len(loop_vars)}"
                f" values), got {len(outputs)}")
        now_cond = cond(*outputs)
        _check_scalar_bool(now_cond, "the value cond returns", "while_loop")
        for new, old in zip(_flatten(list(outputs)), _flatten(list(loop_vars))):
            _check_var(new, "every value body returns", "while_loop")
            assign(new, old)
        assign(now_cond, pre_cond)
    return loop_vars

