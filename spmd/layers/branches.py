"""fluid.layers branches over sub-blocks: ConditionalBlock (the block runs when its condition
holds), cond, case and switch_case (a chain of conds whose results select_input merges),
Switch (the first case that holds) and IfElse (dense: rows chosen by a [N, 1] bool mask).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.layers.fill_constant([1], "float32", 1.0)
...     y = fluid.layers.fill_constant([1], "float32", 2.0)
...     z = fluid.layers.cond(x < y, lambda: x * 2, lambda: y - 1)
"""
from __future__ import annotations

import functools

from ..core.program import default_main_program
from ..core.unique_name import generate
from ..errors import InvalidArgumentError
from .helper import LayerHelper
from .logic import equal, logical_and, logical_not
from .sub_block import (
    BlockGuard,
    ControlFlowTypeError,
    _check_var,
    _flatten,
    _pack,
    _same_structure,
    body_interface,
    reads_fed_lod,
)
from .tensor import assign, cast, fill_constant

__all__ = ["IfElse", "Switch", "case", "cond", "switch_case"]


# -- conditional blocks ---------------------------------------------------------------------------

class ConditionalBlock:
    """Run the ops of `with cb.block():` when the condition holds: `inputs[0]` true for
    `is_scalar_condition`, else every tensor in `inputs` non-empty (fluid's rule)."""

    def __init__(self, inputs, is_scalar_condition=False, name=None):
        for v in inputs:
            _check_var(v, "each input", "ConditionalBlock")
        self.inputs = list(inputs)
        self.is_scalar_condition = bool(is_scalar_condition)
        self.helper = LayerHelper("conditional_block", name=name)

    def block(self) -> BlockGuard:
        return BlockGuard(self.helper.main_program, self.complete)

    def complete(self, body):
        inputs, outputs = body_interface(body, "conditional_block")
        body.parent_block.append_op(
            "conditional_block", {"Cond": self.inputs, "Input": inputs}, {"Out": outputs},
            {"sub_block": body.idx, "is_scalar_condition": self.is_scalar_condition,
             "input_names": inputs, "out_names": outputs})


def _copy_to_parent(var):
    if var is None:
        return None
    _check_var(var, "every value a branch returns", "fluid.layers.cond")
    program = default_main_program()
    parent = program.current_block().parent_block
    out = parent.create_var(name=generate("cond.tmp"), dtype=var.dtype, shape=var.shape,
                            type=var.type)
    assign(var, out)
    return out


def _branch(pred, fn, what: str):
    if not callable(fn):
        raise ControlFlowTypeError(
            f"fluid.layers.cond: {what} must be callable, got {type(fn).__name__}")
    block = ConditionalBlock([pred], is_scalar_condition=True)
    with block.block():
        out = fn()
        return None if out is None else _pack(out, [_copy_to_parent(v) for v in _flatten(out)])


def cond(pred, true_fn=None, false_fn=None, name=None):
    """true_fn() if `pred` (a bool [1] Variable) else false_fn(); each runs in its own block,
    only the chosen one runs, and their results (the same structure) are merged.

    >>> # y = fluid.layers.cond(x < y, lambda: x * 2, lambda: y - 1)
    """
    _check_var(pred, "pred", "fluid.layers.cond", {"bool"})
    if name is not None and not isinstance(name, str):
        raise ControlFlowTypeError("fluid.layers.cond: name must be a str or None")
    true_out = false_out = None
    if true_fn is not None:
        true_out = _branch(pred, true_fn, "true_fn")
    if false_fn is not None:
        false_out = _branch(logical_not(pred), false_fn, "false_fn")
    if true_out is None and false_out is None:
        return None
    if true_out is None or false_out is None:
        which = "true_fn" if true_out is None else "false_fn"
        raise InvalidArgumentError(
            f"Incompatible return values of true_fn and false_fn in cond: {which} returns None "
            f"while the other returns a value")
    if not _same_structure(true_out, false_out):
        raise InvalidArgumentError(
            "Incompatible return values of true_fn and false_fn in cond: they return "
            "different structures")
    mask = cast(pred, "int32")
    merged = [select_input([f, t], mask)
              for f, t in zip(_flatten(false_out), _flatten(true_out))]
    return _pack(true_out, merged)


