"""fleet's collective mode of fluid 1.6-1.8 (`paddle.fluid.incubate.fleet.collective`): the
optimizer is minimized as usual, then the program is compiled data-parallel on spmd's engine,
exactly as `CompiledProgram(main).with_data_parallel(loss_name=...)` would, with the strategy
as its BuildStrategy and the role's trainer count and id.

>>> # fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
>>> # opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), DistributedStrategy())
>>> # opt.minimize(loss); exe.run(fleet.startup_program); exe.run(fleet.main_program, feed=...)
"""
from __future__ import annotations

import warnings

from ..core import default_startup_program
from ..errors import InvalidArgumentError
from ..passes.strategy import BuildStrategy, ExecutionStrategy
from . import checkpoint
from .base import FleetBase, WrappedOptimizer, bind_compiled, compile_data_parallel
from .checkpoint import TrainStatus
from .fs import LocalFS

_LOCAL_FS = LocalFS()  # fluid's default argument, one stateless instance

__all__ = ["Collective", "CollectiveOptimizer", "DistributedStrategy", "TrainStatus", "fleet"]


class DistributedStrategy(BuildStrategy):
    """fluid 1.x's fleet strategy: a BuildStrategy plus the collective options.

    `mode` 'nccl2' (default) and 'collective' with collective_mode 'grad_allreduce' both train
    data-parallel with summed gradients; local SGD and distributed FC are refused by name;
    `forward_recompute` and `use_amp` are accepted and warned about (spmd neither recomputes
    nor casts to float16). Equal by all its fields, BuildStrategy's too; those are keywords
    here (fluid's takes no arguments at all).

    >>> s = DistributedStrategy()
    >>> s.nccl_comm_num
    1
    """

    __slots__ = ("use_local_sgd", "use_dist_fc", "dist_fc_config", "mode", "collective_mode",
                 "forward_recompute", "recompute_checkpoints", "use_amp", "amp_loss_scaling",
                 "exec_strategy", "_ut4grad_allreduce")
    _fields = BuildStrategy._fields + __slots__

    def __init__(self, use_local_sgd: bool = False, use_dist_fc: bool = False,
                 dist_fc_config=None, mode: str = "nccl2", collective_mode: str | None = None,
                 forward_recompute: bool = False, recompute_checkpoints: list | None = None,
                 use_amp: bool = False, amp_loss_scaling: float = 2.0 ** 15,
                 exec_strategy: ExecutionStrategy | None = None,
                 _ut4grad_allreduce: bool = False, **build_strategy):
        super().__init__(**build_strategy)
        set_ = object.__setattr__  # past BuildStrategy's check of names: these are fields
        set_(self, "use_local_sgd", use_local_sgd)
        set_(self, "use_dist_fc", use_dist_fc)
        set_(self, "dist_fc_config", dist_fc_config)
        set_(self, "mode", mode)
        set_(self, "collective_mode", collective_mode)
        set_(self, "forward_recompute", forward_recompute)
        set_(self, "recompute_checkpoints",
             [] if recompute_checkpoints is None else recompute_checkpoints)
        set_(self, "use_amp", use_amp)
        set_(self, "amp_loss_scaling", amp_loss_scaling)
        set_(self, "exec_strategy", ExecutionStrategy() if exec_strategy is None else exec_strategy)
        set_(self, "_ut4grad_allreduce", _ut4grad_allreduce)


