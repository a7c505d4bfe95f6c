"""fluid.core: the few C++-binding names fluid scripts touch (places, VarDesc.VarType, Scope,
EOFException, is_compiled_with_cuda / _mkldnn, get_cuda_device_count).

>>> import spmd.fluid as fluid
>>> fluid.core.VarDesc.VarType.FP32 is not None
True
"""
from ..core import CPUPlace, CUDAPinnedPlace, CUDAPlace, Scope, is_compiled_with_cuda
from ..core.dtypes import VarType
from ..core.lod import LoDTensor, LoDTensorArray
from ..errors import EOFException

__all__ = ["CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "EOFException", "LoDTensor",
           "LoDTensorArray", "Scope", "VarDesc",
           "get_cuda_device_count", "is_compiled_with_cuda", "is_compiled_with_mkldnn"]


class VarDesc:
    """`fluid.core.VarDesc.VarType.FP32` and friends."""

    VarType = VarType


def get_cuda_device_count() -> int:
    """The number of GPUs this process sees (0 without CUDA), as fluid's programs use it to
    pick the device count.

    >>> get_cuda_device_count() >= 0
    True
    """
    if not is_compiled_with_cuda():
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def is_compiled_with_mkldnn() -> bool:
    """spmd has no MKL-DNN kernels: False (programs use it to choose use_mkldnn flags).

    >>> is_compiled_with_mkldnn()
    False
    """
    return False
