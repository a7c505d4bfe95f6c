"""Places say where arrays live: CPUPlace (numpy) or CUDAPlace(i) (cupy on GPU i)."""
from __future__ import annotations

import numpy as np

from ..errors import PreconditionError


class Place:
    """fluid.core.Place: any place. `Place().set_place(fluid.CPUPlace())` makes it that place,
    as fluid's (a variant over the three kinds) does."""

    is_gpu = False
    _TYPE_CODE = -1  # fluid's variant index: CUDAPlace 0, CPUPlace 1, CUDAPinnedPlace 2

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.__dict__.items()))))

    def _type(self) -> int:
        """fluid's code of the kind of place (what programs compare: `p._type() ==
        fluid.CPUPlace()._type()`)."""
        return self._TYPE_CODE

    def _equals(self, other) -> bool:
        return self == other

    def set_place(self, place: Place) -> None:
        """Become `place` (fluid's core.Place().set_place(p))."""
        if not isinstance(place, Place):
            raise TypeError(f"Place.set_place: expected a place (fluid.CPUPlace(), ...), "
                            f"got {type(place).__name__}")
        self.__class__ = type(place)
        self.__dict__.clear()
        self.__dict__.update(place.__dict__)

    def is_cpu_place(self) -> bool:
        return type(self) is CPUPlace

    def is_gpu_place(self) -> bool:
        return self.is_gpu

    def is_cuda_pinned_place(self) -> bool:
        return type(self) is CUDAPinnedPlace


class CPUPlace(Place):
    """Host memory, numpy arrays."""

    _TYPE_CODE = 1

    def __repr__(self):
        return "CPUPlace"


class CUDAPlace(Place):
    """GPU `device_id`, cupy arrays. cupy is imported only when an array is first placed here."""

    is_gpu = True
    _TYPE_CODE = 0

    def __init__(self, device_id: int = 0):
        self.device_id = int(device_id)

    def __repr__(self):
        return f"CUDAPlace({self.device_id})"


class CUDAPinnedPlace(CPUPlace):
    """Accepted for fluid compatibility; arrays stay in ordinary host memory."""

    _TYPE_CODE = 2

    def __repr__(self):
        return "CUDAPinnedPlace"


def array_module(place: Place):
    """numpy for host places, cupy (imported here, lazily) for GPU places."""
    if place is not None and place.is_gpu:
        try:
            import cupy
        except ImportError as e:
            raise PreconditionError(
                f"{place!r} needs cupy to put arrays on the GPU, and cupy does not import "
                f"here ({e}). Install spmd with the CUDA extra that matches your driver "
                f"(pip install 'spmd[cuda12]' or 'spmd[cuda13]'), or run on the CPU: use "
                f"fluid.CPUPlace() where the program makes fluid.CUDAPlace(...) (often a "
                f"--use_gpu flag)") from None
        return cupy
    import numpy

    return numpy


def is_compiled_with_cuda() -> bool:
    """True when cupy imports and sees at least one GPU; never raises."""
    return cuda_unavailable_reason() is None


def cuda_unavailable_reason() -> str | None:
    """Why no GPU can be used here (said by tests/gpu and bench/gpu.py when they skip), or
    None when cupy imports and sees a GPU; never raises."""
    try:
        import cupy
    except ImportError as e:
        return f"cupy is not installed ({e}); pip install -e '.[cuda12]' or '.[cuda13]'"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - any CUDA runtime failure means no usable GPU
        return f"the CUDA runtime is unusable ({e})"
    return None if count > 0 else "no CUDA device is visible"


def cuda_places(device_ids=None):
    if device_ids is None:
        import cupy

        device_ids = range(cupy.cuda.runtime.getDeviceCount())
    return [CUDAPlace(i) for i in device_ids]


def cuda_pinned_places(device_count: int | None = None):
    """fluid.cuda_pinned_places: page-locked host places, one per GPU by default; like fluid,
    only where spmd can use CUDA."""
    if not is_compiled_with_cuda():
        from ..errors import PreconditionError

        raise PreconditionError(
            "cuda_pinned_places: CUDA is not available (cupy is not installed or sees no GPU); "
            "use fluid.cpu_places() on this machine, or pip install -e '.[cuda12]'")
    if device_count is None:
        device_count = len(cuda_places())
    return [CUDAPinnedPlace()] * device_count


def cpu_places(device_count: int | None = None):
    if device_count is None:
        from ..flags import flags

        device_count = flags().cpu_num
    return [CPUPlace()] * device_count


def host_array(a, dtype=None, copy=None):
    """`a` (numpy or cupy) as a numpy array, following numpy's `__array__(dtype, copy)` protocol:
    copy=True always returns a fresh array, so `np.array(tensor)` never aliases the scope."""
    if not isinstance(a, np.ndarray):  # cupy: .get() already makes a host copy
        a, copy = a.get(), None
    if copy is False and dtype is not None and np.dtype(dtype) != a.dtype:
        raise ValueError(f"cannot convert {a.dtype} to {np.dtype(dtype)} without a copy")
    if dtype is not None and np.dtype(dtype) != a.dtype:
        return a.astype(dtype)
    return a.copy() if copy else a
