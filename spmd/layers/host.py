"""fluid.layers: host builders: py_func (a Python function as an op, with its gradient from
backward_func) and Print (prints a tensor each time the op runs)."""
from __future__ import annotations

import itertools

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from ..ops.host import register_callable
from .helper import LayerHelper, check_variable

__all__ = ["Print", "py_func"]

_print_ids = itertools.count()


def _variables(value, what: str) -> list:
    if value is None:
        return []
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if not isinstance(v, Variable):
            raise InvalidArgumentError(
                f"py_func: {what} must be a Variable, a list of Variables or None, got "
                f"{type(v).__name__}")
    return values


def py_func(func, x, out, backward_func=None, skip_vars_in_backward_input=None):
    """Run `func` (numpy arrays in, arrays out) as an op; `out` are variables declared
    beforehand (their dtype is what results are cast to). With `backward_func`, the op has a
    gradient: backward_func(inputs, outputs, output gradients), minus the variables in
    `skip_vars_in_backward_input`, returns one gradient per input (None for none).

    >>> import spmd.fluid as fluid
    >>> import numpy as np
    >>> main = fluid.Program()
    >>> with fluid.program_guard(main):
    ...     x = fluid.data("x", [2], "float32")
    ...     y = main.global_block().create_var(name="y", shape=[2], dtype="float32")
    ...     _ = fluid.layers.py_func(np.tanh, x, y)
    """
    if not callable(func):
        raise InvalidArgumentError(f"py_func: func must be callable, got {type(func).__name__}")
    if backward_func is not None and not callable(backward_func):
        raise InvalidArgumentError(
            f"py_func: backward_func must be callable or None, got {type(backward_func).__name__}")
    xs, outs = _variables(x, "x"), _variables(out, "out")
    skip = _variables(skip_vars_in_backward_input, "skip_vars_in_backward_input")
    known = {v.name for v in xs + outs}
    for v in skip:
        if v.name not in known:
            raise InvalidArgumentError(
                f"py_func: skip_vars_in_backward_input names '{v.name}', which is neither in "
                f"x nor in out")
    helper = LayerHelper("py_func")
    helper.append_op("py_func", inputs={"X": xs}, outputs={"Out": outs}, attrs={
        "forward_callable_id": register_callable(func),
        "backward_callable_id": -1 if backward_func is None else register_callable(backward_func),
        "backward_skip_vars": [v.name for v in skip],
        "out_dtypes": [v.dtype for v in outs]})
    return out


def Print(input, first_n=-1, message=None, summarize=20, print_tensor_name=True,  # noqa: N802
          print_tensor_type=True, print_tensor_shape=True, print_tensor_lod=True,
          print_phase="both"):
    """Print `input` (name, shape, dtype and its first `summarize` values; -1 all) each time
    the op runs, at most `first_n` times (-1: always), after `message`; `print_phase`
    'forward', 'backward' (its gradient) or 'both'. Returns a copy of `input` to use in
    its place. In multi-process jobs each line starts with [rank r/n].

    >>> import spmd.fluid as fluid
    >>> with fluid.program_guard(fluid.Program()):
    ...     x = fluid.data("x", [2], "float32")
    ...     y = fluid.layers.Print(x, message="x is")
    """
    # a TypeError, as fluid's check_variable_and_dtype (float16 prints nowhere on a CPU)
    check_variable(input, "input", "Print", dtypes=("float32", "float64", "int32", "int64", "bool"))
    phase = str(print_phase).upper()
    if phase not in ("FORWARD", "BACKWARD", "BOTH"):
        raise InvalidArgumentError(
            f"Print: print_phase must be 'forward', 'backward' or 'both', got {print_phase!r}")
    helper = LayerHelper("print_wrapper")
    output = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("print", inputs={"In": [input]}, outputs={"Out": [output]}, attrs={
        "first_n": first_n, "message": message or "", "summarize": summarize,
        "print_tensor_name": print_tensor_name, "print_tensor_type": print_tensor_type,
        "print_tensor_shape": print_tensor_shape, "print_tensor_lod": print_tensor_lod,
        "print_phase": phase, "is_forward": True, "print_id": next(_print_ids),
        "tensor_name": input.name})
    return output
