"""paddle.nn's layer classes for static programs: `Layer` (the base a 2.x model subclasses) and
`SyncBatchNorm`, plus the default dtype they create their parameters in.

As in paddle 2.x's static mode, a layer creates its parameters when it is constructed (in the
default main and startup programs of that moment) and appends its ops each time it is called;
`training` (`train()` / `eval()`) decides how the ops it appends from then on behave.

>>> # bn = paddle.nn.SyncBatchNorm(16)
>>> # y = bn(conv_out)          # one sync_batch_norm op; statistics over every place and rank
"""
from __future__ import annotations

import math
import numbers
import re
from collections import OrderedDict

from ..core import unique_name
from ..core.dtypes import convert_dtype
from ..core.program import default_main_program
from ..core.variable import Parameter, Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer
from .norm import _check_float
from .param_attr import ParamAttr

__all__ = ["Layer", "SyncBatchNorm", "get_default_dtype", "set_default_dtype"]

_default_dtype = "float32"


def set_default_dtype(d) -> None:
    """The dtype paddle.nn layers create their parameters in from now on (paddle's
    set_default_dtype): 'float32' (the default), 'float64' or 'float16' (norm layers then keep
    float32 parameters, as paddle does).

    >>> set_default_dtype("float64"); get_default_dtype()
    'float64'
    >>> set_default_dtype("float32")
    """
    global _default_dtype
    try:
        dtype = convert_dtype(d)
    except InvalidArgumentError:  # its message lists every dtype, not the three allowed here
        dtype = None
    if dtype not in ("float16", "float32", "float64"):
        raise InvalidArgumentError(
            f"set_default_dtype only supports 'float16', 'float32' and 'float64', got {d!r}")
    _default_dtype = dtype


def get_default_dtype() -> str:
    """The dtype paddle.nn layers create their parameters in (see set_default_dtype)."""
    return _default_dtype


def _snake(name: str) -> str:
    """paddle's name scope of a layer class: SyncBatchNorm -> sync_batch_norm."""
    s = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z0-9])([A-Z])", r"\1_\2", s).lower()


class Layer:
    """paddle.nn.Layer for static programs: a callable whose `forward` appends ops to the
    current program. Assigning a Layer or a Parameter to an attribute registers it (as a
    sublayer or a parameter), so `parameters()`, `sublayers()`, `train()` and `eval()` walk the
    whole model.

    >>> class Net(Layer):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.bn = SyncBatchNorm(4)
    ...     def forward(self, x):
    ...         return self.bn(x)
    >>> # y = Net()(x)   # inside paddle.static.program_guard(main, startup)
    """

    def __init__(self, name_scope: str | None = None, dtype="float32"):
        self.__dict__["_sub_layers"] = OrderedDict()
        self.__dict__["_parameters"] = OrderedDict()
        self.training = True
        self._full_name = unique_name.generate(name_scope or _snake(type(self).__name__))
        self._dtype = convert_dtype(dtype)

    def _registry(self, kind: str) -> OrderedDict:
        table = self.__dict__.get(kind)
        if table is None:
            raise InvalidArgumentError(
                f"{type(self).__name__}: call super().__init__() in __init__ before assigning "
                f"sublayers or parameters")
        return table

    def __setattr__(self, name, value):
        if isinstance(value, Layer):
            self._registry("_parameters").pop(name, None)
            self._registry("_sub_layers")[name] = value
        elif isinstance(value, Parameter):
            self._registry("_sub_layers").pop(name, None)
            self._registry("_parameters")[name] = value
        else:
            for kind in ("_sub_layers", "_parameters"):
                self.__dict__.get(kind, {}).pop(name, None)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for kind in ("_sub_layers", "_parameters"):
            self.__dict__.get(kind, {}).pop(name, None)
        object.__delattr__(self, name)

    def full_name(self) -> str:
        """The layer's unique name (`sync_batch_norm_0`), the prefix of its parameters."""
        return self._full_name

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *inputs, **kwargs):
        return self.forward(*inputs, **kwargs)

    def train(self):
        """Ops this layer and its sublayers append from now on run in training mode."""
        for layer in self.sublayers(include_self=True):
            layer.training = True
        return self

    def eval(self):
        """Ops appended from now on run in evaluation mode (batch norm: running statistics)."""
        for layer in self.sublayers(include_self=True):
            layer.training = False
        return self

    def add_sublayer(self, name: str, sublayer: Layer) -> Layer:
        if not isinstance(sublayer, Layer):
            raise InvalidArgumentError(
                f"add_sublayer('{name}', ...) expects a paddle.nn.Layer, got "
                f"{type(sublayer).__name__}")
        setattr(self, name, sublayer)
        return sublayer

    def named_children(self):
        yield from self._sub_layers.items()

    def children(self):
        return [layer for _, layer in self.named_children()]

    def named_sublayers(self, prefix: str = "", include_self: bool = False):
        """(dotted name, layer) for every layer below this one, depth first."""
        if include_self:
            yield prefix, self
        for name, layer in self.named_children():
            yield from layer.named_sublayers(f"{prefix}.{name}" if prefix else name, True)

    def sublayers(self, include_self: bool = False) -> list:
        return [layer for _, layer in self.named_sublayers(include_self=include_self)]

    def named_parameters(self, prefix: str = "", include_sublayers: bool = True):
        layers = self.named_sublayers(prefix, True) if include_sublayers else [(prefix, self)]
        seen = set()
        for layer_prefix, layer in layers:
            for name, param in layer._parameters.items():
                if param.name not in seen:  # a parameter shared by two layers counts once
                    seen.add(param.name)
                    yield (f"{layer_prefix}.{name}" if layer_prefix else name), param

    def parameters(self, include_sublayers: bool = True) -> list:
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def create_parameter(self, shape, attr=None, dtype=None, is_bias=False,
                         default_initializer=None) -> Parameter:
        """A parameter named after this layer (`<full_name>.w_0`), created in the default main
        program with its initializer in the default startup program."""
        helper = LayerHelper(type(self).__name__, name=self._full_name)
        return helper.create_parameter(attr, shape, dtype or self._dtype, is_bias=is_bias,
                                       default_initializer=default_initializer)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"  ({name}): " + repr(layer).replace("\n", "\n  ")
                 for name, layer in self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


