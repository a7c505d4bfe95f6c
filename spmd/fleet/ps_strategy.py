"""The strategies of fluid 1.7-1.8's parameter-server fleet
(`fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy`):
StrategyFactory's sync, async, half-async and geo strategies, each a DistributeTranspilerConfig
(its program config) with the flags fluid sets, plus the runtime configs fluid passed to its
communicator thread.

How each one trains on spmd's pserver runtime (spmd/ps), decided by `training_mode`:
- SyncStrategy: sync mode. Every step the pservers average the gradients of all trainers
  and update once (fluid 1.8 reached the same through its communicator's barriers).
- AsyncStrategy: async mode. Each gradient is applied as it arrives, with the gradient split
  at run time (runtime_split_send_recv).
- HalfAsyncStrategy: fluid's half-async mode (its distributed mode 2). spmd's pserver applies
  gradients as they arrive, as in async mode.
- GeoStrategy: Geo-SGD (fluid's distributed mode 3). Each trainer keeps its optimizer and
  trains locally; every k steps it pushes each parameter's delta since its last push (an
  is_sparse table: the touched rows only) and takes the pservers' values back, which only add
  the deltas (spmd/ps/geo.py). fluid pushes from its communicator thread; spmd inside the
  k-th step.

TrainerRuntimeConfig's communicator flags are kept and reported. spmd has no communicator
thread: a trainer sends and receives in its own step, so they change nothing.

>>> strategy = StrategyFactory.create_sync_strategy()
>>> training_mode(strategy)
'sync'
"""
from __future__ import annotations

import copy
import os
import warnings

from ..errors import InvalidArgumentError

# one ServerRuntimeConfig class, fluid's transpiler's (spmd's pserver serves on gRPC's own
# threads, so its counts are kept, not used), as fluid's strategies import it from there
from ..fluid.transpiler.distribute_transpiler import DistributedMode, ServerRuntimeConfig
from ..passes.strategy import BuildStrategy, ExecutionStrategy
from ..ps.transpiler import DistributeTranspilerConfig

__all__ = ["AsyncStrategy", "DistributedStrategy", "GeoStrategy", "HalfAsyncStrategy",
           "ServerRuntimeConfig", "StrategyFactory", "SyncStrategy", "TrainerRuntimeConfig",
           "training_mode", "transpiler_config"]

# fluid's communicator flags and their environment defaults (CPU_NUM where fluid used it)
_RUNTIME_FLAGS = {
    "communicator_max_merge_var_num": None, "communicator_send_queue_size": None,
    "communicator_independent_recv_thread": "1",
    "communicator_min_send_grad_num_before_recv": None,
    "communicator_thread_pool_size": "5", "communicator_send_wait_times": "5",
    "communicator_is_sgd_optimizer": "1", "rpc_deadline": "180000", "rpc_retry_times": "3",
}


class TrainerRuntimeConfig:
    """fluid's communicator flags (`runtime_configs`), read from FLAGS_<name> as fluid did."""

    def __init__(self):
        self.mode = None
        threads = os.getenv("CPU_NUM", "1")
        self.runtime_configs = {
            k: os.getenv(f"FLAGS_{k}", threads if default is None else default)
            for k, default in _RUNTIME_FLAGS.items()}

    def get_communicator_flags(self) -> dict:
        """The flags as strings, the ones fluid 1.8's communicator reads in this config's
        `mode` (a DistributedMode, set by the strategy): all in async mode (or no mode), four
        in sync and half-async mode, where the merge count and send queue size are forced to
        CPU_NUM (read now, as fluid does), two in geo mode."""
        threads = os.getenv("CPU_NUM", "1")
        if self.mode is None or self.mode == DistributedMode.ASYNC:
            keys = list(self.runtime_configs)
        elif self.mode in (DistributedMode.SYNC, DistributedMode.HALF_ASYNC):
            keys = ["communicator_max_merge_var_num", "communicator_send_wait_times",
                    "communicator_thread_pool_size", "communicator_send_queue_size"]
            for key in ("communicator_max_merge_var_num", "communicator_send_queue_size"):
                if self.runtime_configs[key] != threads:
                    warnings.warn(f"in sync and half-async mode {key} must equal CPU_NUM: "
                                  f"got {self.runtime_configs[key]}, forced to {threads}",
                                  stacklevel=2)
                    self.runtime_configs[key] = threads
        elif self.mode == DistributedMode.GEO:
            keys = ["communicator_thread_pool_size", "communicator_send_wait_times"]
        else:
            raise InvalidArgumentError(
                f"TrainerRuntimeConfig.mode={self.mode!r}: expected a DistributedMode "
                f"(SYNC, ASYNC, HALF_ASYNC or GEO) or None")
        return {k: str(self.runtime_configs[k]) for k in keys}

    def __repr__(self):
        rows = "\n".join(f"{k:<45}{v}" for k, v in self.get_communicator_flags().items())
        return f"TrainerRuntimeConfig (spmd: no communicator thread; kept, not used)\n{rows}"


