"""fleet's parameter-server mode of fluid 1.6-1.8
(`fluid.incubate.fleet.parameter_server.distribute_transpiler`): the role maker says who
serves and who trains; `fleet.distributed_optimizer(opt, strategy).minimize(loss)` minimizes
as usual and then transpiles the program with spmd's DistributeTranspiler (spmd/ps), so each
process gets its role's programs as fleet.main_program and fleet.startup_program.

    fleet.init(role_maker.PaddleCloudRoleMaker())       # roles from paddle-launch --server_num
    opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1),
                                      StrategyFactory.create_sync_strategy())
    opt.minimize(loss)
    if fleet.is_server():
        fleet.init_server()          # the pserver's startup (model_dir=: restore its slice)
        fleet.run_server()           # serves until every trainer called stop_worker()
    else:
        fleet.init_worker()
        exe.run(fleet.startup_program)                 # parameters from the pservers
        exe.run(fleet.main_program, feed=..., fetch_list=[loss])
        fleet.stop_worker()          # tells the pservers this trainer is done

Saving on a worker (fleet.save_persistables): the trainer's parameters (received from the
pservers after its last step) into dirname, and every pserver's own slice, parameters and
optimizer state, into dirname/pserver_<i> (checkpoint_notify; the pservers and the worker
share the file system, as in fluid). `fleet.init_server(dirname)` on pserver i then restores
its slice from dirname/pserver_<i>, or, where the directory has only whole parameters (a
local fluid.io.save_persistables), cuts its blocks out of them.
"""
from __future__ import annotations

import os

import numpy as np

from ..core import default_startup_program
from ..errors import InvalidArgumentError, PreconditionError
from .base import FleetBase, WrappedOptimizer
from .ps_strategy import DistributedStrategy, StrategyFactory, training_mode, transpiler_config

__all__ = ["DistributedTranspiler", "TranspilerOptimizer", "fleet"]


