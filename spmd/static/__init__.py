"""paddle.static's face: `import spmd.static as static` (or `paddle.static` after
`import spmd as paddle`)."""
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
    cuda_places,
    default_main_program,
    default_startup_program,
    global_scope,
    program_guard,
    scope_guard,
)
from ..core.variable import Parameter
from ..executor import Executor
from ..executor.compiled import CompiledProgram
from ..executor.parallel_executor import ParallelExecutor
from ..io import load, load_inference_model, save, save_inference_model
from ..layers import static_nn as nn
from ..layers.io import static_data as data
from ..layers.param_attr import ParamAttr
from ..layers.tensor import create_global_var, create_parameter
from ..passes.strategy import BuildStrategy, ExecutionStrategy

__all__ = [
    "BuildStrategy", "CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "CompiledProgram",
    "ExecutionStrategy", "Executor", "ParallelExecutor", "ParamAttr", "Parameter", "Program",
    "Scope", "Variable",
    "append_backward", "cpu_places", "create_global_var", "create_parameter", "cuda_places",
    "data", "default_main_program", "default_startup_program", "global_scope", "gradients",
    "load", "load_inference_model", "nn", "program_guard", "save", "save_inference_model",
    "scope_guard",
]
