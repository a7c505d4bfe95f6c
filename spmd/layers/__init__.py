"""Layer builders users call (fluid.layers), ParamAttr and initializers; importing this package
also installs the Python operators on Variable (math_op_patch).

FLUID_LAYERS_NAMES lists the fluid.layers names. What the compatibility faces re-export:

fluid (spmd/fluid):
    fluid.layers              the names in spmd.layers.FLUID_LAYERS_NAMES
    fluid.data                spmd.layers.io.fluid_data
    fluid.embedding           spmd.layers.static_nn.embedding (lookup_table_v2)
    fluid.ParamAttr           spmd.layers.param_attr.ParamAttr
    fluid.initializer         spmd.layers.initializer (module: Constant, Uniform, Normal,
                              TruncatedNormal, Xavier, MSRA and the *Initializer names)
    fluid.layers.math_op_patch  spmd.layers.math_op_patch (monkey_patch_variable)
    fluid.unique_name         spmd.core.unique_name

paddle 2.x (spmd/static, and the top-level `spmd` imported as `paddle`):
    paddle.static.data        spmd.layers.io.static_data
    paddle.static.nn          spmd.layers.static_nn (module: fc, conv2d, batch_norm,
                              layer_norm, embedding, create_parameter)
    paddle.static.create_global_var, paddle.static.create_parameter
                              spmd.layers.tensor.create_global_var / create_parameter
    paddle.ParamAttr, paddle.static.ParamAttr
                              spmd.layers.param_attr.ParamAttr
    paddle.nn.initializer     spmd.layers.nn_initializer (module: Constant, Uniform, Normal,
                              TruncatedNormal, XavierUniform, XavierNormal, KaimingUniform,
                              KaimingNormal, calculate_gain)
    paddle.nn.functional      spmd.layers.functional (module)
    paddle.nn.Layer, paddle.nn.SyncBatchNorm, paddle.set_default_dtype,
    paddle.get_default_dtype  spmd.layers.nn_layers
    paddle.<fn>               spmd.layers.paddle_tensor.<fn>, for fn in its __all__ (mean,
                              sum, max, matmul, reshape, transpose, concat, split, flatten,
                              squeeze, unsqueeze, cast, add, subtract, multiply, divide,
                              maximum, minimum, exp, log, sqrt, square, tanh, pow, clip, scale,
                              zeros, ones, full, zeros_like, ones_like, gather, slice, topk,
                              where, create_parameter, create_global_var)
    paddle.metric.accuracy    spmd.layers.loss.accuracy

>>> # import spmd.fluid as fluid
>>> # x = fluid.layers.data(name="x", shape=[13]); y = fluid.layers.fc(x, size=1)
"""
from __future__ import annotations

import sys as _sys
import types as _types

from .. import lazy as _lazy
from .indexing import install as _install_indexing
from .math_op_patch import monkey_patch_variable

# fluid.layers' names come from these modules, as by star imports in this order (a later
# module's name wins); every one lists in __all__ exactly the fluid.layers names it provides.
# name_index.py, generated from this list (spmd.lazy.write_indexes()), says which module
# holds which name, so that a name is imported at its first use.
_STAR_MODULES = (
    "activation", "control_flow", "conv", "crf", "ctc", "dynamic_rnn", "host", "index", "io",
    "learning_rate_scheduler", "linalg", "logic", "loss", "manip", "math_ops", "metric_op",
    "nn", "norm", "random", "rnn", "sequence", "sequence_rnn", "sparse", "static_rnn", "tensor",
    "creation", "tensor_array", "vision", "decode", "decode_helpers", "rnn_cells", "detection_ssd",
    "detection_roi", "detection_proposals", "instag",
)
_INITIALIZERS = (
    "Constant", "ConstantInitializer", "Initializer", "MSRAInitializer", "Normal",
    "NormalInitializer", "TruncatedNormal", "TruncatedNormalInitializer", "Uniform",
    "UniformInitializer", "Xavier", "XavierInitializer",
)
_NAMES = _lazy.read_index("spmd.layers.name_index")
FLUID_LAYERS_NAMES = tuple(sorted(_NAMES))


class _Package(_types.ModuleType):
    """fluid.layers.rnn is the function (as in fluid 1.8, it hides the module of that name):
    the first import of the module spmd.layers.rnn, whenever it comes, does not rebind it."""

    def __setattr__(self, name, value):
        if name != "rnn" or not isinstance(value, _types.ModuleType):
            super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
monkey_patch_variable()
_install_indexing()  # var[...] as fluid 1.8's Variable.__getitem__

__getattr__, __dir__ = _lazy.attach(__name__, {
    **{name: f".{module}:{name}" for name, module in _NAMES.items()},
    **{name: f".initializer:{name}" for name in _INITIALIZERS},
    "LayerHelper": ".helper:LayerHelper",
    "ParamAttr": ".param_attr:ParamAttr",
}, submodules=True)

__all__ = [
    *FLUID_LAYERS_NAMES,
    "FLUID_LAYERS_NAMES", "initializer", "monkey_patch_variable", "nn_initializer",
    "Constant", "ConstantInitializer", "Initializer", "LayerHelper", "MSRAInitializer",
    "Normal", "NormalInitializer", "ParamAttr", "TruncatedNormal",
    "TruncatedNormalInitializer", "Uniform", "UniformInitializer", "Xavier", "XavierInitializer",
]
