"""LayerHelper: what every layer builder uses to name things, create parameters (main program
plus their initializers in the startup program), append ops, a bias and an activation.

Names follow fluid 1.8: a layer `fc` called without `name` is `fc_0`, `fc_1`, ...; its weights
`fc_0.w_0`, `fc_0.w_1`, its biases `fc_0.b_0`, its intermediate variables `fc_0.tmp_0`, ...,
all from spmd.core.unique_name (so `unique_name.guard()` gives identical names to identical
builds).

>>> helper = LayerHelper("fc", param_attr=None, bias_attr=None, act="relu")
>>> helper.name
'fc_0'
"""
from __future__ import annotations

import copy
import weakref

from ..core import unique_name
from ..core.dtypes import convert_dtype
from ..core.program import default_main_program, default_startup_program
from ..core.variable import Parameter, Variable
from ..errors import ArgumentTypeError, InvalidArgumentError
from ..ops.registry import get_op_def
from .initializer import ConstantInitializer, Initializer, XavierInitializer
from .param_attr import ParamAttr
from .weight_norm import WeightNormParamAttr, create_weight_normalized

__all__ = ["LayerHelper", "check_variable"]


def check_variable(value, arg: str, where: str, dtypes=None) -> Variable:
    """`value` if it is a Variable (of one of `dtypes`, when given), else a clear error."""
    if not isinstance(value, Variable):  # a TypeError too, as fluid's check_variable_and_dtype
        raise ArgumentTypeError(
            f"{where}: argument '{arg}' must be a Variable, got {type(value).__name__}: {value!r}")
    if dtypes is not None and value.dtype not in dtypes:
        raise ArgumentTypeError(
            f"{where}: argument '{arg}' ({value.name}) must have dtype in {sorted(dtypes)}, "
            f"got {value.dtype}")
    return value


