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
    paddle.<fn>               spmd.layers.paddle_tensor.<fn>, for fn in its __all__ (mean,
                              sum, max, matmul, reshape, transpose, concat, split, flatten,
                              squeeze, unsqueeze, cast, add, subtract, multiply, divide,
                              maximum, minimum, exp, log, sqrt, square, tanh, pow, clip, scale,
                              zeros, ones, full, zeros_like, ones_like, gather, slice, topk,
                              create_parameter, create_global_var)
    paddle.metric.accuracy    spmd.layers.loss.accuracy

>>> # import spmd.fluid as fluid
>>> # x = fluid.layers.data(name="x", shape=[13]); y = fluid.layers.fc(x, size=1)
"""
from __future__ import annotations

from . import initializer, nn_initializer  # noqa: F401 - public submodules
from .conv import conv2d, pool2d
from .helper import LayerHelper
from .initializer import (
    Constant,
    ConstantInitializer,
    Initializer,
    MSRAInitializer,
    Normal,
    NormalInitializer,
    TruncatedNormal,
    TruncatedNormalInitializer,
    Uniform,
    UniformInitializer,
    Xavier,
    XavierInitializer,
)
from .io import data
from .loss import accuracy, cross_entropy, softmax_with_cross_entropy, square_error_cost
from .math_op_patch import monkey_patch_variable
from .math_ops import (
    clip,
    elementwise_add,
    elementwise_div,
    elementwise_max,
    elementwise_min,
    elementwise_mul,
    elementwise_sub,
    exp,
    gelu,
    leaky_relu,
    log,
    matmul,
    mean,
    mul,
    pow,
    reduce_max,
    reduce_mean,
    reduce_sum,
    relu,
    scale,
    sigmoid,
    sqrt,
    square,
    tanh,
)
from .nn import dropout, embedding, fc, softmax, topk
from .norm import batch_norm, layer_norm
from .param_attr import ParamAttr
from .tensor import (
    assign,
    cast,
    concat,
    create_global_var,
    create_parameter,
    fill_constant,
    flatten,
    gather,
    one_hot,
    ones,
    reshape,
    slice,
    split,
    squeeze,
    sums,
    transpose,
    unsqueeze,
    zeros,
)

monkey_patch_variable()

# the fluid.layers names first (spmd.fluid.layers re-exports exactly these)
__all__ = [
    "accuracy", "assign", "batch_norm", "cast", "clip", "concat", "conv2d",
    "create_global_var", "create_parameter", "cross_entropy", "data", "dropout",
    "elementwise_add", "elementwise_div", "elementwise_max", "elementwise_min",
    "elementwise_mul", "elementwise_sub", "embedding", "exp", "fc", "fill_constant", "flatten",
    "gather", "gelu", "layer_norm", "leaky_relu", "log", "matmul", "mean", "mul", "one_hot",
    "ones", "pool2d", "pow", "reduce_max", "reduce_mean", "reduce_sum", "relu", "reshape",
    "scale", "sigmoid", "slice", "softmax", "softmax_with_cross_entropy", "split", "sqrt",
    "square", "square_error_cost", "squeeze", "sums", "tanh", "topk", "transpose", "unsqueeze",
    "zeros",
]

FLUID_LAYERS_NAMES = tuple(__all__)
__all__ += [
    "FLUID_LAYERS_NAMES", "initializer", "monkey_patch_variable", "nn_initializer",
    "Constant", "ConstantInitializer", "Initializer", "LayerHelper", "MSRAInitializer",
    "Normal", "NormalInitializer", "ParamAttr", "TruncatedNormal",
    "TruncatedNormalInitializer", "Uniform", "UniformInitializer", "Xavier", "XavierInitializer",
]