def _set_from(target, config, kind, what: str):
    """fluid's setters: an instance of `kind` replaces the config, a dict sets fields."""
    if isinstance(config, kind):
        return config
    if not isinstance(config, dict):
        raise InvalidArgumentError(
            f"{what} takes a {kind.__name__} or a dict, got {type(config).__name__}")
    for key, value in config.items():
        if not hasattr(target, key):
            raise InvalidArgumentError(f"{kind.__name__} has no field {key!r}")
        setattr(target, key, value)
    return target


class DistributedStrategy:
    """The base of fluid's parameter-server strategies; make one with StrategyFactory."""

    def __init__(self):
        self._program_config = DistributeTranspilerConfig()
        self._trainer_runtime_config = TrainerRuntimeConfig()
        self._server_runtime_config = ServerRuntimeConfig()
        self._execute_strategy = ExecutionStrategy()
        self._build_strategy = BuildStrategy()
        self._execute_strategy.num_threads = int(os.getenv("CPU_NUM", "1"))
        self.debug_opt = None
        self._apply_mode()
        self._apply_runtime()

    # fluid's mode code of the strategy (its TrainerRuntimeConfig.mode) and whether its
    # ExecutionStrategy waits on a thread barrier (sync and half async)
    _mode: int | None = None
    _thread_barrier = False

    def _apply_mode(self):
        """Set the program config's flags that make this strategy (fluid's values)."""
        raise NotImplementedError("use StrategyFactory to make a strategy")

    def _apply_runtime(self):
        """fluid's check_trainer_runtime_config / check_build_strategy /
        check_execute_strategy: the mode, async_mode=True, the thread barrier."""
        self._trainer_runtime_config.mode = self._mode
        self._build_strategy.async_mode = True
        if self._thread_barrier:
            self._execute_strategy.use_thread_barrier = True

    def set_debug_opt(self, opt_info):
        """fluid's dump options; kept for get_debug_opt."""
        self.debug_opt = opt_info

    def get_debug_opt(self) -> dict:
        """The dump options as fluid normalized them."""
        opt = self.debug_opt if isinstance(self.debug_opt, dict) else {}
        if not opt:
            return {}
        return {"dump_slot": bool(opt.get("dump_slot", 0)),
                "dump_converter": str(opt.get("dump_converter", "")),
                "dump_fields": opt.get("dump_fields", []),
                "dump_file_num": opt.get("dump_file_num", 16),
                "dump_fields_path": opt.get("dump_fields_path", ""),
                "dump_param": opt.get("dump_param", [])}

    def get_program_config(self) -> DistributeTranspilerConfig:
        return self._program_config

    def set_program_config(self, config):
        """A DistributeTranspilerConfig, or a dict of its fields; the strategy's own flags
        are set again afterwards, as fluid does."""
        self._program_config = _set_from(self._program_config, config,
                                         DistributeTranspilerConfig, "set_program_config")
        self._apply_mode()

    def get_trainer_runtime_config(self) -> TrainerRuntimeConfig:
        return self._trainer_runtime_config

    def set_trainer_runtime_config(self, config):
        """A TrainerRuntimeConfig, or a dict of communicator flags."""
        if isinstance(config, dict):
            unknown = set(config) - set(self._trainer_runtime_config.runtime_configs)
            if unknown:
                raise InvalidArgumentError(
                    f"TrainerRuntimeConfig has no flag {sorted(unknown)}; known: "
                    f"{sorted(self._trainer_runtime_config.runtime_configs)}")
            self._trainer_runtime_config.runtime_configs.update(config)
        else:
            self._trainer_runtime_config = _set_from(None, config, TrainerRuntimeConfig,
                                                     "set_trainer_runtime_config")
        self._apply_runtime()

    def get_server_runtime_config(self) -> ServerRuntimeConfig:
        return self._server_runtime_config

    def set_server_runtime_config(self, config):
        self._server_runtime_config = _set_from(self._server_runtime_config, config,
                                                ServerRuntimeConfig,
                                                "set_server_runtime_config")

    def get_execute_strategy(self) -> ExecutionStrategy:
        return self._execute_strategy

    def set_execute_strategy(self, config):
        self._execute_strategy = _set_from(self._execute_strategy, config, ExecutionStrategy,
                                           "set_execute_strategy")
        self._apply_runtime()

    def get_build_strategy(self) -> BuildStrategy:
        return self._build_strategy

    def set_build_strategy(self, config):
        self._build_strategy = _set_from(self._build_strategy, config, BuildStrategy,
                                         "set_build_strategy")
        self._apply_runtime()


