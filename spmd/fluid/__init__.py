"""fluid 1.x's face: `import spmd.fluid as fluid` and fluid scripts run unchanged.

Thin re-exports only; fluid's module names are kept (fluid.layers, fluid.compiler,
fluid.optimizer, fluid.io, ...), so `from spmd.fluid import compiler` works as in fluid.
"""
from .. import kernels as _kernels  # noqa: F401 - fill the kernel table
from .. import ops as _ops  # noqa: F401 - fill the op table
from ..autodiff import append_backward, gradients
from ..core import (
    CPUPlace,
    CUDAPinnedPlace,
    CUDAPlace,
    Program,
    Scope,
    Variable,
    cpu_places,
    cuda_pinned_places,
    cuda_places,
    default_main_program,
    default_startup_program,
    global_scope,
    is_compiled_with_cuda,
    program_guard,
    scope_guard,
    unique_name,
)
from ..core.lod import LoDTensor, LoDTensorArray, create_lod_tensor, create_random_int_lodtensor
from ..core.variable import Parameter
from ..executor import Executor
from ..io import load, load_program_state, save, set_program_state
from ..layers.io import fluid_data as data
from ..layers.param_attr import ParamAttr
from ..layers.static_nn import embedding
from ..layers.weight_norm import WeightNormParamAttr
from . import (
    backward,
    clip,
    compiler,
    contrib,
    core,
    data_feeder,
    dygraph,
    executor,
    framework,
    incubate,
    initializer,
    input,
    install_check,
    io,
    layers,
    learning_rate_decay,
    log_helper,
    metrics,
    nets,
    optimizer,
    param_attr,
    profiler,
    reader,
    regularizer,
    transpiler,
    wrapped_decorator,
)
from .compiler import BuildStrategy, CompiledProgram, ExecutionStrategy
from .data_feeder import *  # noqa: F403 - DataFeeder
from .device import device_guard, get_flags, set_flags
from .framework import *  # noqa: F403 - name_scope, in_dygraph_mode, require_version, ...
from .input import one_hot
from .parallel_executor import ParallelExecutor
from .reader import *  # noqa: F403 - DataLoader, PyReader
from .transpiler import (
    DistributeTranspiler,
    DistributeTranspilerConfig,
    memory_optimize,
    release_memory,
)

__all__ = [
    "LoDTensor", "LoDTensorArray", "create_lod_tensor", "create_random_int_lodtensor",
    "BuildStrategy", "CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "CompiledProgram",
    "DistributeTranspiler", "DistributeTranspilerConfig", "ExecutionStrategy", "Executor",
    "ParallelExecutor", "ParamAttr", "Parameter", "Program", "Scope", "Variable",
    "WeightNormParamAttr", "cuda_pinned_places", "device_guard", "get_flags", "input",
    "learning_rate_decay", "one_hot", "set_flags", "contrib",
    "append_backward", "backward", "clip", "compiler", "core", "cpu_places", "cuda_places",
    "data", "default_main_program", "default_startup_program", "embedding", "executor",
    "framework", "global_scope", "gradients", "initializer", "io", "is_compiled_with_cuda",
    "layers", "load", "load_program_state", "memory_optimize", "optimizer", "param_attr",
    "program_guard", "regularizer", "release_memory", "save", "scope_guard",
    "set_program_state", "transpiler", "unique_name", "wrapped_decorator",
    "data_feeder", "dygraph", "incubate", "install_check", "log_helper", "metrics", "nets",
    "profiler", "reader",
    *data_feeder.__all__, *framework.__all__, *reader.__all__,
]
