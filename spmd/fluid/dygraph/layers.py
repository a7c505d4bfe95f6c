"""fluid.dygraph.layers: `Layer`, fluid 1.8's module base class, as it works in a static
program: constructing one (inside or outside program_guard) creates its parameters in the
default main and startup programs, and calling it appends its ops there, as fluid 1.8 does when
dygraph mode is off. Dygraph (eager) mode itself is what spmd does not have: fluid.dygraph.guard
and the layers that need it raise, naming the static way.

>>> import spmd.fluid as fluid
>>> class Scale(fluid.Layer):
...     def __init__(self):
...         super().__init__()
...         self.w = self.create_parameter(shape=[3], dtype="float32")
...     def forward(self, x):
...         return fluid.layers.elementwise_mul(x, self.w)
"""
from __future__ import annotations

import copy
import re
from collections import OrderedDict

from ...core import unique_name
from ...core.program import default_main_program
from ...core.variable import Parameter
from ...errors import InvalidArgumentError
from ...layers.helper import LayerHelper

__all__ = ["Layer"]

_FIRST_CAP = re.compile("(.)([A-Z][a-z]+)")
_ALL_CAP = re.compile("([a-z0-9])([A-Z])")


def _snake(name: str) -> str:
    """fluid's default name scope of a Layer class: MyLayer -> my_layer."""
    return _ALL_CAP.sub(r"\1_\2", _FIRST_CAP.sub(r"\1_\2", name)).lower()


class Layer:
    """fluid.dygraph.Layer in a static program: `create_parameter` makes parameters named from
    the layer's full name (`my_layer_0.w_0`), `add_parameter` / `add_sublayer` (or plain
    attribute assignment) register them, `parameters()` / `sublayers()` list them, and calling
    the layer runs `_build_once` the first time, then `forward`, which appends ops."""

    def __init__(self, name_scope=None, dtype="float32"):
        self.training = True
        if name_scope is None:
            name_scope = _snake(type(self).__name__)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_sub_layers", OrderedDict())
        self._full_name = unique_name.generate(name_scope)
        self._helper = LayerHelper(self._full_name, name=self._full_name)
        self._built = False
        self._dtype = dtype

    def full_name(self) -> str:
        """The layer's unique name (`name_scope` numbered), the prefix of its parameters."""
        return self._full_name

    def train(self) -> None:
        self.training = True

    def eval(self) -> None:
        self.training = False

    # -- parameters and sublayers --------------------------------------------------------------
    def create_parameter(self, shape, attr=None, dtype="float32", is_bias=False,
                         default_initializer=None) -> Parameter:
        """A parameter of the default main program (initialized by the startup program), named
        `<full_name>.w_N` (`.b_N` for a bias) unless `attr` names it."""
        attr = copy.deepcopy(attr)
        if isinstance(attr, str) and attr == "":
            attr = None
        return self._helper.create_parameter(attr, shape, dtype, is_bias, default_initializer)

    def create_variable(self, name=None, persistable=None, dtype=None, type="LOD_TENSOR"):
        """A variable of the current block named `<full_name>.<name>` (or a generated name)."""
        var_name = (f"{self._full_name}.{name}" if name is not None
                    else unique_name.generate(f"{self._full_name}._generated_var"))
        return default_main_program().current_block().create_var(
            name=var_name, persistable=bool(persistable), dtype=dtype or "float32", type=type)

    def add_parameter(self, name: str, parameter):
        """Register `parameter` under `name` (None is allowed, as in fluid)."""
        if parameter is not None and not isinstance(parameter, Parameter):
            raise InvalidArgumentError(
                f"{type(self).__name__}.add_parameter('{name}'): expected a Parameter "
                f"(self.create_parameter(...)), got {type(parameter).__name__}")
        self._parameters[name] = parameter
        return parameter

    def add_sublayer(self, name: str, sublayer):
        if not isinstance(sublayer, Layer):
            raise InvalidArgumentError(
                f"{type(self).__name__}.add_sublayer('{name}'): expected a Layer, got "
                f"{type(sublayer).__name__}")
        self._sub_layers[name] = sublayer
        return sublayer

    def parameters(self, include_sublayers=True) -> list:
        """This layer's parameters, then (include_sublayers) its sublayers', each once."""
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def named_parameters(self, prefix="", include_sublayers=True):
        seen = set()
        layers = self.named_sublayers(prefix, include_sublayers, include_self=True) \
            if include_sublayers else [(prefix, self)]
        for layer_prefix, layer in layers:
            for key, p in layer._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{layer_prefix}.{key}" if layer_prefix else key), p

    def sublayers(self, include_sublayers=True) -> list:
        return [layer for _, layer in self.named_sublayers(include_sublayers=include_sublayers)]

    def named_sublayers(self, prefix="", include_sublayers=True, include_self=False):
        seen = {id(self)}
        if include_self:
            yield prefix, self
        for key, layer in self._sub_layers.items():
            if layer is None or id(layer) in seen:
                continue
            seen.add(id(layer))
            name = f"{prefix}.{key}" if prefix else key
            yield name, layer
            if include_sublayers:
                for sub_name, sub in layer.named_sublayers(name, True):
                    if id(sub) not in seen:
                        seen.add(id(sub))
                        yield sub_name, sub

    def state_dict(self, include_sublayers=True) -> OrderedDict:
        """Parameter name -> Parameter (its value lives in the scope after the startup run)."""
        return OrderedDict((p.name, p) for p in self.parameters(include_sublayers))

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter) and params is not None:
            self._sub_layers.pop(name, None)
            params[name] = value
            return
        if isinstance(value, Layer) and params is not None:
            params.pop(name, None)
            self._sub_layers[name] = value
            return
        if params is not None and name in params:
            params[name] = value  # e.g. self.bias = None
            return
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        if name in d.get("_parameters", {}):
            return d["_parameters"][name]
        if name in d.get("_sub_layers", {}):
            return d["_sub_layers"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._sub_layers:
            del self._sub_layers[name]
        else:
            object.__delattr__(self, name)

    # -- calling -------------------------------------------------------------------------------
    def _build_once(self, *args, **kwargs):
        """Hook: create what depends on the first input (RowConv's filter, ...)."""

    def forward(self, *inputs, **kwargs):
        raise InvalidArgumentError(
            f"{type(self).__name__} has no forward(): a Layer subclass defines forward(self, "
            f"*inputs), which appends the layer's ops")

    def __call__(self, *inputs, **kwargs):
        if not self._built:
            self._build_once(*inputs, **kwargs)
            self._built = True
        return self.forward(*inputs, **kwargs)
