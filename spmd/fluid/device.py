"""fluid.device_guard, fluid.set_flags and fluid.get_flags.

device_guard records fluid's `op_device` attribute ('cpu', 'gpu' or 'gpu:N') on the ops built
inside it, as fluid 1.8 does for pipeline programs; spmd runs every op of a program on the
place the program runs on, so the attribute is kept for the program's sake only.

set_flags / get_flags read and write fluid 1.8's public FLAGS_* through the environment
variables spmd/flags.py reads, so a value set in code is the value spmd uses. spmd acts on
FLAGS_check_nan_inf (from the next run on: plans compiled before are rebuilt) and
FLAGS_fuse_parameter_memory_size (read when a data-parallel program is compiled, on its first
run); setting any other public flag is accepted and warns once that spmd does not act on it.

>>> import spmd.fluid as fluid
>>> fluid.get_flags("FLAGS_fuse_parameter_memory_size")
{'FLAGS_fuse_parameter_memory_size': 32.0}
"""
from __future__ import annotations

import contextlib
import os
import warnings

from ..core.program import tag_new_ops
from ..errors import InvalidArgumentError
from ..flags import flags, note_changed

__all__ = ["device_guard", "get_flags", "set_flags"]

# fluid 1.8.5's public flags and their defaults there (core.globals(), is_public)
_FLUID_DEFAULTS = {
    "FLAGS_allocator_strategy": "auto_growth", "FLAGS_benchmark": False,
    "FLAGS_check_nan_inf": False, "FLAGS_cpu_deterministic": False,
    "FLAGS_eager_delete_tensor_gb": 0.0, "FLAGS_enable_parallel_graph": False,
    "FLAGS_enable_rpc_profiler": False, "FLAGS_fraction_of_cpu_memory_to_use": 1.0,
    "FLAGS_fuse_parameter_groups_size": 1, "FLAGS_fuse_parameter_memory_size": -1.0,
    "FLAGS_init_allocated_mem": False, "FLAGS_initial_cpu_memory_in_mb": 500,
    "FLAGS_inner_op_parallelism": 0, "FLAGS_memory_fraction_of_eager_deletion": 1.0,
    "FLAGS_multiple_of_cupti_buffer_size": 1, "FLAGS_paddle_num_threads": 1,
    "FLAGS_pe_profile_fname": "", "FLAGS_print_sub_graph_dir": "",
    "FLAGS_reader_queue_speed_test_mode": False, "FLAGS_tracer_profile_fname": "xxgperf",
    "FLAGS_use_pinned_memory": True, "FLAGS_use_system_allocator": False,
}
_ACTED_ON = {"FLAGS_fuse_parameter_memory_size":
             lambda: flags().fuse_parameter_memory_size_mb,
             # read when a plan is built (spmd/executor/plan.py, numeric_check.py)
             "FLAGS_check_nan_inf": lambda: flags().check_nan_inf}
_warned: set[str] = set()


def _check_public(name, verb: str):
    if name not in _FLUID_DEFAULTS:
        raise InvalidArgumentError(
            f"Flag {name} cannot {verb} its value through this function: fluid 1.8's public "
            f"flags are {sorted(_FLUID_DEFAULTS)}")


def set_flags(flags_dict: dict):
    """Set public FLAGS_* for this process (and the processes it starts)."""
    if not isinstance(flags_dict, dict):
        raise InvalidArgumentError(
            f"set_flags expects a dict FLAGS_name -> value, got {type(flags_dict).__name__}")
    for name in flags_dict:
        _check_public(name, "set")
    for name, value in flags_dict.items():
        text = str(int(value) if isinstance(value, bool) else value)
        if name in _ACTED_ON:
            _set_read(name, text)
            note_changed()  # plans built before are rebuilt on their next run
            continue
        os.environ[name] = text
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"set_flags: spmd does not act on {name}; the value is kept but "
                          f"changes nothing", stacklevel=2)


def _set_read(name: str, text: str):
    """Set a flag spmd reads, keeping the old value when spmd cannot read the new one (so a
    bad value fails here, naming the flag, and not in every later run)."""
    old = os.environ.get(name)
    os.environ[name] = text
    try:
        _ACTED_ON[name]()
    except InvalidArgumentError:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old
        raise


def _value(name: str):
    if name in _ACTED_ON:
        return _ACTED_ON[name]()
    default = _FLUID_DEFAULTS[name]
    raw = os.environ.get(name)
    if raw is None:
        return default
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true")
    return type(default)(raw)


def get_flags(names) -> dict:
    """{name: value} of public FLAGS_* (one name or a list of names)."""
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, (list, tuple)):
        raise InvalidArgumentError(
            f"get_flags expects a flag name or a list of names, got {type(names).__name__}")
    for name in names:
        _check_public(name, "get")
    return {name: _value(name) for name in names}


@contextlib.contextmanager
def device_guard(device=None):
    """Ops built inside get `op_device` = device ('cpu', 'gpu', 'gpu:N'; None or '' set none).

    >>> with device_guard("cpu"):
    ...     pass
    """
    if device and ":" in device:
        kind, index = device.split(":", 1)
        if kind == "cpu":
            raise InvalidArgumentError("device_guard: should not set a device id for cpu")
    else:
        kind = device
    if kind not in ("cpu", "gpu", "", None):
        raise InvalidArgumentError(
            f"device_guard: device should be 'cpu' or 'gpu' (or 'gpu:N'), or empty when no "
            f"device is needed, got {device!r}")
    if not device:
        yield
        return
    with tag_new_ops("op_device", device):
        yield