def _check_list(value, what: str, where: str):
    if not isinstance(value, (list, tuple)):
        raise ControlFlowTypeError(
            f"{where}: {what} must be a list or tuple of Variables, got {type(value).__name__}")


def select_input(inputs, mask):
    """inputs[mask] (mask an int32 [1] Variable): which branch's value to use."""
    _check_list(inputs, "inputs", "select_input")
    _check_var(mask, "mask", "select_input", {"int32"})
    helper = LayerHelper("select_input")
    first = inputs[0]
    out = helper.create_variable(generate("select_input.out"), dtype=first.dtype,
                                 shape=first.shape, type=first.type)
    helper.append_op("select_input", {"X": list(inputs), "Mask": [mask]}, {"Out": [out]})
    return out


def select_output(input, outputs, mask):
    """Copy `input` to outputs[mask] (mask an int32 [1] Variable), as fluid's select_output;
    returns `outputs`. Its gradient is select_input's over the outputs' gradients."""
    _check_var(input, "input", "select_output")
    _check_var(mask, "mask", "select_output", {"int32"})
    _check_list(outputs, "outputs", "select_output")
    LayerHelper("select_output").append_op(
        "select_output", {"X": [input], "Mask": [mask]}, {"Out": list(outputs)})
    return outputs


def split_lod_tensor(input, mask, level=0):
    """The rows of `input` where the [N, 1] bool `mask` holds, and the others (fluid's
    split_lod_tensor, IfElse's input split): (out_true, out_false). Given a LoD input, the
    mask holds one bool per sequence of LoD level `level`, and the outputs keep the chosen
    sequences (with their sub-sequences) and their LoD."""
    _check_var(input, "input", "fluid.layers.split_lod_tensor")
    _check_var(mask, "mask", "fluid.layers.split_lod_tensor")
    if not isinstance(level, int) or isinstance(level, bool):
        raise ControlFlowTypeError(
            f"fluid.layers.split_lod_tensor: level must be an int, got {type(level).__name__}")
    reads_fed_lod(input, level + 1)  # a fed input's sequences are split, as fluid's
    helper = LayerHelper("split_lod_tensor")
    out_true = helper.create_variable_for_type_inference(input.dtype)
    out_false = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("split_lod_tensor", {"X": [input], "Mask": [mask]},
                     {"OutTrue": [out_true], "OutFalse": [out_false]}, {"level": level})
    return out_true, out_false


def merge_lod_tensor(in_true, in_false, x, mask, level=0):
    """split_lod_tensor undone: rows of in_true where `mask` holds, of in_false elsewhere, in
    x's row order (fluid's merge_lod_tensor, IfElse's output merge)."""
    where = "fluid.layers.merge_lod_tensor"
    for value, what in ((x, "x"), (mask, "mask"), (in_true, "in_true"), (in_false, "in_false")):
        _check_var(value, what, where)
    reads_fed_lod(x, level + 1)
    helper = LayerHelper("merge_lod_tensor")
    out = helper.create_variable_for_type_inference(in_true.dtype)
    helper.append_op("merge_lod_tensor",
                     {"X": [x], "Mask": [mask], "InTrue": [in_true], "InFalse": [in_false]},
                     {"Out": [out]}, {"level": level})
    return out


def case(pred_fn_pairs, default=None, name=None):
    """The fn of the first (pred, fn) pair whose pred is true, else default() (else the last
    pair's fn), as an if-elif-else chain of cond.

    >>> # out = fluid.layers.case([(x < y, f1), (x == y, f2)], default=f3)
    """
    if not isinstance(pred_fn_pairs, (list, tuple)):
        raise ControlFlowTypeError("case: pred_fn_pairs must be a list or tuple")
    for pair in pred_fn_pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ControlFlowTypeError(
                f"case: each element of pred_fn_pairs must be a (pred, fn) tuple, got {pair!r}")
        pred, fn = pair
        _check_var(pred, "each pred", "case", {"bool"})
        if not callable(fn):
            raise ControlFlowTypeError(f"case: the fn for {pred.name} must be callable")
    pairs = list(pred_fn_pairs)
    if default is None:
        if not pairs:
            raise InvalidArgumentError("case: pred_fn_pairs is empty and there is no default")
        default = pairs.pop()[1]
    elif not callable(default):
        raise ControlFlowTypeError("case: default must be callable")
    fn = default
    for pred, true_fn in reversed(pairs):
        fn = functools.partial(cond, pred, true_fn, fn)
    return fn()