def check_strategy(strategy: DistributedStrategy):
    """Refuse what spmd cannot train; warn about what it accepts without acting on."""
    if strategy.use_local_sgd or strategy.collective_mode == "local_sgd":
        raise InvalidArgumentError(
            "DistributedStrategy: local SGD (use_local_sgd / collective_mode='local_sgd') is "
            "not available in spmd; leave it off to average gradients every step")
    if strategy.use_dist_fc:
        raise InvalidArgumentError(
            "DistributedStrategy.use_dist_fc: the distributed (model-parallel) fc is not "
            "available in spmd; use fluid.layers.fc, which trains data-parallel")
    if strategy.mode not in ("nccl2", "collective"):
        raise InvalidArgumentError(
            f"DistributedStrategy.mode must be 'nccl2' or 'collective', got {strategy.mode!r}")
    if strategy.collective_mode not in (None, "grad_allreduce"):
        raise InvalidArgumentError(
            f"DistributedStrategy.collective_mode must be None or 'grad_allreduce', got "
            f"{strategy.collective_mode!r}")
    if not isinstance(strategy.recompute_checkpoints, list):
        raise InvalidArgumentError("DistributedStrategy.recompute_checkpoints must be a list")
    if strategy.forward_recompute:
        if not strategy.recompute_checkpoints:
            raise InvalidArgumentError(
                "DistributedStrategy.forward_recompute=True needs recompute_checkpoints "
                "(the variables to keep)")
        warnings.warn("DistributedStrategy.forward_recompute is accepted but not acted on by "
                      "spmd: activations are kept, not recomputed (same numbers, more memory)",
                      stacklevel=3)
    if strategy.use_amp:
        warnings.warn("DistributedStrategy.use_amp is accepted but not acted on by spmd: the "
                      "program trains in its own dtype, without float16 casts or loss scaling",
                      stacklevel=3)


# the wrapped optimizers each strategy switch refuses, fluid 1.8's (the switch would wrap the
# optimizer once more)
_CONFLICTS = {"forward_recompute": ("RecomputeOptimizer", "OptimizerWithMixedPrecision"),
              "use_amp": ("OptimizerWithMixedPrecision", "DGCMomentumOptimizer")}


def check_optimizer_conflicts(optimizer, strategy: DistributedStrategy):
    """fluid 1.8's checks at the start of minimize, before the loss is looked at:
    forward_recompute needs recompute_checkpoints, and a switch refuses an optimizer already
    wrapped its way."""
    if strategy.forward_recompute and not strategy.recompute_checkpoints:
        raise InvalidArgumentError(
            "DistributedStrategy.forward_recompute=True needs recompute_checkpoints "
            "(the variables to keep), got []")
    kind = type(optimizer).__name__
    for switch, refused in _CONFLICTS.items():
        if getattr(strategy, switch) and kind in refused:
            raise InvalidArgumentError(
                f"DistributedStrategy.{switch}=True cannot take a {kind}: the strategy "
                f"wraps the optimizer itself; pass the plain optimizer, or leave {switch} off")


class CollectiveOptimizer(WrappedOptimizer):
    """What fleet.distributed_optimizer returns: minimize() trains `optimizer` data-parallel.

    >>> # CollectiveOptimizer(fluid.optimizer.SGD(0.1), DistributedStrategy()).minimize(loss)
    """

    def __init__(self, optimizer, strategy: DistributedStrategy | None = None, owner=None):
        if strategy is None:
            strategy = DistributedStrategy()
        if not isinstance(strategy, DistributedStrategy):
            raise InvalidArgumentError(
                f"strategy must be a fleet DistributedStrategy, got {type(strategy).__name__}")
        if not isinstance(strategy.recompute_checkpoints, list):  # fluid checks it here
            raise InvalidArgumentError(
                f"DistributedStrategy.recompute_checkpoints must be a list of variables or "
                f"names, got {type(strategy.recompute_checkpoints).__name__}")
        self._optimizer = optimizer
        self._strategy = strategy
        self._fleet = owner if owner is not None else fleet

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """Minimize `loss`, then set fleet.main_program (a data-parallel CompiledProgram) and
        fleet.startup_program. Returns (optimize ops, params_grads) as the optimizer does."""
        owner, strategy = self._fleet, self._strategy
        check_optimizer_conflicts(self._optimizer, strategy)
        owner._check_initialized()
        check_strategy(strategy)
        main = loss.block.program
        startup = default_startup_program() if startup_program is None else startup_program
        result = self._optimizer.minimize(loss, startup_program=startup,
                                          parameter_list=parameter_list,
                                          no_grad_set=no_grad_set)
        owner.startup_program = startup
        owner._origin_program = main.clone(for_test=False)
        owner._transpiled_program = main
        compiled = compile_data_parallel(owner, main, startup, loss, strategy,
                                         strategy.exec_strategy)
        collective = strategy.mode == "collective"
        bind_compiled(main, compiled, run=collective)
        # fluid 1.8: in collective mode fleet.main_program is the transpiled Program itself (a
        # program can clone it for test); in nccl2 mode, the CompiledProgram
        owner.main_program = main if collective else compiled
        return result


