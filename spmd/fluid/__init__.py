"""fluid 1.x's face: `import spmd.fluid as fluid` and fluid scripts run unchanged.

Thin re-exports only; fluid's module names are kept (fluid.layers, fluid.compiler,
fluid.optimizer, fluid.io, ...), so `from spmd.fluid import compiler` works as in fluid.
A name is imported at its first use (spmd.lazy.attach): `import spmd.fluid` loads neither
the parameter server nor fleet nor the reader machinery until a script asks for them.
"""
import sys as _sys
import types as _types
from collections.abc import Callable as _Callable

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
    cuda_pinned_places,
    cuda_places,
    default_main_program,
    default_startup_program,
    global_scope,
    is_compiled_with_cuda,
    program_guard,
    scope_guard,
)
from ..core.variable import Parameter

# the names of `from .data_feeder import *`, `from .framework import *` and `from .reader
# import *` (test_imports checks them against those modules' __all__)
_DATA_FEEDER_ALL = ("DataFeeder",)
_FRAMEWORK_ALL = (
    "Block", "Operator", "Parameter", "Program", "Variable", "default_main_program",
    "default_startup_program", "disable_dygraph", "disable_imperative", "enable_dygraph",
    "enable_imperative", "in_dygraph_mode", "name_scope", "program_guard", "require_version",
    "switch_main_program", "switch_startup_program",
)
_READER_ALL = ("DataLoader", "PyReader", "default_collate_fn")

__getattr__, __dir__ = _lazy.attach(__name__, {
    "append_backward": "..autodiff:append_backward",
    "gradients": "..autodiff:gradients",
    "LoDTensor": "..core.lod:LoDTensor",
    "LoDTensorArray": "..core.lod:LoDTensorArray",
    "Tensor": "..core.lod:LoDTensor",
    "create_lod_tensor": "..core.lod:create_lod_tensor",
    "create_random_int_lodtensor": "..core.lod:create_random_int_lodtensor",
    "Executor": "..executor:Executor",
    "load": "..io:load",
    "load_program_state": "..io:load_program_state",
    "save": "..io:save",
    "set_program_state": "..io:set_program_state",
    "data": "..layers.io:fluid_data",
    "ParamAttr": "..layers.param_attr:ParamAttr",
    "embedding": "..layers.static_nn:embedding",
    "WeightNormParamAttr": "..layers.weight_norm:WeightNormParamAttr",
    "BuildStrategy": ".compiler:BuildStrategy",
    "CompiledProgram": ".compiler:CompiledProgram",
    "ExecutionStrategy": ".compiler:ExecutionStrategy",
    "device_guard": ".device:device_guard",
    "get_flags": ".device:get_flags",
    "set_flags": ".device:set_flags",
    "one_hot": ".input:one_hot",
    "ParallelExecutor": ".parallel_executor:ParallelExecutor",
    "DataFeedDesc": ".data_feed_desc:DataFeedDesc",
    "DatasetFactory": ".dataset:DatasetFactory",
    "InMemoryDataset": ".dataset:InMemoryDataset",
    "QueueDataset": ".dataset:QueueDataset",
    "DistributeTranspiler": ".transpiler:DistributeTranspiler",
    "DistributeTranspilerConfig": ".transpiler:DistributeTranspilerConfig",
    "memory_optimize": ".transpiler:memory_optimize",
    "release_memory": ".transpiler:release_memory",
    # fluid's `from .dygraph.layers import *` / `.dygraph.nn import *`: the classes that build
    # static programs in spmd (the other dygraph.nn classes stay under fluid.dygraph)
    "Layer": ".dygraph.layers:Layer",
    "Embedding": ".dygraph.static_nn:Embedding",
    "LayerNorm": ".dygraph.static_nn:LayerNorm",
    **{name: f".data_feeder:{name}" for name in _DATA_FEEDER_ALL},
    **{name: f".framework:{name}" for name in _FRAMEWORK_ALL if name not in globals()},
    **{name: f".reader:{name}" for name in _READER_ALL},
}, submodules=True)  # and fluid.layers, fluid.io, fluid.incubate, ...: the modules of fluid/

__all__ = [
    "LoDTensor", "LoDTensorArray", "Tensor", "create_lod_tensor", "create_random_int_lodtensor",
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
    *_DATA_FEEDER_ALL, *_FRAMEWORK_ALL, *_READER_ALL,
]



# Submodules whose name their package's attribute gives to a function, as in fluid 1.8,
# where `from .data import *` makes `fluid.data` the function and `from .rnn import *` makes
# `fluid.layers.rnn` the function, while `import paddle.fluid.data` still finds the module.
#
# `_keep_functions(package, {name: loader})` gives the package's module a class whose properties
# return the functions: the import system's binding of the submodule to the attribute is
# ignored (sys.modules holds the submodule as usual), while a program that assigns another value
# to the attribute gets that value.
def _keep_functions(package: str, functions: dict[str, _Callable[[], object]]) -> None:
    """Make `package.<name>` always `functions[name]()` (a function, imported at first use)."""
    module = _sys.modules[package]
    module.__class__ = type("FluidPackage", (_types.ModuleType,), {
        name: _function_property(f"{package}.{name}", get) for name, get in functions.items()})


def _function_property(qualified: str, get: _Callable[[], object]) -> property:
    assigned = f"_assigned {qualified}"  # where a value a program assigns is kept

    def getter(module):
        return vars(module)[assigned] if assigned in vars(module) else get()

    def setter(module, value):
        if isinstance(value, _types.ModuleType) and value.__name__ == qualified:
            return  # the import system binding the submodule: the function stays
        vars(module)[assigned] = value

    return property(getter, setter, doc=f"{qualified}: a function (its module is imported "
                                        f"by that name)")


def _data_function():
    from ..layers.io import fluid_data

    return fluid_data


# the attribute fluid.data is the function, the module fluid.data (data.py) is fluid's module
# of that name (`from paddle.fluid.data import data`), as in fluid 1.8
_keep_functions(__name__, {"data": _data_function})