def switch_case(branch_index, branch_fns, default=None, name=None):
    """branch_fns[branch_index]() (a dict or (index, fn) pairs or a list of fns), else
    default() (else the fn of the largest index).

    >>> # out = fluid.layers.switch_case(i, {1: f1, 2: f2}, default=f3)
    """
    _check_var(branch_index, "branch_index", "switch_case", {"uint8", "int32", "int64"})
    if branch_index.dtype != "int64":
        branch_index = cast(branch_index, "int64")
    if not isinstance(branch_fns, (list, tuple, dict)):
        raise ControlFlowTypeError("switch_case: branch_fns must be a dict, list or tuple")
    pairs = list(branch_fns.items()) if isinstance(branch_fns, dict) else list(branch_fns)
    if pairs and all(callable(f) for f in pairs):
        pairs = list(enumerate(pairs))
    keys = set()
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ControlFlowTypeError(
                f"switch_case: each element of branch_fns must be an (index, fn) tuple, got "
                f"{pair!r}")
        key, fn = pair
        if not isinstance(key, int) or isinstance(key, bool):
            raise ControlFlowTypeError(f"switch_case: the index {key!r} must be an int")
        if key in keys:
            raise InvalidArgumentError(f"switch_case: the index {key} appears more than once")
        keys.add(key)
        if not callable(fn):
            raise ControlFlowTypeError(f"switch_case: the fn for index {key} must be callable")
    pairs.sort(key=lambda p: p[0])
    if default is None:
        if not pairs:
            raise InvalidArgumentError("switch_case: branch_fns is empty and there is no default")
        default = pairs.pop()[1]
    elif not callable(default):
        raise ControlFlowTypeError("switch_case: default must be callable")
    fn = default
    for key, true_fn in pairs:  # fluid nests them in this order: the first key is outermost
        pred = equal(branch_index, fill_constant([1], "int64", key))
        fn = functools.partial(cond, pred, true_fn, fn)
    return fn()


# -- Switch -----------------------------------------------------------------------------------

class Switch:
    """`with Switch() as s:` then `with s.case(cond):` blocks and `with s.default():`: the
    first case whose condition holds runs (conditions are bool [1] Variables).

    >>> # with fluid.layers.Switch() as switch:
    >>> #     with switch.case(step < warmup): fluid.layers.assign(lr_a, lr)
    >>> #     with switch.default(): fluid.layers.assign(lr_b, lr)
    """

    def __init__(self, name=None):
        self.helper = LayerHelper("switch", name=name)
        self.inside_scope = False
        self.pre_not_conditions: list = []

    def case(self, condition) -> BlockGuard:
        if not self.inside_scope:
            raise InvalidArgumentError("Switch.case must be used inside `with Switch() as s:`")
        _check_var(condition, "condition", "Switch.case", {"bool"})
        if not self.pre_not_conditions:
            block = ConditionalBlock([condition], is_scalar_condition=True)
            self.pre_not_conditions.append(logical_not(condition))
        else:
            previous = self.pre_not_conditions[-1]
            self.pre_not_conditions.append(logical_and(previous, logical_not(condition)))
            block = ConditionalBlock([logical_and(previous, condition)],
                                     is_scalar_condition=True)
        return block.block()

    def default(self) -> BlockGuard:
        if not self.pre_not_conditions:
            raise InvalidArgumentError("Switch.default needs at least one Switch.case before it")
        return ConditionalBlock([self.pre_not_conditions[-1]],
                                is_scalar_condition=True).block()

    def __enter__(self):
        self.inside_scope = True
        return self

    def __exit__(self, exc_type, exc, tb):
        self.inside_scope = False
        return False


# -- IfElse -----------------------------------------------------------------------------------

