"""spmd: fluid-style static programs, trained data-parallel with one process per place.

Two faces over one engine: `import spmd.fluid as fluid` (fluid 1.x) and `import spmd as paddle`
(paddle 2.x's static mode: paddle.enable_static(), paddle.static, paddle.optimizer, ...).

>>> import spmd as paddle
>>> paddle.enable_static()
"""
from . import guard as _guard

# first of all, before MPI or any thread starts: the abort hook, and the supervisor that
# makes an early end of any rank fail the job (spmd/guard)
_guard.install()

from importlib import import_module as _import_module

from . import lazy as _lazy
from .comm.topology import fill_paddle_env, share_cpu_threads
from .errors import InvalidArgumentError

# paddle.mean, paddle.matmul, ...: spmd.layers.paddle_tensor.__all__ (test_imports checks it)
_TENSOR_NAMES = (
    "add", "cast", "clip", "concat", "create_global_var", "create_parameter", "divide", "exp",
    "flatten", "full", "gather", "log", "matmul", "max", "maximum", "mean", "minimum",
    "multiply", "ones", "ones_like", "pow", "reshape", "scale", "slice", "split", "sqrt",
    "square", "squeeze", "subtract", "sum", "tanh", "topk", "transpose", "unsqueeze", "where",
    "zeros", "zeros_like",
)
# every name is imported at its first use (spmd.lazy.attach), as are the subpackages: `import
# spmd` alone (paddle-launch reads spmd.flags, every worker starts in spmd.run) loads only the
# guard, the flags and the launcher's rank variables, not even numpy
_resolve, __dir__ = _lazy.attach(__name__, {
    **{name: f".core:{name}" for name in (
        "CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "Parameter", "Program", "Scope", "Variable",
        "global_scope", "is_compiled_with_cuda")},
    "Executor": ".executor:Executor",
    "ParamAttr": ".layers.param_attr:ParamAttr",
    "batch": ".reader.batch:batch",
    "get_default_dtype": ".layers.nn_layers:get_default_dtype",
    "set_default_dtype": ".layers.nn_layers:set_default_dtype",
    **{name: f".layers.paddle_tensor:{name}" for name in _TENSOR_NAMES},
}, submodules=True)
_engine_loaded: list = []


def _load_engine() -> None:
    """What every program needs before its first op: the op schema the IR builds operators
    with (spmd.ops) and Variable's Python operators and var[...] (spmd.layers). Loaded with
    the first name used from spmd; spmd.fluid and spmd.static load them too."""
    if not _engine_loaded:
        _engine_loaded.append(True)
        _import_module(".ops", __name__)
        _import_module(".layers", __name__)


def __getattr__(name: str):
    if not name.startswith("__"):
        _load_engine()
    return _resolve(name)


__version__ = "0.1.0"

# fluid programs read PADDLE_TRAINER_ID / PADDLE_TRAINERS_NUM; mpirun does not set them
fill_paddle_env()
# N ranks on a node each starting a BLAS/OpenMP thread per core would oversubscribe it N times
share_cpu_threads()


def enable_static():
    """spmd is static-graph only; kept so paddle 2.x scripts run unchanged."""


def disable_static(place=None):
    raise InvalidArgumentError(
        "spmd runs static programs only: dynamic (eager) mode is not supported; remove "
        "paddle.disable_static() and build the model inside a program")


def in_dynamic_mode() -> bool:
    return False


def seed(value: int):
    """Make runs reproducible: the default programs' random_seed (paddle.seed)."""
    from .core import default_main_program, default_startup_program

    default_main_program().random_seed = value
    default_startup_program().random_seed = value


def set_device(device: str):
    """'cpu' or 'gpu:N': returns the place (paddle.set_device)."""
    from .core import CPUPlace, CUDAPlace

    if device == "cpu":
        return CPUPlace()
    if device.startswith("gpu"):
        return CUDAPlace(int(device.split(":")[1]) if ":" in device else 0)
    raise InvalidArgumentError(f"set_device: expected 'cpu' or 'gpu:N', got {device!r}")


__all__ = ["CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "Executor", "ParamAttr", "Parameter",
           "batch", "compat", "dataset", "distributed", "get_default_dtype", "metrics",
           "reader", "regularizer", "set_default_dtype",
           "Program",
           "Scope", "Variable", "disable_static", "enable_static", "fluid", "global_scope",
           "in_dynamic_mode", "is_compiled_with_cuda", "nn", "optimizer", "seed", "set_device",
           "static", *_TENSOR_NAMES]
