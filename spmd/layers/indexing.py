"""`var[...]` on a Variable, as fluid 1.8's Variable.__getitem__: basic indexing appends a
`slice` op (a `strided_slice` op when a step is not 1) and a `reverse` op for `[::-1]`.

Per dimension, in order: an int (or an int Variable) picks one entry and drops the axis, as
numpy does (a result with no axis left keeps shape [1], as fluid does); a slice keeps the
axis; `:` leaves it alone. Dimensions not named are kept whole. Ellipsis and None (numpy's
newaxis) are not fluid 1.8 indexing: they are refused with what to use instead.

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [-1, 4, 6], "float32")
...     x[:, 1:3, ::2].shape, x[0].shape, x[:, -1, 2].shape
((-1, 2, 3), (4, 6), (-1,))
"""
from __future__ import annotations

import operator

from ..core.program import default_main_program, program_guard
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper
from .tensor import fill_constant, int_tensor_inputs

__all__ = ["getitem"]

_TO_THE_END = 10000000  # fluid's "no end" bound: clamped to the axis length by the op


def _bad(var: Variable, item, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{var.name}[{item!r}]: {why}. fluid 1.8 indexes a Variable with ints, int "
        f"Variables and slices, one per leading dimension (x[0], x[:, 1:3], x[::-1]); use "
        f"fluid.layers.unsqueeze / reshape / gather for the rest")


def _index_end(helper: LayerHelper, index: Variable) -> Variable:
    """index + 1, an int Variable: the end of a one-entry slice starting at `index`."""
    one = fill_constant([1], index.dtype, 1, force_cpu=True)
    end = helper.create_variable_for_type_inference(index.dtype)
    helper.append_op("elementwise_add", {"X": [index], "Y": [one]}, {"Out": [end]},
                     {"axis": -1})
    end.stop_gradient = True
    return end


def _as_int(value):
    """An int for Python and numpy integers (not bools); the value itself otherwise."""
    if isinstance(value, bool) or isinstance(value, Variable):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value


def _parse(var: Variable, items: tuple, helper: LayerHelper):
    """(axes, starts, ends, steps, decrease_axis, reverse_axis) of the index `items`."""
    axes, starts, ends, steps, decrease, reverse = [], [], [], [], [], []
    if len(items) > len(var.shape):
        raise _bad(var, items, f"{len(items)} indices for a Variable of {len(var.shape)} "
                               f"dimensions {list(var.shape)}")
    for dim, item in enumerate(items):
        if item is Ellipsis or item is None:
            raise _bad(var, items, "Ellipsis (...) and None (newaxis) are not supported")
        if isinstance(item, slice):
            start, end, step = (_as_int(v) for v in (item.start, item.stop, item.step))
            if start is None and end is None and step in (None, 1):
                continue
            step = 1 if step is None else step
            if start is None and end is None and step == -1:
                reverse.append(dim)
                continue
            if not all(isinstance(v, (int, Variable)) or v is None for v in (start, end)) \
                    or not isinstance(step, int) or step == 0:
                raise _bad(var, items, f"slice {item} of dimension {dim}: bounds must be ints "
                                       f"or int Variables and the step a nonzero int")
            if step < 0 and (start is None or end is None):
                raise _bad(var, items, f"slice {item} of dimension {dim}: a negative step "
                                       f"needs both bounds (or [::-1] to reverse)")
            axes.append(dim)
            starts.append(0 if start is None else start)
            ends.append(_TO_THE_END if end is None else end)
            steps.append(step)
        elif isinstance(_as_int(item), (int, Variable)) and not isinstance(item, bool):
            item = _as_int(item)
            axes.append(dim)
            decrease.append(dim)
            starts.append(item)
            steps.append(1)
            if isinstance(item, Variable):
                ends.append(_index_end(helper, item))
            else:
                ends.append(item + 1 if item != -1 else _TO_THE_END)
        else:
            raise _bad(var, items, f"index {item!r} of dimension {dim} is a "
                                   f"{type(item).__name__}")
    return axes, starts, ends, steps, decrease, reverse


def getitem(var: Variable, item) -> Variable:
    """var[item]: see the module docstring.

    >>> # x[:, 0]   # x [N, 3] -> [N]
    """
    items = item if isinstance(item, tuple) else (item,)
    main = var.block.program
    if main is not default_main_program():  # fluid appends to the Variable's own program
        with program_guard(main):
            return getitem(var, item)
    helper = LayerHelper("slice")
    axes, starts, ends, steps, decrease, reverse = _parse(var, items, helper)
    out = var
    if axes:
        strided = any(s != 1 for s in steps)
        op_type = "strided_slice" if strided else "slice"
        inputs: dict = {"Input": [var]}
        attrs: dict = {"axes": axes, "decrease_axis": decrease}
        flags = [1] * len(axes)
        bounds = [("starts", starts), ("ends", ends)] + ([("strides", steps)] if strided else [])
        for key, values in bounds:
            attr, tensors = int_tensor_inputs(helper, values, key)
            if tensors is not None:
                inputs[f"{key.capitalize()}TensorList"] = tensors
                flags = [-1 if isinstance(v, Variable) else f for v, f in zip(values, flags)]
            attrs[key] = attr
        attrs["infer_flags"] = flags
        out = helper.create_variable_for_type_inference(var.dtype)
        helper.append_op(op_type, inputs, {"Out": [out]}, attrs)
    if reverse:
        reversed_out = helper.create_variable_for_type_inference(var.dtype)
        helper.append_op("reverse", {"X": [out]}, {"Out": [reversed_out]}, {"axis": reverse})
        out = reversed_out
    return out


def _not_iterable(var: Variable):
    # with __getitem__ alone, Python would iterate a Variable by indexing 0, 1, 2, ... and
    # never stop on a dimension of unknown size (fluid 1.8 loops so); say so instead
    raise TypeError(
        f"a Variable ({var.name}, shape {list(var.shape)}) is not iterable: it holds no values "
        f"while the program is built. Index it (x[0], x[:, 1]) or split it "
        f"(fluid.layers.split / unstack)")


def install() -> None:
    """Variable.__getitem__ = getitem, and iteration refused (called once by spmd.layers)."""
    Variable.__getitem__ = getitem
    Variable.__iter__ = _not_iterable