class DistributedTranspiler(FleetBase):
    """fluid 1.x's `fleet` in parameter-server mode (its class name in fluid 1.8)."""

    def __init__(self):
        super().__init__()
        self.main_program = None
        self.startup_program = None
        self._origin_program = None
        self._transpiler = None
        self._strategy = None
        self._mode = None

    @property
    def training_mode(self) -> str | None:
        """'sync', 'async', 'half_async' or 'geo' once minimize() transpiled (None before)."""
        return self._mode

    def init(self, role_maker=None):
        """Take this process's role (default PaddleCloudRoleMaker(): paddle-launch's roles).
        A collective role maker is refused: it has no pservers."""
        from .role_maker import PaddleCloudRoleMaker

        role = role_maker if role_maker is not None else PaddleCloudRoleMaker()
        super().init(role)
        if not role.get_pserver_endpoints():
            self._is_initialized = False
            raise InvalidArgumentError(
                f"the parameter-server fleet got a role without pservers "
                f"({type(role).__name__}); use role_maker.PaddleCloudRoleMaker() under "
                f"`paddle-launch --server_num N --worker_num M`, or role_maker."
                f"UserDefinedRoleMaker(current_id, role, worker_num, server_endpoints); for "
                f"collective training import fleet from fluid.incubate.fleet.collective")

    # -- programs --------------------------------------------------------------------------
    def distributed_optimizer(self, optimizer, strategy=None) -> TranspilerOptimizer:
        """Wrap `optimizer`: minimize() also transpiles (default: the sync strategy)."""
        self._check_initialized()
        self._optimizer = TranspilerOptimizer(optimizer, strategy, owner=self)
        return self._optimizer

    def _transpile(self, main, startup, strategy) -> None:
        from ..ps.transpiler import DistributeTranspiler as Transpiler

        self._mode = training_mode(strategy)
        config = transpiler_config(strategy)
        self._strategy = strategy
        self._origin_program = main.clone(for_test=False)
        self._transpiled_program = main
        self._transpiler = t = Transpiler(config)
        servers = self.server_endpoints(to_string=True)
        if self.is_worker():
            t.transpile(self.worker_index(), program=main, pservers=servers,
                        trainers=self.worker_num(), sync_mode=config.sync_mode,
                        startup_program=startup)
            self.main_program = t.get_trainer_program(wait_port=config.wait_port)
            self.startup_program = startup
            return
        endpoint = self._server_endpoint()
        t.transpile(0, program=main, pservers=servers, trainers=self.worker_num(),
                    sync_mode=config.sync_mode, startup_program=startup,
                    current_endpoint=endpoint)
        self.main_program, self.startup_program = t.get_pserver_programs(endpoint)

    def _server_endpoint(self) -> str:
        endpoints = self.server_endpoints()
        index = self.server_index()
        if not 0 <= index < len(endpoints):
            raise InvalidArgumentError(
                f"server_index {index} is not in [0, {len(endpoints) - 1}] (the role's "
                f"{len(endpoints)} server endpoints)")
        return endpoints[index]

    def _programs(self, what: str):
        if self.main_program is None:
            raise PreconditionError(
                f"fleet.{what}() needs fleet.distributed_optimizer(opt, strategy)."
                f"minimize(loss) first: it makes this role's programs")

    def _executor_here(self):
        if self._executor is None:
            from ..core import CPUPlace
            from ..executor.executor import Executor

            self._executor = Executor(CPUPlace())
        return self._executor

    # -- servers ---------------------------------------------------------------------------
    def init_server(self, model_dir=None):
        """Run this pserver's startup program; with `model_dir`, restore its slice from
        model_dir/pserver_<index> (a fleet.save_persistables checkpoint) or cut it from the
        whole parameters saved there."""
        self._programs("init_server")
        if not self.is_server():
            raise PreconditionError(
                f"fleet.init_server() on worker {self.worker_index()}: only a server "
                f"(fleet.is_server()) runs it; a worker calls fleet.init_worker()")
        exe = self._executor_here()
        exe.run(self.startup_program)
        if model_dir:
            if not os.path.isdir(model_dir):
                raise InvalidArgumentError(f"init_server: there is no directory {model_dir!r}")
            self._restore_slice(exe, model_dir)

    def _restore_slice(self, exe, model_dir: str) -> None:
        from .. import io
        from ..core.scope import Scope, global_scope, scope_guard

        own = os.path.join(model_dir, f"pserver_{self.server_index()}")
        if os.path.isdir(own):
            io.load_persistables(exe, own, self.main_program)
            return
        held = self.main_program.global_block().vars
        cuts = {param: [c for c in blocks if c[0] in held]
                for param, blocks in self._transpiler.param_blocks().items()}
        params = [self._origin_program.global_block().var(p) for p, c in cuts.items()
                  if c and os.path.isfile(io.var_path(model_dir, p))]
        if not params:
            raise InvalidArgumentError(
                f"init_server: {model_dir!r} has neither pserver_{self.server_index()}/ (a "
                f"fleet.save_persistables checkpoint) nor a parameter this pserver holds "
                f"({', '.join(p for p, c in cuts.items() if c)})")
        whole = Scope()
        with scope_guard(whole):
            io.load_vars(exe, model_dir, self._origin_program, vars=params)
        for param in params:
            value = np.asarray(whole.find_var(param.name).get_tensor())
            for name, start, end, _ in cuts[param.name]:
                global_scope().var(name).get_tensor().set(
                    np.ascontiguousarray(value[start:end]), exe.place)

    def run_server(self):
        """Serve until every trainer called stop_worker() (exe.close())."""
        self._programs("run_server")
        if not self.is_server():
            raise PreconditionError(
                f"fleet.run_server() on worker {self.worker_index()}: only a server runs it")
        self._executor_here().run(self.main_program)

    # -- workers ---------------------------------------------------------------------------
    def init_worker(self):
        """Ready this worker. spmd's trainer connects to the pservers on its first step,
        retrying while they start (fluid's communicator thread is not needed)."""
        self._programs("init_worker")
        if not self.is_worker():
            raise PreconditionError(
                f"fleet.init_worker() on server {self.server_index()}: a server calls "
                f"fleet.init_server() and fleet.run_server()")

    def stop_worker(self):
        """Tell every pserver this trainer is done (Executor.close()); the pservers end once
        every trainer stopped."""
        if not self.is_worker():
            raise PreconditionError("fleet.stop_worker() is for workers")
        self._executor_here().close()

    def run_worker(self, main_programs=None, scopes=None):
        """fluid's placeholder: training runs through exe.run(fleet.main_program)."""

    # -- saving ----------------------------------------------------------------------------
    def save_persistables(self, executor, dirname, main_program=None, filename=None):
        """On a worker: every parameter, as the pservers hold it now, into `dirname`, and
        every pserver's slice (parameters and optimizer state) into dirname/pserver_<i>;
        see the module doc."""
        from .. import io
        from ..core.scope import scope_guard

        program = self._saved_program("save_persistables", main_program)
        os.makedirs(dirname, exist_ok=True)
        with scope_guard(self._pserver_parameters(program)):
            io.save_params(executor, dirname, program, filename=filename)
        self._checkpoint_notify(dirname)

    def save_inference_model(self, executor, dirname, feeded_var_names=None, target_vars=None,
                             main_program=None, export_for_deployment=True):
        """The original (not transpiled) program pruned to `target_vars`, with every
        parameter as the pservers hold it now."""
        from .. import io
        from ..core.scope import scope_guard

        program = self._saved_program("save_inference_model", main_program)
        with scope_guard(self._pserver_parameters(program)):
            io.save_inference_model(dirname, feeded_var_names, target_vars, executor,
                                    program, None, None, export_for_deployment)

    def _saved_program(self, what: str, main_program):
        if not self.is_worker():
            raise PreconditionError(f"fleet.{what} is called on a worker (a pserver's slice "
                                    f"is saved through it)")
        self._programs(what)
        return main_program if main_program is not None else self._origin_program

    def _pserver_parameters(self, program):
        """A scope of the parameters of `program`, whole: the blocks the pservers hold
        fetched and joined (a trainer may hold none of a prefetched table), the others as
        this trainer holds them."""
        from ..core.scope import Scope, global_scope
        from ..ps.trainer import session

        here, scope = global_scope(), Scope()
        for var in program.global_block().all_parameters():
            value = here.get(var.name)
            if value is not None:
                scope.put(var.name, value)
        cuts = self._transpiler.param_blocks()
        wanted = {}
        for blocks in cuts.values():
            for name, _, _, endpoint in blocks:
                wanted.setdefault(endpoint, []).append(name)
        s, trainer_id = session(), self.worker_index()
        s.flush()
        fetched = {}
        for values in s.each(lambda ep: s.client(ep, trainer_id).get_variables(wanted[ep]),
                             list(wanted)):
            fetched.update(values)
        for param, blocks in cuts.items():
            parts = [np.asarray(fetched[name]) for name, _, _, _ in blocks]
            scope.put(param, parts[0] if len(parts) == 1 else np.concatenate(parts))
        return scope

    def _checkpoint_notify(self, dirname: str) -> None:
        from ..ps.trainer import session

        s = session()
        s.flush()
        trainer_id = self.worker_index()
        s.each(lambda ep: s.client(ep, trainer_id).checkpoint_notify(os.path.abspath(dirname)),
               self.server_endpoints())


