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

from . import (  # noqa: F401 - public submodules; each __all__ is fluid.layers names
    activation,
    control_flow,
    conv,
    crf,
    ctc,
    decode,
    decode_helpers,
    dynamic_rnn,
    host,
    index,
    initializer,
    io,
    learning_rate_scheduler,
    linalg,
    logic,
    loss,
    manip,
    math_ops,
    metric_op,
    nn,
    nn_initializer,
    norm,
    random,
    rnn,
    rnn_cells,
    sequence,
    sequence_rnn,
    sparse,
    static_rnn,
    tensor,
    tensor_array,
    vision,
)
from .activation import *  # noqa: F403
from .control_flow import *  # noqa: F403
from .conv import *  # noqa: F403
from .crf import *  # noqa: F403
from .ctc import *  # noqa: F403
from .dynamic_rnn import *  # noqa: F403
from .helper import LayerHelper
from .host import *  # noqa: F403
from .index import *  # noqa: F403
from .indexing import install as _install_indexing
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
from .io import *  # noqa: F403
from .learning_rate_scheduler import *  # noqa: F403
from .linalg import *  # noqa: F403
from .logic import *  # noqa: F403
from .loss import *  # noqa: F403
from .manip import *  # noqa: F403
from .math_op_patch import monkey_patch_variable
from .math_ops import *  # noqa: F403
from .metric_op import *  # noqa: F403
from .nn import *  # noqa: F403
from .norm import *  # noqa: F403
from .param_attr import ParamAttr
from .random import *  # noqa: F403
from .rnn import *  # noqa: F403
from .sequence import *  # noqa: F403
from .sequence_rnn import *  # noqa: F403
from .sparse import *  # noqa: F403
from .static_rnn import *  # noqa: F403
from .tensor import *  # noqa: F403
from .tensor_array import *  # noqa: F403
from .vision import *  # noqa: F403

monkey_patch_variable()
_install_indexing()  # var[...] as fluid 1.8's Variable.__getitem__

# Every module above lists in __all__ exactly the fluid.layers names it provides;
# spmd.fluid.layers re-exports their union.
_FLUID_MODULES = (activation, conv, host, index, io, learning_rate_scheduler, linalg, logic, loss,
                  manip, math_ops, metric_op, nn, norm, random, rnn, sequence, tensor, vision)
_FLUID_MODULES += (sequence_rnn, crf, ctc)  # issue 11: LoD recurrent and structured-loss layers
_FLUID_MODULES += (control_flow, static_rnn, tensor_array)  # issue 11: control flow
_FLUID_MODULES += (dynamic_rnn,)  # issue 11: DynamicRNN (LoD control flow)
_FLUID_MODULES += (sparse,)  # issue 11: sparse gradients
_FLUID_MODULES += (rnn_cells, decode, decode_helpers)  # issue 11: the 1.8 RNN API
# fluid.layers.rnn is the function (as in fluid 1.8, it hides the module of that name), so
# it is imported once the module has been listed above
from .decode import *  # noqa: E402,F403
from .decode_helpers import *  # noqa: E402,F403
from .rnn_cells import *  # noqa: E402,F403

FLUID_LAYERS_NAMES = tuple(sorted({n for m in _FLUID_MODULES for n in m.__all__}))

__all__ = [
    *FLUID_LAYERS_NAMES,
    "FLUID_LAYERS_NAMES", "initializer", "monkey_patch_variable", "nn_initializer",
    "Constant", "ConstantInitializer", "Initializer", "LayerHelper", "MSRAInitializer",
    "Normal", "NormalInitializer", "ParamAttr", "TruncatedNormal",
    "TruncatedNormalInitializer", "Uniform", "UniformInitializer", "Xavier", "XavierInitializer",
]
