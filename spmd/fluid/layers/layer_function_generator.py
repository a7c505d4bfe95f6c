"""fluid.layers.layer_function_generator: layer functions made from an op's definition
(generate_layer_fn, generate_activation_fn) and fluid's docstring decorators (autodoc,
templatedoc, deprecated). Keywords name the op's slots in snake case (X -> x, InputGrad ->
input_grad), as fluid's generator does; the first output slot is the result, the others
temporaries.

>>> import numpy as np
>>> import spmd.fluid as fluid
>>> softsign = generate_activation_fn("softsign")
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32")
...     y = softsign(x)
>>> y.dtype
'float32'
"""
from __future__ import annotations

import functools
import re
import warnings

from ...core.variable import Variable
from ...errors import InvalidArgumentError
from ...layers.helper import LayerHelper

__all__ = ["autodoc", "deprecated", "generate_activation_fn", "generate_layer_fn",
           "templatedoc"]


def _convert_(name: str) -> str:
    """CamelCase slot name -> snake_case keyword (X -> x, InputGrad -> input_grad)."""
    s1 = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z0-9])([A-Z])", r"\1_\2", s1).lower()


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def generate_layer_fn(op_type: str):
    """A layer function for `op_type`: inputs by slot keyword (or positionally, in slot
    order), `out=` an existing variable, other keywords the op's attributes."""
    from ...ops.registry import get_op_def

    opdef = get_op_def(op_type)
    if not opdef.outputs:
        raise InvalidArgumentError(f"generate_layer_fn: op '{op_type}' has no output")
    result, *temporaries = opdef.outputs

    def func(*args, **kwargs):
        args = list(args)
        helper = LayerHelper(op_type, **{k: kwargs[k] for k in ("name",) if k in kwargs})
        kwargs.pop("name", None)
        inputs, dtype = {}, None
        for slot in opdef.inputs:
            values = _as_list(kwargs.pop(_convert_(slot.name), []))
            if not values and args:
                values = _as_list(args.pop(0))
            if not values:
                continue
            for v in values:
                if not isinstance(v, Variable):
                    raise InvalidArgumentError(f"input of {op_type} must be variable, got "
                                               f"{type(v).__name__}")
                if dtype is None:
                    dtype = v.dtype
                elif v.dtype != dtype:
                    raise InvalidArgumentError(f"operator {op_type} must input same dtype. "
                                               f"{dtype} vs {v.dtype}")
            inputs[slot.name] = values
        dtype = dtype or kwargs.pop("dtype", "float32")
        out = kwargs.pop(_convert_(result.name), None)
        out = _as_list(out)[0] if out else helper.create_variable_for_type_inference(dtype)
        outputs = {result.name: [out]}
        for slot in temporaries:
            outputs[slot.name] = [helper.create_variable_for_type_inference(dtype)]
        helper.append_op(op_type, inputs, outputs, kwargs)
        return out

    func.__name__ = op_type
    func.__doc__ = f"The {op_type} op as a layer (made by generate_layer_fn)."
    return func


def generate_activation_fn(op_type: str):
    """`fn(x, name=None)`: the unary op `op_type` (X -> Out) applied to `x`."""
    def func(x, name=None):
        if not isinstance(x, Variable):
            raise InvalidArgumentError(f"{op_type}: x must be a Variable, got "
                                       f"{type(x).__name__}")
        helper = LayerHelper(op_type, name=name)
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(op_type, {"X": [x]}, {"Out": [out]}, {})
        return out

    func.__name__ = op_type
    func.__doc__ = f"{op_type} activation (made by generate_activation_fn)."
    return func


def autodoc(comment: str = ""):
    """Append `comment` to the decorated function's docstring (fluid fills it from the op's
    proto; spmd's ops carry their documentation in their layer functions)."""
    def decorator(func):
        func.__doc__ = (func.__doc__ or "") + comment
        return func

    return decorator


def templatedoc(op_type: str | None = None):
    """fluid fills ${comment}-style fields of the docstring from the op's proto; spmd keeps
    the docstring and drops the unfilled template fields."""
    def decorator(func):
        if func.__doc__:
            func.__doc__ = re.sub(r"\$\{[a-z_]+\}", "", func.__doc__)
        return func

    return decorator


def deprecated(func_or_class):
    """Warn (DeprecationWarning, naming it) each time the function or class is used."""
    @functools.wraps(func_or_class)
    def wrapper(*args, **kwargs):
        warnings.warn(f"Call to deprecated function {func_or_class.__name__}.",
                      category=DeprecationWarning, stacklevel=2)
        return func_or_class(*args, **kwargs)

    return wrapper
