"""The IR: dtypes, Variable/Parameter, Operator, Block, Program, unique_name, Scope, places."""

from . import unique_name
from .dtypes import VarType, convert_dtype
from .operator import Operator, OpRole
from .places import (
    CPUPlace,
    CUDAPinnedPlace,
    CUDAPlace,
    cpu_places,
    cuda_pinned_places,
    cuda_places,
    is_compiled_with_cuda,
)
from .program import (
    Block,
    Program,
    default_main_program,
    default_startup_program,
    program_guard,
    switch_main_program,
    switch_startup_program,
)
from .scope import Scope, global_scope, scope_guard
from .variable import Parameter, Variable

__all__ = [
    "Block",
    "CPUPlace",
    "CUDAPinnedPlace",
    "CUDAPlace",
    "OpRole",
    "Operator",
    "Parameter",
    "Program",
    "Scope",
    "VarType",
    "Variable",
    "convert_dtype",
    "cpu_places",
    "cuda_pinned_places", "cuda_places",
    "default_main_program",
    "default_startup_program",
    "global_scope",
    "is_compiled_with_cuda",
    "program_guard",
    "scope_guard",
    "switch_main_program",
    "switch_startup_program",
    "unique_name",
]
