"""What fleet's 1.x and 2.x faces share: the role queries, saving, and the compile step that
turns a minimized program into a data-parallel CompiledProgram on spmd's engine."""
from __future__ import annotations

import copy

from ..errors import InvalidArgumentError, PreconditionError


class FleetBase:
    """Role queries and saving over a role maker given to init()."""

    def __init__(self):
        self._role_maker = None
        self._is_initialized = False
        self._optimizer = None
        self._executor = None
        self._transpiled_program = None  # the program minimize() trained

    def init(self, role_maker):
        """Take `role_maker`'s role (generate_role is called once)."""
        from .role_maker import RoleMakerBase

        if not isinstance(role_maker, RoleMakerBase):
            raise InvalidArgumentError(
                f"fleet.init expects a role maker (role_maker.PaddleCloudRoleMaker("
                f"is_collective=True) or UserDefinedCollectiveRoleMaker), got "
                f"{type(role_maker).__name__}")
        role_maker.generate_role()
        self._role_maker = role_maker
        self._is_initialized = True

    def _refuse_parameter_server_role(self):
        """Collective fleets: a role with pservers belongs to the parameter-server fleet."""
        if self._role_maker.get_pserver_endpoints():
            role = self._role_maker
            self._is_initialized = False
            raise InvalidArgumentError(
                f"this fleet trains collectively, but its role ({type(role).__name__}) names "
                f"parameter servers {role.get_pserver_endpoints()}: for parameter-server "
                f"training use `from paddle.fluid.incubate.fleet.parameter_server."
                f"distribute_transpiler import fleet`; for collective training use "
                f"role_maker.PaddleCloudRoleMaker(is_collective=True)")

    def _check_initialized(self):
        if not self._is_initialized:
            raise PreconditionError(
                "fleet is not initialized: call fleet.init(role) first (role = role_maker."
                "PaddleCloudRoleMaker(is_collective=True))")
        return self._role_maker

    def is_first_worker(self) -> bool:
        """Whether this is worker 0."""
        return self._check_initialized().is_first_worker()

    def worker_index(self) -> int:
        """This worker's id (its rank)."""
        return self._check_initialized().worker_index()

    def worker_num(self) -> int:
        """How many workers the job has."""
        return self._check_initialized().worker_num()

    def is_worker(self) -> bool:
        """Collective mode: always True."""
        return self._check_initialized().is_worker()

    def is_server(self) -> bool:
        """Collective mode: always False."""
        return self._check_initialized().is_server()

    def worker_endpoints(self, to_string: bool = False):
        """Every worker's 'ip:port' (joined by commas with to_string)."""
        endpoints = self._check_initialized().get_trainer_endpoints()
        return ",".join(endpoints) if to_string else endpoints

    def server_num(self) -> int:
        """Parameter servers: 0 in collective mode."""
        return len(self._check_initialized().get_pserver_endpoints())

    def server_index(self) -> int:
        """As fluid: the role's current id."""
        return self._check_initialized().server_index()

    def server_endpoints(self, to_string: bool = False):
        """Parameter-server endpoints: none in collective mode."""
        endpoints = self._check_initialized().get_pserver_endpoints()
        return ",".join(endpoints) if to_string else endpoints

    def barrier_worker(self):
        """Wait until every worker gets here."""
        self._check_initialized().barrier_worker()

    def all_reduce_worker(self, input, output, mode: str = "sum"):
        """Reduce the 1-D `input` over every worker into `output` ("sum", as fluid's fleet
        does; "min" or "max" as its role makers take). See RoleMakerBase.all_reduce_worker.

        >>> # out = np.zeros(2); fleet.all_reduce_worker(np.array([1.0, rank]), out)
        """
        self._check_initialized().all_reduce_worker(input, output, mode)

    def split_files(self, files: list) -> list:
        """This worker's share of `files`: contiguous blocks, the first ones one longer."""
        if not isinstance(files, list):
            raise InvalidArgumentError(f"files must be a list, got {type(files).__name__}")
        n, i = self.worker_num(), self.worker_index()
        base, extra = divmod(len(files), n)
        start = i * base + min(i, extra)
        return files[start:start + base + (1 if i < extra else 0)]

    def _default_program(self, main_program):
        """The program to save: the one given, else the one minimize() trained."""
        if main_program is not None:
            return main_program
        if self._transpiled_program is None:
            raise PreconditionError(
                "fleet has no program yet: call fleet.distributed_optimizer(...).minimize(loss) "
                "first, or pass main_program=")
        return self._transpiled_program

    def save_persistables(self, executor, dirname, main_program=None, filename=None):
        """fluid.io.save_persistables of the trained program (Reduce-mode state gathered)."""
        from .. import io

        io.save_persistables(executor, dirname, self._default_program(main_program),
                             filename=filename)

    def save_inference_model(self, executor, dirname, feeded_var_names=None, target_vars=None,
                             main_program=None, export_for_deployment=True):
        """fluid.io.save_inference_model of the trained program, pruned to `target_vars`."""
        from .. import io

        io.save_inference_model(dirname, feeded_var_names, target_vars, executor,
                                self._default_program(main_program), None, None,
                                export_for_deployment)


class WrappedOptimizer:
    """What both fleets' distributed_optimizer return share: the wrapped optimizer's
    backward and apply_gradients as they are; each fleet's minimize adds its own step."""

    _optimizer = None  # set by the subclass

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None):
        """The wrapped optimizer's backward (params_grads), nothing distributed yet."""
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set,
                                        callbacks)

    def apply_gradients(self, params_grads):
        """The wrapped optimizer's update ops for `params_grads`."""
        return self._optimizer.apply_gradients(params_grads)


def compile_data_parallel(owner, main, startup, loss, build_strategy, exec_strategy):
    """As fluid's fleet does in nccl2 mode: the trainer endpoints into the startup program
    (the NCCL id exchange on GPUs), then `CompiledProgram(main).with_data_parallel` with the
    role's trainer count and id."""
    from ..executor.compiled import CompiledProgram
    from ..ps.transpiler import DistributeTranspiler, DistributeTranspilerConfig

    endpoints = owner.worker_endpoints()
    trainer_id = owner.worker_index()
    config = DistributeTranspilerConfig()
    config.mode = "nccl2"
    DistributeTranspiler(config).transpile(
        trainer_id, program=main, trainers=",".join(endpoints), startup_program=startup,
        current_endpoint=endpoints[trainer_id])
    strategy = copy.copy(build_strategy)
    strategy.num_trainers = owner.worker_num()
    strategy.trainer_id = trainer_id
    strategy.trainers_endpoints = list(endpoints)
    return CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, exec_strategy=exec_strategy)


def bind_compiled(program, compiled, run: bool):
    """Let `program` stand for `compiled`: saving it gathers Reduce-mode optimizer state; with
    `run`, `exe.run(program)` runs the data-parallel compiled program (Paddle 2.x's fleet keeps
    it as `program._graph` for the executor). Instance attributes: clones do not carry them."""
    program.optimizer_state_sharding = compiled.optimizer_state_sharding
    if run:
        program._graph = compiled