class TranspilerOptimizer(WrappedOptimizer):
    """What the parameter-server fleet's distributed_optimizer returns.

    >>> # TranspilerOptimizer(fluid.optimizer.SGD(0.1), StrategyFactory.create_sync_strategy())
    """

    def __init__(self, optimizer, strategy=None, owner=None):
        from ..optimizer import Optimizer
        from ..ps.transpiler import DistributeTranspilerConfig

        if not isinstance(optimizer, Optimizer):
            raise InvalidArgumentError(
                f"distributed_optimizer takes a fluid optimizer, got {type(optimizer).__name__}")
        if strategy is None:
            strategy = StrategyFactory.create_sync_strategy()
        if not isinstance(strategy, (DistributedStrategy, DistributeTranspilerConfig)):
            raise InvalidArgumentError(
                f"strategy must come from StrategyFactory (create_sync_strategy(), "
                f"create_async_strategy(), create_half_async_strategy(), "
                f"create_geo_strategy(k)) or be a "
                f"DistributeTranspilerConfig, got {type(strategy).__name__}")
        training_mode(strategy)  # a strategy of no mode is refused before any program changes
        self._optimizer = optimizer
        self._strategy = strategy
        self._fleet = owner if owner is not None else fleet

    def minimize(self, loss, scopes=None, startup_program=None, parameter_list=None,
                 no_grad_set=None):
        """Minimize `loss`, then transpile: fleet.main_program and fleet.startup_program
        become this role's programs. Returns (optimize ops, params_grads)."""
        if isinstance(loss, list):
            raise InvalidArgumentError("the parameter-server fleet minimizes one loss, not a "
                                       "list")
        if isinstance(startup_program, list):
            raise InvalidArgumentError("startup_program must be one Program, not a list")
        owner = self._fleet
        owner._check_initialized()
        main = loss.block.program
        startup = default_startup_program() if startup_program is None else startup_program
        result = self._optimizer.minimize(loss, startup_program=startup,
                                          parameter_list=parameter_list,
                                          no_grad_set=no_grad_set)
        owner._transpile(main, startup, self._strategy)
        return result


fleet = DistributedTranspiler()