class LayerHelper:
    """State of one layer call: its type, its unique name and its keyword arguments
    (`param_attr`, `bias_attr`, `act`, `name`, ...)."""

    def __init__(self, layer_type: str, **kwargs):
        self.layer_type = layer_type
        self.kwargs = kwargs
        name = kwargs.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidArgumentError(
                f"{layer_type}: name must be a str or None, got {type(name).__name__}")
        self.name = name if name is not None else unique_name.generate(layer_type)

    # -- programs ------------------------------------------------------------------------------
    @property
    def main_program(self):
        return default_main_program()

    @property
    def startup_program(self):
        return default_startup_program()

    @property
    def block(self):
        return self.main_program.current_block()

    def append_op(self, type: str, inputs=None, outputs=None, attrs=None, compat_attrs=None):
        """Append an op to the main program. `compat_attrs` are fluid attributes the op may not
        model (use_cudnn, use_mkldnn, ...): passed only where the op's definition declares them."""
        attrs = dict(attrs or {})
        if compat_attrs:
            declared = get_op_def(type).attrs
            attrs.update({k: v for k, v in compat_attrs.items() if k in declared})
        return self.block.append_op(type, inputs=inputs, outputs=outputs, attrs=attrs)

    # -- inputs --------------------------------------------------------------------------------
    def multiple_input(self, slot: str = "input") -> list[Variable]:
        value = self.kwargs.get(slot)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if not values:
            raise InvalidArgumentError(f"{self.layer_type}: '{slot}' is an empty list")
        for v in values:
            check_variable(v, slot, self.layer_type)
        return values

    def input(self, slot: str = "input") -> Variable:
        values = self.multiple_input(slot)
        if len(values) != 1:
            raise InvalidArgumentError(
                f"{self.layer_type}: '{slot}' takes one Variable, got {len(values)}")
        return values[0]

    def input_dtype(self, slot: str = "input") -> str:
        dtypes = {v.dtype for v in self.multiple_input(slot)}
        if len(dtypes) != 1:
            raise InvalidArgumentError(
                f"{self.layer_type}: the variables in '{slot}' must share one dtype, got "
                f"{sorted(dtypes)}")
        return dtypes.pop()

    # -- parameter attributes ------------------------------------------------------------------
    @property
    def param_attr(self):
        return ParamAttr._to_attr(self.kwargs.get("param_attr"))

    @property
    def bias_attr(self):
        return ParamAttr._to_attr(self.kwargs.get("bias_attr"))

    def multiple_param_attr(self, length: int) -> list:
        attr = self.param_attr
        if isinstance(attr, ParamAttr) or attr is False:
            attr = [attr] + [copy.deepcopy(attr) for _ in range(length - 1)]
        if len(attr) != length:
            raise InvalidArgumentError(
                f"{self.layer_type}: {length} inputs but {len(attr)} param_attr entries")
        return attr

    def iter_inputs_and_params(self, slot: str = "input"):
        inputs = self.multiple_input(slot)
        yield from zip(inputs, self.multiple_param_attr(len(inputs)))

    # -- variables -----------------------------------------------------------------------------
    def create_variable_for_type_inference(self, dtype="float32", stop_gradient=False):
        """A fresh intermediate variable; its shape is set by the op that writes it."""
        return self.block.create_var(name=unique_name.generate(f"{self.name}.tmp"),
                                     dtype=convert_dtype(dtype), persistable=False,
                                     stop_gradient=stop_gradient)

    def create_variable(self, name: str, dtype="float32", **kwargs):
        return self.block.create_var(name=name, dtype=convert_dtype(dtype), **kwargs)

    def create_global_variable(self, shape, dtype="float32", persistable=False, name=None,
                               **kwargs):
        name = name if name is not None else unique_name.generate(f"{self.name}.tmp")
        return self.main_program.global_block().create_var(
            name=name, shape=shape, dtype=convert_dtype(dtype), persistable=persistable,
            **kwargs)

    def set_variable_initializer(self, var: Variable, initializer: Initializer):
        """Declare `var` persistable in the startup program and initialize it there."""
        block = self.startup_program.global_block()
        svar = block.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                                persistable=True)
        if not _written_in(block, var.name):
            initializer(svar, block)
        return svar

    def create_parameter(self, attr, shape, dtype="float32", is_bias=False,
                         default_initializer=None) -> Parameter:
        """A parameter in the main program's global block and, under the same name, in the
        startup program with the op that initializes it (once, however often the name is
        shared). Defaults: Xavier for weights, Constant(0) for biases (fluid 1.8)."""
        attr = ParamAttr._to_attr(attr)
        if attr is False:
            raise InvalidArgumentError(
                f"{self.layer_type} '{self.name}': param_attr=False, but this layer needs its "
                f"weight; pass None (default) or a ParamAttr (only bias_attr may be False)")
        if not isinstance(attr, ParamAttr):
            raise InvalidArgumentError(
                f"{self.layer_type} '{self.name}': expected one ParamAttr, got {attr!r}")
        attr = copy.deepcopy(attr)  # the caller's ParamAttr stays reusable for other layers
        if isinstance(attr, WeightNormParamAttr):  # w = g * v / ||v||, from two parameters
            return create_weight_normalized(self, attr, shape, dtype, default_initializer)
        shape = [int(d) for d in shape]
        if any(d <= 0 for d in shape):
            raise InvalidArgumentError(
                f"{self.layer_type} '{self.name}': parameter shape {shape} must have known "
                f"positive dims; check the input's shape (only the batch dim may be -1)")
        dtype = convert_dtype(dtype)
        if attr.name is None:
            attr.name = unique_name.generate(f"{self.name}.{'b' if is_bias else 'w'}")
        if default_initializer is None:
            default_initializer = ConstantInitializer(0.0) if is_bias else XavierInitializer()
        attr._set_default_initializer(default_initializer)

        main_block = self.main_program.global_block()
        existing = main_block.vars.get(attr.name)
        if existing is not None and not isinstance(existing, Parameter):
            raise InvalidArgumentError(
                f"{self.layer_type}: parameter name '{attr.name}' is already used by a "
                f"non-parameter variable; choose another ParamAttr name")
        if existing is not None and existing.dtype != dtype:
            raise InvalidArgumentError(
                f"parameter '{attr.name}' already exists with dtype {existing.dtype}, cannot "
                f"re-create it with dtype {dtype}")
        # created without `initializer` (Block.create_parameter would append it to the block it
        # is called on, as fluid's does); the startup block gets it once, found by an index
        kwargs = attr._to_kwargs(True)
        initializer = kwargs.pop("initializer", None)
        param = main_block.create_parameter(shape=shape, dtype=dtype, **kwargs)
        startup_block = self.startup_program.global_block()
        sparam = startup_block.create_parameter(shape=shape, dtype=dtype, **kwargs)
        param.initializer = sparam.initializer = initializer
        if not _written_in(startup_block, attr.name):
            attr.initializer(sparam, startup_block)
        return param

    # -- common tails --------------------------------------------------------------------------
    def append_bias_op(self, input_var: Variable, dim_start: int = 1, dim_end: int | None = None):
        """input + bias (shape input.shape[dim_start:dim_end]), unless bias_attr is False."""
        bias_attr = self.bias_attr
        if bias_attr is False:
            return input_var
        size = list(input_var.shape[dim_start:dim_end])
        bias = self.create_parameter(bias_attr, size, input_var.dtype, is_bias=True)
        out = self.create_variable_for_type_inference(input_var.dtype)
        self.append_op("elementwise_add", {"X": [input_var], "Y": [bias]}, {"Out": [out]},
                       {"axis": dim_start})
        return out

    def append_activation(self, input_var: Variable):
        """act(input) for `act` given as a name ('relu') or a dict {'type': 'leaky_relu',
        'alpha': 0.1}; the input itself when act is None."""
        act = self.kwargs.get("act")
        if act is None:
            return input_var
        if isinstance(act, str):
            act = {"type": act}
        if not isinstance(act, dict) or not isinstance(act.get("type"), str):
            raise InvalidArgumentError(
                f"{self.layer_type}: act must be an activation name such as 'relu', or a dict "
                f"with a 'type', got {act!r}")
        attrs = {k: v for k, v in act.items() if k != "type"}
        out = self.create_variable_for_type_inference(input_var.dtype)
        self.append_op(act["type"], {"X": [input_var]}, {"Out": [out]}, attrs)
        return out