class IfElse:
    """Rows where `cond` (bool [N, 1]) is true go through `true_block()`, the others through
    `false_block()`; `ie()` merges the blocks' outputs back into row order. Inside a block,
    `ie.input(x)` is that block's rows of x and `ie.output(*vars)` its results.

    >>> # ie = fluid.layers.IfElse(x > 0)
    >>> # with ie.true_block(): ie.output(ie.input(x) * 2)
    >>> # with ie.false_block(): ie.output(ie.input(x) - 1)
    >>> # y, = ie()
    """

    OUT_IF_ELSE_BLOCKS, IN_IF_ELSE_TRUE_BLOCKS, IN_IF_ELSE_FALSE_BLOCKS = 0, 1, 2

    def __init__(self, cond, name=None):
        _check_var(cond, "cond", "fluid.layers.IfElse", {"bool"})
        self.helper = LayerHelper("ifelse", name=name)
        self.cond = cond
        self.input_table: dict = {}
        self.status = IfElse.OUT_IF_ELSE_BLOCKS
        self.output_table: tuple = ([], [])  # (false outputs, true outputs)

    def _parent_block(self):
        return self.helper.main_program.current_block().parent_block

    def input(self, x):
        if self.status == IfElse.OUT_IF_ELSE_BLOCKS:
            raise InvalidArgumentError("IfElse.input must be called inside true_block() or "
                                       "false_block()")
        _check_var(x, "x", "IfElse.input")
        if x.name not in self.input_table:
            parent = self._parent_block()
            shape = (-1, *x.shape[1:])
            out_true = parent.create_var(name=generate(f"ifelse_input{self.helper.name}"),
                                         dtype=x.dtype, shape=shape)
            out_false = parent.create_var(name=generate(f"ifelse_input{self.helper.name}"),
                                          dtype=x.dtype, shape=shape)
            parent.append_op("split_lod_tensor", {"X": [x], "Mask": [self.cond]},
                             {"OutTrue": [out_true], "OutFalse": [out_false]}, {"level": 0})
            self.input_table[x.name] = (out_true, out_false)
        out_true, out_false = self.input_table[x.name]
        return out_true if self.status == IfElse.IN_IF_ELSE_TRUE_BLOCKS else out_false

    def _guard(self, is_true: bool):
        if self.status != IfElse.OUT_IF_ELSE_BLOCKS:
            raise InvalidArgumentError("IfElse: a block cannot be opened inside another")
        ie = self
        block = ConditionalBlock([self.cond])

        class Guard(BlockGuard):
            def __enter__(self):
                ie.status = (IfElse.IN_IF_ELSE_TRUE_BLOCKS if is_true
                             else IfElse.IN_IF_ELSE_FALSE_BLOCKS)
                return super().__enter__()

            def __exit__(self, exc_type, exc, tb):
                ie.status = IfElse.OUT_IF_ELSE_BLOCKS
                if exc_type is None and not ie.output_table[1 if is_true else 0]:
                    super().__exit__(exc_type, exc, tb)
                    raise InvalidArgumentError(
                        "IfElse: each block must call ie.output(...) with its results")
                return super().__exit__(exc_type, exc, tb)

        return Guard(self.helper.main_program, block.complete)

    def true_block(self):
        return self._guard(True)

    def false_block(self):
        return self._guard(False)

    def output(self, *outs):
        if self.status == IfElse.OUT_IF_ELSE_BLOCKS:
            raise InvalidArgumentError("IfElse.output must be called inside a block")
        table = self.output_table[1 if self.status == IfElse.IN_IF_ELSE_TRUE_BLOCKS else 0]
        parent = self._parent_block()
        for v in outs:
            _check_var(v, "each output", "IfElse.output")
            outside = parent.create_var(name=generate(f"{self.helper.name}_output"),
                                        dtype=v.dtype, shape=v.shape)
            assign(v, outside)
            table.append(outside)

    def __call__(self):
        if self.status != IfElse.OUT_IF_ELSE_BLOCKS:
            raise InvalidArgumentError("IfElse() must be called outside its blocks")
        false_outs, true_outs = self.output_table
        if not false_outs and not true_outs:
            raise InvalidArgumentError("IfElse: call true_block()/false_block() before ie()")
        if false_outs and true_outs and len(false_outs) != len(true_outs):
            raise InvalidArgumentError(
                f"IfElse: the true block has {len(true_outs)} outputs and the false block "
                f"{len(false_outs)}; they must match")
        if not false_outs or not true_outs:
            return list(true_outs or false_outs)
        helper = LayerHelper("merge_lod_tensor")
        merged = []
        for f, t in zip(false_outs, true_outs):
            out = helper.create_variable_for_type_inference(t.dtype)
            helper.append_op("merge_lod_tensor",
                             {"X": [self.cond], "Mask": [self.cond], "InTrue": [t],
                              "InFalse": [f]}, {"Out": [out]}, {"level": 0})
            merged.append(out)
        return merged
