"""fluid.core: the few C++-binding names fluid scripts touch (places, VarDesc.VarType, Scope)."""
from ..core import CPUPlace, CUDAPinnedPlace, CUDAPlace, Scope, is_compiled_with_cuda  # noqa: F401
from ..core.dtypes import VarType
from ..errors import EOFException  # noqa: F401 - fluid.core.EOFException


class VarDesc:
    """`fluid.core.VarDesc.VarType.FP32` and friends."""

    VarType = VarType


def get_cuda_device_count() -> int:
    if not is_compiled_with_cuda():
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()
