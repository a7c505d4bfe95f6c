"""fluid.core: the C++-binding names fluid's static programs touch: places, LoDTensor / Tensor,
SelectedRows, Scope, VarDesc.VarType (dtypes and variable kinds), EnforceNotMet and
EOFException, the build queries, the name suffixes, `globals()` (the FLAGS_*), the profiler
switches. The rest of fluid.core (inference engine, descriptors, graph passes) is listed apart
in docs/fluid_coverage.md.

>>> import spmd.fluid as fluid
>>> fluid.core.VarDesc.VarType.LOD_TENSOR != fluid.core.VarDesc.VarType.FP32
True
"""
from __future__ import annotations

import enum
import os
from collections.abc import MutableMapping

from ..core import CPUPlace, CUDAPinnedPlace, CUDAPlace, Scope, is_compiled_with_cuda
from ..core.dtypes import VarType, convert_dtype
from ..core.graph import Graph, Node
from ..core.lod import LoDTensor, LoDTensorArray
from ..core.places import Place
from ..core.selected_rows import SelectedRows
from ..errors import EOFException, InvalidArgumentError, SpmdError
from .core_executor import CoreExecutor as Executor

__all__ = ["CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "EOFException", "EnforceNotMet",
           "EventSortingKey", "Executor", "Graph", "LoDTensor", "LoDTensorArray", "Node",
           "Place", "ProfilerState",
           "ProgramDesc", "Scope", "SelectedRows", "Tensor", "VarDesc", "avx_supported",
           "disable_profiler", "empty_var_name", "enable_profiler", "get_cuda_device_count",
           "get_fetch_variable", "get_grad_op_desc", "globals", "grad_var_suffix",
           "has_grad_op_maker", "has_infer_inplace", "is_compiled_with_brpc",
           "is_compiled_with_cuda", "is_compiled_with_dist", "is_compiled_with_mkldnn",
           "is_profiler_enabled", "kEmptyVarName", "kGradVarSuffix", "kNewGradSuffix",
           "kTempVarName", "kZeroVarSuffix", "op_proto_and_checker_maker", "op_support_gpu",
           "reset_profiler", "set_feed_variable", "set_num_threads", "size_of_dtype"]

# every error spmd raises while building or running a program: what fluid raises from C++ as
# EnforceNotMet, so `except fluid.core.EnforceNotMet` catches spmd's errors
EnforceNotMet = SpmdError

# fluid's Tensor is LoDTensor's base; spmd has one tensor class, which carries LoD when set
Tensor = LoDTensor


class VarDesc:
    """`fluid.core.VarDesc.VarType.FP32`, `.LOD_TENSOR` and friends."""

    VarType = VarType


class ProfilerState(enum.IntEnum):
    """fluid's profiler states (`core.ProfilerState.kCPU`, ...)."""

    kDisabled = 0
    kCPU = 1
    kCUDA = 2
    kAll = 3


class EventSortingKey(enum.IntEnum):
    """fluid's profiler summary orders (`core.EventSortingKey.kTotal`, ...)."""

    kDefault = 0
    kCalls = 1
    kTotal = 2
    kMin = 3
    kMax = 4
    kAve = 5


_STATE_NAMES = {ProfilerState.kCPU: "CPU", ProfilerState.kCUDA: "GPU", ProfilerState.kAll: "All"}
_SORT_NAMES = {EventSortingKey.kDefault: None, EventSortingKey.kCalls: "calls",
               EventSortingKey.kTotal: "total", EventSortingKey.kMin: "min",
               EventSortingKey.kMax: "max", EventSortingKey.kAve: "ave"}


def get_cuda_device_count() -> int:
    """The number of GPUs this process sees (0 without CUDA).

    >>> get_cuda_device_count() >= 0
    True
    """
    if not is_compiled_with_cuda():
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def is_compiled_with_mkldnn() -> bool:
    """spmd has no MKL-DNN kernels of fluid's kind: False (programs use it to pick use_mkldnn)."""
    return False


def is_compiled_with_dist() -> bool:
    """spmd runs distributed (collective and parameter-server) programs: True."""
    return True


def is_compiled_with_brpc() -> bool:
    """spmd's parameter server talks gRPC, not brpc: False."""
    return False


