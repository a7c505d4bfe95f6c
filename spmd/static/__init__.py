"""paddle.static's face: `import spmd.static as static` (or `paddle.static` after
`import spmd as paddle`). A name is imported at its first use."""
from .. import layers as _layers  # noqa: F401 - Variable's operators and var[...]
from .. import lazy as _lazy
from .. import ops as _ops  # noqa: F401 - the op schema the IR builds operators with
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

__getattr__, __dir__ = _lazy.attach(__name__, {
    "append_backward": "..autodiff:append_backward",
    "gradients": "..autodiff:gradients",
    "Executor": "..executor:Executor",
    "CompiledProgram": "..executor.compiled:CompiledProgram",
    "ParallelExecutor": "..executor.parallel_executor:ParallelExecutor",
    "load": "..io:load",
    "load_inference_model": "..io:load_inference_model",
    "save": "..io:save",
    "save_inference_model": "..io:save_inference_model",
    "nn": "..layers.static_nn",
    "data": "..layers.io:static_data",
    "ParamAttr": "..layers.param_attr:ParamAttr",
    "create_global_var": "..layers.tensor:create_global_var",
    "create_parameter": "..layers.tensor:create_parameter",
    "BuildStrategy": "..passes.strategy:BuildStrategy",
    "ExecutionStrategy": "..passes.strategy:ExecutionStrategy",
})

__all__ = [
    "BuildStrategy", "CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "CompiledProgram",
    "ExecutionStrategy", "Executor", "ParallelExecutor", "ParamAttr", "Parameter", "Program",
    "Scope", "Variable",
    "append_backward", "cpu_places", "create_global_var", "create_parameter", "cuda_places",
    "data", "default_main_program", "default_startup_program", "global_scope", "gradients",
    "load", "load_inference_model", "nn", "program_guard", "save", "save_inference_model",
    "scope_guard",
]