# paddle's data_format spellings and the layout the op runs in
_LAYOUTS = {"NC": "NCHW", "NCL": "NCHW", "NCHW": "NCHW", "NCDHW": "NCHW",
            "NLC": "NHWC", "NHWC": "NHWC", "NDHWC": "NHWC"}
_FLOATS = ("float16", "float32", "float64")


class SyncBatchNorm(Layer):
    """Batch normalization whose statistics (and their gradients) cover the whole global
    batch: every place of every rank (paddle.nn.SyncBatchNorm). On one place it is plain batch
    norm. Training: y = (x - mean) / sqrt(var + epsilon) * weight + bias with the global
    batch's per-channel mean and variance, and running = momentum * running + (1 - momentum)
    * batch statistic. Evaluation (`eval()` before the call, or the program cloned with
    `clone(for_test=True)`): the running statistics.

    Args:
        num_features: the channels C of the input.
        momentum, epsilon: as above (defaults 0.9 and 1e-5).
        weight_attr, bias_attr: ParamAttr (or None) of the scale (ones) and shift (zeros);
            False keeps it fixed at ones / zeros (a parameter that gets no gradient), as paddle.
        data_format: where the channels are: 'NC', 'NCL', 'NCHW', 'NCDHW' (dim 1) or 'NLC',
            'NHWC', 'NDHWC' (the last dim).
        name: names the running statistics `<name>_mean` and `<name>_variance`.

    Parameters are created in get_default_dtype() (float32 unless set_default_dtype changed
    it), so the input must have that dtype (float16 inputs use float32 parameters).

    >>> # bn = paddle.nn.SyncBatchNorm(8, momentum=0.8)
    >>> # y = bn(paddle.static.data("x", [None, 8, 16, 16], "float32"))
    """

    def __init__(self, num_features: int, momentum: float = 0.9, epsilon: float = 1e-05,
                 weight_attr=None, bias_attr=None, data_format: str = "NCHW",
                 name: str | None = None):
        super().__init__()
        where = f"SyncBatchNorm '{self._full_name}'"
        if isinstance(num_features, bool) or not isinstance(num_features, numbers.Integral) \
                or num_features <= 0:
            raise InvalidArgumentError(
                f"{where}: num_features must be a positive int (the input's channels), got "
                f"{num_features!r}")
        if data_format not in _LAYOUTS:
            raise InvalidArgumentError(
                f"{where}: data_format must be one of {sorted(_LAYOUTS)}, got {data_format!r}")
        self._num_features = int(num_features)
        self._momentum = _check_float(momentum, "momentum", where, 0.0, 1.0)
        self._epsilon = _check_float(epsilon, "epsilon", where, 0.0, math.inf)
        self._data_format = data_format
        self._weight_attr, self._bias_attr, self._name = weight_attr, bias_attr, name
        # paddle keeps half-precision models' norm parameters in float32
        self._dtype = "float32" if get_default_dtype() == "float16" else get_default_dtype()
        self._create_parameters(weight_attr, bias_attr, name)

    def _create_parameters(self, weight_attr, bias_attr, name):
        # the order paddle 2.5+ creates them in, so that unnamed parameters get its names
        shape = [self._num_features]
        ones, zeros = ConstantInitializer(1.0), ConstantInitializer(0.0)
        if weight_attr is not False:
            self.weight = self.create_parameter(shape, weight_attr, default_initializer=ones)
        if bias_attr is not False:
            self.bias = self.create_parameter(shape, bias_attr, is_bias=True)
        self._mean = self.create_parameter(shape, ParamAttr(
            name=None if name is None else f"{name}_mean", initializer=zeros, trainable=False,
            do_model_average=True))
        self._variance = self.create_parameter(shape, ParamAttr(
            name=None if name is None else f"{name}_variance", initializer=ones,
            trainable=False, do_model_average=True))
        # attr False: a fixed scale of ones / shift of zeros, which backward leaves alone
        if weight_attr is False:
            self.weight = self.create_parameter(shape, None, default_initializer=ones)
            self.weight.stop_gradient = True
        if bias_attr is False:
            self.bias = self.create_parameter(shape, None, is_bias=True)
            self.bias.stop_gradient = True

    def _check_input(self, x) -> None:
        where = f"SyncBatchNorm '{self._full_name}'"
        check_variable(x, "x", where, dtypes=_FLOATS)
        want = "float32" if x.dtype == "float16" else x.dtype
        if want != self.weight.dtype:
            raise InvalidArgumentError(
                f"{where}: x ({x.name}) is {x.dtype} but the layer's parameters are "
                f"{self.weight.dtype} (paddle's default dtype when the layer was built); call "
                f"paddle.set_default_dtype('{want}') before building the layer, or cast x")
        if not 2 <= x.ndim <= 5:
            raise InvalidArgumentError(
                f"{where}: x must have 2 to 5 dims, got {x.name} {list(x.shape)}")
        axis = 1 if _LAYOUTS[self._data_format] == "NCHW" else x.ndim - 1
        if x.shape[axis] >= 0 and x.shape[axis] != self._num_features:
            raise InvalidArgumentError(
                f"{where}: built for {self._num_features} channels, but x {x.name} "
                f"{list(x.shape)} has {x.shape[axis]} in dim {axis} (data_format "
                f"'{self._data_format}'); pass num_features={x.shape[axis]} or the right "
                f"data_format")
        program = self.weight.block.program
        if program is not default_main_program():
            raise InvalidArgumentError(
                f"{where}: called while building another program than the one the layer was "
                f"built in (its parameters live there); build the layer inside the same "
                f"program_guard as its calls")

    def forward(self, x: Variable) -> Variable:
        """Append one sync_batch_norm op reading x; returns its output."""
        self._check_input(x)
        helper = LayerHelper("sync_batch_norm", name=self._full_name)
        dtype = self.weight.dtype
        saved_mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
        saved_variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(
            "sync_batch_norm",
            {"X": [x], "Scale": [self.weight], "Bias": [self.bias], "Mean": [self._mean],
             "Variance": [self._variance]},
            {"Y": [out], "MeanOut": [self._mean], "VarianceOut": [self._variance],
             "SavedMean": [saved_mean], "SavedVariance": [saved_variance]},
            {"momentum": self._momentum, "epsilon": self._epsilon,
             "is_test": not self.training, "data_layout": _LAYOUTS[self._data_format],
             "use_global_stats": False, "trainable_statistics": False},
            compat_attrs={"use_mkldnn": False, "fuse_with_relu": False})
        return out

    def extra_repr(self) -> str:
        text = (f"num_features={self._num_features}, momentum={self._momentum}, "
                f"epsilon={self._epsilon}")
        if self._data_format != "NCHW":
            text += f", data_format={self._data_format}"
        return text + (f", name={self._name}" if self._name is not None else "")

    @classmethod
    def convert_sync_batchnorm(cls, layer: Layer) -> Layer:
        """`layer` with every batch-norm layer in it made a SyncBatchNorm (paddle's classmethod
        of the same name), walking its sublayers.

        spmd has no BatchNorm1D/2D/3D classes, so a model built of spmd's paddle.nn layers has
        none to convert: it comes back as it is (a SyncBatchNorm stays itself, with its
        parameters). Programs built with fluid.layers.batch_norm or paddle.static.nn.batch_norm
        are made synchronous by BuildStrategy.sync_batch_norm = True instead.

        >>> # model = paddle.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        """
        if not isinstance(layer, Layer):
            raise InvalidArgumentError(
                f"convert_sync_batchnorm expects a paddle.nn.Layer, got "
                f"{type(layer).__name__}; for a program built with batch_norm layer functions "
                f"set BuildStrategy.sync_batch_norm = True before with_data_parallel")
        for name, sublayer in list(layer.named_children()):
            converted = cls.convert_sync_batchnorm(sublayer)
            if converted is not sublayer:
                layer.add_sublayer(name, converted)
        return layer