class Collective(FleetBase):
    """fluid 1.x's `fleet` in collective mode: every process is a worker.

    >>> isinstance(fleet, Collective)
    True
    """

    def __init__(self):
        super().__init__()
        self.startup_program = None
        self.main_program = None
        self._origin_program = None

    def init(self, role_maker=None):
        """Take this process's role (a collective role maker; default PaddleCloudRoleMaker)."""
        from .role_maker import PaddleCloudRoleMaker

        super().init(role_maker if role_maker is not None
                     else PaddleCloudRoleMaker(is_collective=True))
        self._refuse_parameter_server_role()

    def distributed_optimizer(self, optimizer, strategy=None) -> CollectiveOptimizer:
        """Wrap `optimizer` so that minimize() trains data-parallel over every worker."""
        self._optimizer = CollectiveOptimizer(optimizer, strategy, owner=self)
        return self._optimizer

    def init_worker(self):
        """Parameter-server mode only: warns, as fluid does in collective mode."""
        warnings.warn("fleet.init_worker is for parameter-server mode; collective mode needs "
                      "no call", stacklevel=2)

    def run_worker(self, main_programs=None, scopes=None):
        """Parameter-server mode only: warns, as fluid does in collective mode."""
        warnings.warn("fleet.run_worker is for parameter-server mode", stacklevel=2)

    def init_server(self, model_dir=None):
        """Parameter-server mode only: warns, as fluid does in collective mode."""
        warnings.warn("fleet.init_server is for parameter-server mode", stacklevel=2)

    def run_server(self):
        """Parameter-server mode only: warns, as fluid does in collective mode."""
        warnings.warn("fleet.run_server is for parameter-server mode", stacklevel=2)

    def stop_worker(self):
        """Parameter-server mode only: warns, as fluid does in collective mode."""
        warnings.warn("fleet.stop_worker is for parameter-server mode; collective mode needs "
                      "no call", stacklevel=2)

    def save_check_point(self, executor, path, train_status, main_program=None,
                         fs=_LOCAL_FS, local_cache_path=".cache", remain_all_checkpoint=True):
        """Save every persistable of the trained program (or `main_program`) and
        `train_status` as the next `path/__paddle_fleet_checkpoint__.<n>`, atomically (see
        spmd/fleet/checkpoint.py). Any rank may save; in Reduce mode every rank must call it
        (it gathers the split optimizer state), so give each rank its own `path` there or let
        the extra checkpoints be cleaned.

        >>> # fleet.save_check_point(exe, "ckpt", TrainStatus(epoch), remain_all_checkpoint=False)
        """
        checkpoint.save_check_point(executor, path, train_status,
                                    self._default_program(main_program), fs,
                                    local_cache_path, remain_all_checkpoint)

    def load_check_point(self, executor, path, trainer_id, main_program=None, fs=_LOCAL_FS,
                         local_cache_path=".cache", ignore_empty=True):
        """Load the newest checkpoint under `path` into the global scope; returns its
        TrainStatus, or None when `path` holds none (an error with ignore_empty=False).

        >>> # status = fleet.load_check_point(exe, "ckpt", fleet.worker_index())
        >>> # first_epoch = status.next() if status is not None else 0
        """
        return checkpoint.load_check_point(executor, path, trainer_id,
                                           self._default_program(main_program), fs,
                                           local_cache_path, ignore_empty)

    def clean_redundant_check_points(self, root_path, fs=_LOCAL_FS, checkpoint_num=1):
        """Delete the checkpoints under `root_path` numbered `checkpoint_num` or more below
        the newest.

        >>> # fleet.clean_redundant_check_points("ckpt", checkpoint_num=2)   # keeps two
        """
        checkpoint.clean_redundant_check_points(root_path, fs, checkpoint_num)


fleet = Collective()