def avx_supported() -> bool:
    """Whether this CPU has AVX (read from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            return " avx" in f.read()
    except OSError:
        return False


def kEmptyVarName() -> str:  # noqa: N802 - fluid's name
    return "@EMPTY@"


def kGradVarSuffix() -> str:  # noqa: N802 - fluid's name
    return "@GRAD"


def kTempVarName() -> str:  # noqa: N802 - fluid's name
    return "@TEMP@"


def kZeroVarSuffix() -> str:  # noqa: N802 - fluid's name
    return "@ZERO"


def kNewGradSuffix() -> str:  # noqa: N802 - fluid's name
    return "@NEWGRAD@"


empty_var_name = kEmptyVarName
grad_var_suffix = kGradVarSuffix


def size_of_dtype(dtype) -> int:
    """Bytes per element of a dtype (any spelling: VarType.FP32, 'float32', np.float32)."""
    import numpy as np

    return np.dtype(convert_dtype(dtype)).itemsize


def op_support_gpu(op_type: str) -> bool:
    """Whether spmd has a GPU (cupy) kernel for `op_type`: every kernel is written once against
    numpy/cupy, so an op with a kernel runs on a GPU where cupy is installed."""
    from ..kernels.registry import get_kernel

    if not is_compiled_with_cuda():
        return False
    try:
        get_kernel(op_type)
    except Exception:  # no kernel of that name: not on a GPU either
        return False
    return True


def set_num_threads(num: int) -> None:
    """The threads numpy's BLAS may use, as fluid's CPU math library threads (only honoured
    when set before numpy loads its BLAS, as fluid's is before its first op)."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(int(num))


def get_fetch_variable(scope, var_name: str, index: int):
    """The `index`-th tensor of the list `var_name` holds in `scope` (fluid's feed / fetch
    holders: scope.var(name).get_fetch_list(), set_feed_variable)."""
    holder = scope.tensor_list(var_name)
    if not 0 <= index < len(holder):
        raise IndexError(f"get_fetch_variable: {var_name!r} in this scope holds "
                         f"{len(holder)} values, there is no index {index}")
    return holder[index]


def _create_loaded_parameter(var_list, scope, executor) -> None:
    """fluid 1.8's core._create_loaded_parameter: each variable of `var_list` the scope lacks
    is made there as a tensor of its shape and dtype on `executor`'s place (zeros where fluid
    leaves the memory uninitialized), for the caller to set() the loaded values into."""
    import numpy as np

    for var in var_list:
        if scope.find_var(var.name) is not None:
            continue
        shape = [int(d) for d in var.shape]
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(
                f"_create_loaded_parameter: variable '{var.name}' has the unknown shape "
                f"{shape}; only variables of a fixed shape (parameters, optimizer states) can "
                f"be made before loading")
        scope.var(var.name).get_tensor().set(
            np.zeros(shape, dtype=convert_dtype(var.dtype)), executor._default_executor.place)


def set_feed_variable(scope, value, var_name: str, index: int) -> None:
    """Put `value` (a LoDTensor or an array) at `index` of the list `var_name` holds."""
    holder = scope.tensor_list(var_name)
    while len(holder) <= index:
        holder.append(None)
    holder[index] = value if isinstance(value, LoDTensor) else LoDTensor(value)


# flags of fluid's core.globals() beyond the public ones that programs and Paddle's op_test
# read, each with spmd's fixed value (spmd has no MKL-DNN kernels)
_FIXED_FLAGS = {"FLAGS_use_mkldnn": False}


class _Globals(MutableMapping):
    """fluid's `core.globals()`: its public FLAGS_* read and set like a dict (through
    fluid.get_flags / set_flags, so a value set here is the one spmd acts on), and the
    fixed ones in _FIXED_FLAGS."""

    def _names(self):
        from .device import _FLUID_DEFAULTS

        return set(_FLUID_DEFAULTS) | set(_FIXED_FLAGS)

    def __getitem__(self, name):
        from .device import get_flags

        if name in _FIXED_FLAGS:
            return _FIXED_FLAGS[name]
        if name not in self._names():
            raise KeyError(name)
        return get_flags(name)[name]

    def __setitem__(self, name, value):
        from .device import set_flags

        if name in _FIXED_FLAGS:
            if bool(value) != bool(_FIXED_FLAGS[name]):
                raise InvalidArgumentError(
                    f"core.globals()['{name}'] = {value!r}: spmd has no MKL-DNN kernels, the "
                    f"flag stays {_FIXED_FLAGS[name]}")
            return
        set_flags({name: value})

    def __delitem__(self, name):
        raise TypeError("core.globals(): a flag cannot be deleted, set it instead")

    def __iter__(self):
        return iter(sorted(self._names()))

    def __len__(self):
        return len(self._names())

    def is_public(self, name) -> bool:
        return name in self._names()


_GLOBALS = _Globals()


def globals() -> _Globals:  # noqa: A001 - fluid's name
    """The FLAGS_* registry: `fluid.core.globals()['FLAGS_check_nan_inf']`."""
    return _GLOBALS


def enable_profiler(state) -> None:
    """Start the profiler (fluid.profiler.start_profiler) in `state` (a ProfilerState)."""
    from ..profiler import start_profiler

    start_profiler(_STATE_NAMES.get(ProfilerState(state), "All"))


def disable_profiler(sorted_key, profile_path: str) -> None:
    """Stop it and print the summary ordered by `sorted_key` (an EventSortingKey)."""
    from ..profiler import stop_profiler

    stop_profiler(_SORT_NAMES[EventSortingKey(sorted_key)], profile_path)


def reset_profiler() -> None:
    """Forget the events recorded so far."""
    from ..profiler import reset_profiler as reset

    reset()


def _set_eager_deletion_mode(threshold: float, fraction: float = 1.0,
                             fast_mode: bool = True) -> None:
    """fluid's garbage-collection switch; spmd's plan frees every value right after its last
    reader in every mode (what eager deletion does), so the mode changes nothing here."""


def _set_fuse_parameter_group_size(size: int) -> None:
    """fluid's FLAGS_fuse_parameter_groups_size; spmd fuses gradients by bytes
    (FLAGS_fuse_parameter_memory_size), so the group size changes nothing here."""


def _set_fuse_parameter_memory_size(size: float) -> None:
    """fluid's FLAGS_fuse_parameter_memory_size (MB per fused gradient bucket), which spmd's
    fused all-reduce reads when a data-parallel program is compiled."""
    from .device import set_flags

    set_flags({"FLAGS_fuse_parameter_memory_size": float(size)})


def _get_fuse_parameter_memory_size() -> float:
    from .device import get_flags

    return get_flags("FLAGS_fuse_parameter_memory_size")["FLAGS_fuse_parameter_memory_size"]


class _OpRole(enum.IntEnum):
    """fluid's OpRole numbers (the `op_role` attribute fluid's ops carry)."""

    Forward = 0x0000
    Backward = 0x0001
    Optimize = 0x0002
    RPC = 0x0004
    Dist = 0x0008
    LRSched = 0x0010
    Loss = 0x0100
    NotSpecified = 0x1000


class op_proto_and_checker_maker:  # noqa: N801 - fluid's name
    """The names of the attributes every fluid op carries, and the OpRole numbers. spmd keeps
    an op's role as a field of the op (spmd/core/operator.py), not as an attribute."""

    OpRole = _OpRole

    @staticmethod
    def kOpRoleAttrName() -> str:  # noqa: N802 - fluid's name
        return "op_role"

    @staticmethod
    def kOpRoleVarAttrName() -> str:  # noqa: N802
        return "op_role_var"

    @staticmethod
    def kOpNameScopeAttrName() -> str:  # noqa: N802
        return "op_namescope"

    @staticmethod
    def kOpCreationCallstackAttrName() -> str:  # noqa: N802
        return "op_callstack"

    @staticmethod
    def kOpDeviceAttrName() -> str:  # noqa: N802
        return "op_device"


def _get_all_register_op_kernels() -> dict[str, list[str]]:
    """{op type: its kernels}, one per place spmd runs it on (every kernel is written once
    against numpy / cupy), spelled as fluid's OpKernelType."""
    from ..kernels.registry import KERNELS

    places = ["CPUPlace"] + (["CUDAPlace(0)"] if is_compiled_with_cuda() else [])
    return {t: [f"data_type[float]:data_layout[ANY_LAYOUT]:place[{p}]:library_type[PLAIN]"
                for p in places] for t in sorted(KERNELS.index())}


def has_grad_op_maker(op_type: str) -> bool:
    """Whether spmd's op `op_type` has a gradient."""
    from ..autodiff.op_grad import has_grad_op_maker as has_grad

    return has_grad(op_type)


def has_infer_inplace(op_type: str) -> bool:
    """Whether op `op_type`'s kernel may write an output over an input (spmd declares it on
    the kernel, `reuses=` / `inplace=`; fluid's InplaceOpInference)."""
    from ..kernels.registry import KERNELS, inplace_slots, reuse_pairs

    if op_type not in KERNELS.index() and not KERNELS.registered(op_type):
        return False
    return bool(reuse_pairs(op_type) or inplace_slots(op_type))


def get_grad_op_desc(op_desc, no_grad_set, grad_sub_block_list=()):
    """The grad ops of one op, as fluid's binding (spmd/autodiff/op_grad.py)."""
    from ..autodiff.op_grad import get_grad_op_desc as grad_descs

    return grad_descs(op_desc, no_grad_set, grad_sub_block_list)


def ProgramDesc():  # noqa: N802 - fluid's class name
    """The desc of a new, empty program (`core.ProgramDesc().block(0)`)."""
    from ..core.program import ProgramDesc as new_desc

    return new_desc()


def __unittest_throw_exception__():  # noqa: N807 - fluid's name
    """Raise EnforceNotMet, as fluid's binding does for its exception test."""
    raise EnforceNotMet("test exception (fluid.core.__unittest_throw_exception__: the message "
                        "fluid's binding raises)")


def is_profiler_enabled() -> bool:
    """Whether the profiler is recording."""
    from ..profiler import active

    return active() is not None
