"""fluid.framework: the IR classes and default programs, name_scope, require_version and
in_dygraph_mode; like fluid's, it also holds the place helpers (cpu_places, cuda_places, ...),
device_guard and get_flags / set_flags."""
from __future__ import annotations

import contextlib
import re

from ..core import (
    Block,
    Operator,
    Program,
    Variable,
    default_main_program,
    default_startup_program,
    program_guard,
    switch_main_program,
    switch_startup_program,
)
from ..core.places import (  # noqa: F401 - fluid.framework holds the place helpers too
    cpu_places,
    cuda_pinned_places,
    cuda_places,
    is_compiled_with_cuda,
)
from ..core.program import tag_new_ops
from ..core.variable import Parameter
from ..errors import InvalidArgumentError, PreconditionError
from ..ops.proto import OpProtoHolder  # noqa: F401 - fluid.framework's name

# fluid 1.8 has these at its top level (from dygraph.base); fluid's face star-imports this
# module's __all__, which is how they reach `fluid.enable_dygraph` and friends
from .device import device_guard, get_flags, set_flags  # noqa: F401 - as fluid.framework
from .dygraph.base import disable_dygraph, disable_imperative, enable_dygraph, enable_imperative

__all__ = ["Block", "Operator", "Parameter", "Program", "Variable", "default_main_program",
           "default_startup_program", "disable_dygraph", "disable_imperative", "enable_dygraph",
           "enable_imperative", "in_dygraph_mode", "name_scope", "program_guard",
           "require_version", "switch_main_program", "switch_startup_program"]

# the fluid version spmd's API follows: programs written for fluid <= 1.8 run
FLUID_VERSION = "1.8.5"

_scope_path: list[str] = []  # the names of the open name_scopes, outermost first
_scope_children: dict[tuple, dict[str, int]] = {}  # parent path -> child name -> times used


@contextlib.contextmanager
def name_scope(prefix: str | None = None):
    """Group the ops built inside: each gets the attribute `op_namescope` '/outer/inner/'
    (a name used again under the same parent becomes name_1, name_2, ... as in fluid).

    >>> import spmd.fluid as fluid
    >>> with fluid.name_scope("encoder"):
    ...     pass
    """
    if not prefix:
        raise InvalidArgumentError("name_scope: the prefix must be a non-empty string")
    parent = tuple(_scope_path)
    used = _scope_children.setdefault(parent, {})
    count = used.get(prefix, 0)
    used[prefix] = count + 1
    _scope_path.append(prefix if count == 0 else f"{prefix}_{count}")
    path = "/" + "/".join(_scope_path) + "/"
    try:
        with tag_new_ops("op_namescope", path):  # an inner scope names its own ops first
            yield
    finally:
        _scope_path.pop()


def in_dygraph_mode() -> bool:
    """Whether fluid's dygraph mode is on: never, spmd runs static programs.

    >>> in_dygraph_mode()
    False
    """
    return False


def _version_parts(version, what: str) -> list[int]:
    if not isinstance(version, str):
        raise TypeError(f"The type of '{what}' in require_version must be str, but received "
                        f"{type(version).__name__}")
    match = re.match(r"\d+(\.\d+){0,3}", version)
    if match is None or match.group() != version:
        raise InvalidArgumentError(
            f"The value of '{what}' in require_version must be in format '\\d+(\\.\\d+){{0,3}}'"
            f", like '1.5.2.0', but received {version}")
    parts = [int(p) for p in version.split(".")]
    return parts + [0] * (4 - len(parts))


def require_version(min_version: str, max_version: str | None = None) -> None:
    """Check that the program's fluid version range admits the fluid spmd speaks (1.8.5):
    programs for fluid <= 1.8 run; one that needs a later fluid is refused with the reason.

    >>> require_version("1.6.0")
    >>> require_version("1.5", "1.8.5")
    """
    low = _version_parts(min_version, "min_version")
    high = None if max_version is None else _version_parts(max_version, "max_version")
    have = _version_parts(FLUID_VERSION, "installed")
    if high is not None and not low <= have <= high:
        raise PreconditionError(
            f"VersionError: PaddlePaddle version in [{min_version}, {max_version}] required, "
            f"but {FLUID_VERSION} installed: spmd runs fluid {FLUID_VERSION} programs; a "
            f"program for another fluid version range may use names spmd does not have")
    if low > have:
        raise PreconditionError(
            f"VersionError: PaddlePaddle version {min_version} or higher is required, but "
            f"{FLUID_VERSION} installed: spmd speaks fluid {FLUID_VERSION}'s API (fluid <= 1.8 "
            f"programs run); lower the program's requirement if it uses only fluid 1.8 names")


def grad_var_name(var_name: str) -> str:
    """The name of `var_name`'s gradient: `var_name@GRAD`, as fluid names it."""
    return var_name + "@GRAD"


def convert_np_dtype_to_dtype_(np_dtype):
    """fluid's VarType of a numpy dtype (or its name): VarType.FP32 for np.float32, ...

    >>> convert_np_dtype_to_dtype_("int64") == "int64"
    True
    """
    from ..core.dtypes import VarType, convert_dtype

    name = convert_dtype(np_dtype)
    return next(v for v in VarType if v == name)


def _get_var(name: str, program=None):
    """The variable `name` of `program`'s global block (the default main program's)."""
    program = default_main_program() if program is None else program
    return program.global_block().var(name)


def _current_expected_place():
    """The place ops run on by default: the first GPU where spmd sees one, else the CPU."""
    from ..core.places import CPUPlace, CUDAPlace

    return CUDAPlace(0) if is_compiled_with_cuda() else CPUPlace()


def dygraph_only(func):
    """fluid's decorator of dygraph-only methods: in spmd's static programs calling one is
    refused, naming it."""
    import functools

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        raise PreconditionError(f"{func.__name__} works only in dygraph mode, which spmd does "
                                f"not run; write the model as a static program")

    return wrapper