class SyncStrategy(DistributedStrategy):
    """Every step the pservers update once with the trainers' averaged gradients."""

    _mode, _thread_barrier = DistributedMode.SYNC, True

    def _apply_mode(self):
        c = self._program_config
        c.sync_mode, c.runtime_split_send_recv = False, True
        c.half_async, c.completely_not_async = True, True


class AsyncStrategy(DistributedStrategy):
    """Each trainer's gradient is applied on arrival."""

    _mode = DistributedMode.ASYNC

    def _apply_mode(self):
        c = self._program_config
        c.sync_mode, c.runtime_split_send_recv = False, True


class HalfAsyncStrategy(DistributedStrategy):
    """fluid's half-async mode; on spmd's pserver, gradients applied on arrival."""

    _mode, _thread_barrier = DistributedMode.HALF_ASYNC, True

    def _apply_mode(self):
        c = self._program_config
        c.sync_mode, c.runtime_split_send_recv, c.half_async = False, True, True


class GeoStrategy(DistributedStrategy):
    """Geo-SGD: each trainer trains locally and pushes its parameters' deltas every
    `update_frequency` steps (spmd/ps/geo.py).

    >>> GeoStrategy(5).get_program_config().geo_sgd_need_push_nums
    5
    """

    _mode = DistributedMode.GEO

    def __init__(self, update_frequency: int = 100):
        self._update_frequency = update_frequency
        super().__init__()

    def _apply_mode(self):
        c = self._program_config
        c.sync_mode, c.runtime_split_send_recv, c.geo_sgd_mode = False, True, True
        c.geo_sgd_need_push_nums = self._update_frequency


class StrategyFactory:
    """fluid's factory of the strategies above."""

    @staticmethod
    def create_sync_strategy() -> SyncStrategy:
        return SyncStrategy()

    @staticmethod
    def create_half_async_strategy() -> HalfAsyncStrategy:
        return HalfAsyncStrategy()

    @staticmethod
    def create_async_strategy() -> AsyncStrategy:
        return AsyncStrategy()

    @staticmethod
    def create_geo_strategy(update_frequency: int = 100) -> GeoStrategy:
        return GeoStrategy(update_frequency)


def training_mode(strategy) -> str:
    """'sync', 'async', 'half_async' or 'geo' for a strategy or a DistributeTranspilerConfig
    (fluid 1.8's reading: a config with geo_sgd_mode is Geo-SGD; one without sync_mode and
    without runtime_split_send_recv is half-async). Raises for anything else."""
    if isinstance(strategy, DistributeTranspilerConfig):
        config = strategy
    elif isinstance(strategy, DistributedStrategy):
        config = strategy.get_program_config()
    else:
        raise InvalidArgumentError(
            f"the parameter-server fleet takes a strategy from StrategyFactory "
            f"(create_sync_strategy(), create_async_strategy(), "
            f"create_half_async_strategy(), create_geo_strategy(k)) or a "
            f"DistributeTranspilerConfig, got "
            f"{type(strategy).__name__}")
    if isinstance(strategy, GeoStrategy) or config.geo_sgd_mode:
        return "geo"  # fluid 1.8's fleet: a config with geo_sgd_mode is a GeoStrategy
    if isinstance(strategy, SyncStrategy) or config.sync_mode or config.completely_not_async:
        return "sync"
    if isinstance(strategy, HalfAsyncStrategy) or config.half_async or \
            not config.runtime_split_send_recv:
        return "half_async"
    return "async"


def transpiler_config(strategy) -> DistributeTranspilerConfig:
    """The DistributeTranspilerConfig spmd's transpiler runs for `strategy`: the user's
    slicing options, with the mode flags of training_mode(strategy)."""
    mode = training_mode(strategy)
    source = strategy if isinstance(strategy, DistributeTranspilerConfig) else \
        strategy.get_program_config()
    config = copy.copy(source)
    config.mode = "pserver"
    config.half_async = config.completely_not_async = False
    config.geo_sgd_mode = mode == "geo"
    # both off first: the config refuses either on while the other is (fluid's setters)
    config.sync_mode = config.runtime_split_send_recv = False
    config.sync_mode = mode == "sync"
    config.runtime_split_send_recv = mode == "async"
    return config