class _WrittenIndex:
    """The names the ops of one block write, kept up to date as ops are prepended (what
    initializers do) or appended, so that asking "is this parameter initialized yet?" once per
    parameter is linear in the model's size instead of rescanning every op each time."""

    __slots__ = ("count", "first", "last", "names")

    def __init__(self, ops: list):
        self.count, self.names = 0, set()
        self.first = self.last = None
        self._add(ops)

    def _add(self, ops) -> None:
        for op in ops:
            self.names.update(op.output_arg_names)

    def catch_up(self, ops: list) -> bool:
        """Index the ops added since the last call; False when the block changed otherwise
        (ops removed or inserted in the middle), so that the caller rebuilds the index."""
        new = len(ops) - self.count
        if self.count == 0:
            self._add(ops)
        elif new < 0:
            return False
        elif ops[new] is self.first and ops[-1] is self.last:  # prepended (or nothing new)
            self._add(ops[:new])
        elif ops[0] is self.first and ops[self.count - 1] is self.last:  # appended
            self._add(ops[self.count:])
        else:
            return False
        self.count = len(ops)
        self.first, self.last = (ops[0], ops[-1]) if ops else (None, None)
        return True


# block -> its index; weak, so that a dropped Program takes its index with it
_WRITTEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _written_in(block, name: str) -> bool:
    """Whether an op of `block` writes `name` (e.g. the parameter's initializer exists)."""
    index = _WRITTEN.get(block)
    if index is None or not index.catch_up(block.ops):
        index = _WRITTEN[block] = _WrittenIndex([])
        index.catch_up(block.ops)
    return name in index.names
