"""Paddle 2.x's static `paddle.distributed.fleet` in collective mode: fleet.init(
is_collective=True), fleet.DistributedStrategy(), fleet.distributed_optimizer(opt, strategy)
.minimize(loss); then `exe.run(paddle.static.default_main_program())` trains data-parallel,
as Paddle 2.x's graph-execution path does (the compiled program stands behind the main one).

>>> # fleet.init(is_collective=True)
>>> # opt = fleet.distributed_optimizer(paddle.optimizer.SGD(0.1), fleet.DistributedStrategy())
>>> # opt.minimize(loss)
"""
from __future__ import annotations

import copy
import warnings

from ..core import default_startup_program
from ..errors import InvalidArgumentError
from ..passes.strategy import BuildStrategy, ExecutionStrategy
from .base import FleetBase, bind_compiled, compile_data_parallel

__all__ = ["DistributedStrategy", "Fleet"]

# 2.x switches that change what is trained: refused by name when turned on
_REFUSED = ("gradient_merge", "lars", "lamb", "dgc", "localsgd", "adaptive_localsgd",
            "sharding", "pipeline", "tensor_parallel")
# 2.x switches spmd accepts without acting on: warned once when turned on
_WARNED = {"amp": "the program trains in its own dtype, without float16 casts",
           "recompute": "activations are kept, not recomputed (same numbers)"}


class DistributedStrategy:
    """Paddle 2.x's fleet.DistributedStrategy (the collective fields). Setting a name it does
    not have is an error, so a misspelt switch never passes silently.

    >>> s = DistributedStrategy()
    >>> s.fuse_all_reduce_ops
    True
    """

    _FIELDS = {
        "amp": False, "amp_configs": dict, "recompute": False, "recompute_configs": dict,
        "gradient_merge": False, "gradient_merge_configs": dict, "lars": False,
        "lars_configs": dict, "lamb": False, "lamb_configs": dict, "dgc": False,
        "dgc_configs": dict, "localsgd": False, "localsgd_configs": dict,
        "adaptive_localsgd": False, "adaptive_localsgd_configs": dict, "sharding": False,
        "sharding_configs": dict, "pipeline": False, "pipeline_configs": dict,
        "tensor_parallel": False, "tensor_parallel_configs": dict, "a_sync": True,
        "a_sync_configs": dict, "hybrid_configs": dict, "nccl_comm_num": 1,
        "use_hierarchical_allreduce": False, "hierarchical_allreduce_inter_nranks": 1,
        "sync_nccl_allreduce": True, "fuse_all_reduce_ops": True, "fuse_grad_size_in_MB": 32,
        "fuse_grad_size_in_TFLOPS": 50, "sync_batch_norm": False, "find_unused_parameters": False,
        "without_graph_optimization": False, "last_comm_group_size_MB": 1,
        "cudnn_exhaustive_search": False, "conv_workspace_size_limit": 512,
        "cudnn_batchnorm_spatial_persistent": False, "auto": False, "semi_auto": False,
        "heter_ccl_mode": False, "is_fl_ps_mode": False, "with_coordinator": False,
        "qat": False, "qat_configs": dict, "fp16_allreduce": False,
    }

    def __init__(self):
        for name, default in self._FIELDS.items():
            object.__setattr__(self, name, default() if default is dict else default)
        object.__setattr__(self, "build_strategy", BuildStrategy())
        object.__setattr__(self, "execution_strategy", ExecutionStrategy())

    def __setattr__(self, name, value):
        if name not in self._FIELDS and name not in ("build_strategy", "execution_strategy"):
            import difflib

            close = difflib.get_close_matches(name, list(self._FIELDS), n=3)
            raise InvalidArgumentError(
                f"fleet.DistributedStrategy has no field '{name}'"
                + (f"; did you mean {close}?" if close else ""))
        object.__setattr__(self, name, value)

    def to_build_strategy(self) -> BuildStrategy:
        """The BuildStrategy the data-parallel compile uses: build_strategy with this
        strategy's fuse_all_reduce_ops, sync_batch_norm and nccl_comm_num laid over it."""
        for name in _REFUSED:
            if getattr(self, name):
                raise InvalidArgumentError(
                    f"fleet.DistributedStrategy.{name}=True is not available in spmd's "
                    f"collective mode; leave it off (plain data-parallel training)")
        for name, why in _WARNED.items():
            if getattr(self, name):
                warnings.warn(f"fleet.DistributedStrategy.{name} is accepted but not acted on "
                              f"by spmd: {why}", stacklevel=4)
        strategy = copy.copy(self.build_strategy)
        strategy.fuse_all_reduce_ops = self.fuse_all_reduce_ops
        strategy.sync_batch_norm = self.sync_batch_norm or strategy.sync_batch_norm
        strategy.nccl_comm_num = self.nccl_comm_num
        return strategy


class _DistributedOptimizer:
    def __init__(self, owner, optimizer, strategy):
        self._fleet, self.user_defined_optimizer = owner, optimizer
        self._strategy = strategy

    def __getattr__(self, name):  # get_lr, set_lr, step ... of the wrapped optimizer
        return getattr(self.user_defined_optimizer, name)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """Minimize `loss`; the main program then runs data-parallel over every worker."""
        owner = self._fleet
        owner._check_initialized()
        build = self._strategy.to_build_strategy()
        main = loss.block.program
        startup = default_startup_program() if startup_program is None else startup_program
        result = self.user_defined_optimizer.minimize(
            loss, startup_program=startup, parameter_list=parameter_list,
            no_grad_set=no_grad_set)
        owner.startup_program = startup
        owner._transpiled_program = main
        compiled = compile_data_parallel(owner, main, startup, loss, build,
                                         self._strategy.execution_strategy)
        bind_compiled(main, compiled, run=True)
        owner.main_program = compiled
        return result


class Fleet(FleetBase):
    """Paddle 2.x's fleet singleton (static graph, collective mode).

    >>> f = Fleet()
    >>> f.init(is_collective=True)
    >>> f.worker_num() >= 1
    True
    """

    def __init__(self):
        super().__init__()
        self.main_program = None
        self.startup_program = None
        self._user_strategy = None

    def init(self, role_maker=None, is_collective: bool = False, strategy=None, log_level="INFO"):
        """Take this process's role: `role_maker`, or PaddleCloudRoleMaker(is_collective)."""
        from .role_maker import PaddleCloudRoleMaker

        if strategy is not None and not isinstance(strategy, DistributedStrategy):
            raise InvalidArgumentError(
                f"strategy must be a fleet.DistributedStrategy, got {type(strategy).__name__}")
        self._user_strategy = strategy
        super().init(role_maker if role_maker is not None
                     else PaddleCloudRoleMaker(is_collective=is_collective))
        self._refuse_parameter_server_role()

    def distributed_optimizer(self, optimizer, strategy=None):
        """Wrap `optimizer`: minimize() then trains data-parallel over every worker."""
        strategy = strategy if strategy is not None else self._user_strategy
        strategy = strategy if strategy is not None else DistributedStrategy()
        if not isinstance(strategy, DistributedStrategy):
            raise InvalidArgumentError(
                f"strategy must be a fleet.DistributedStrategy, got {type(strategy).__name__}")
        self._optimizer = _DistributedOptimizer(self, optimizer, strategy)
        return self._optimizer

    def init_worker(self):
        """Parameter-server mode only; nothing to do in collective mode (as in Paddle)."""

    def stop_worker(self):
        """Parameter-server mode only; nothing to do in collective mode (as in Paddle)."""
