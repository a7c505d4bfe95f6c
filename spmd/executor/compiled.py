"""CompiledProgram: a Program prepared for running by an Executor, per fluid's API; with
`with_data_parallel` it runs data-parallel over the places of this process and over every
process of the MPI job."""
from __future__ import annotations

from ..core.places import CPUPlace, CUDAPlace, Place
from ..core.program import Program
from ..errors import InvalidArgumentError, PreconditionError
from ..flags import flags
from ..passes.strategy import BuildStrategy, ExecutionStrategy


class CompiledProgram:
    """Wraps a Program for `Executor.run` (fluid.CompiledProgram).

    >>> import spmd.fluid as fluid
    >>> compiled = fluid.CompiledProgram(fluid.Program())
    """

    def __init__(self, program_or_graph, build_strategy: BuildStrategy | None = None):
        if not isinstance(program_or_graph, Program):
            raise InvalidArgumentError(
                f"CompiledProgram expects a Program, got {type(program_or_graph).__name__}"
            )
        self._program = program_or_graph
        self._build_strategy = _check_type(build_strategy, BuildStrategy, "build_strategy")
        self._exec_strategy = ExecutionStrategy()
        self._data_parallel = False
        self._loss_name = None
        self._share_vars_from = None
        self._places = None
        self._runner = None

    @property
    def program(self) -> Program:
        return self._program

    def with_data_parallel(self, loss_name=None, build_strategy=None, exec_strategy=None,
                           share_vars_from=None, places=None) -> CompiledProgram:
        """Run data-parallel: each place (and each process of the MPI job) gets its share of
        every batch, gradients are summed across all of them, and all keep equal parameters.

        As fluid 1.8: `loss_name` is required for training (its gradient is seeded with
        1/number of places, BuildStrategy.GradientScaleStrategy.CoeffNumDevice); a test program
        sharing a training program's variables passes `share_vars_from`; `places` defaults to
        CPU_NUM CPU places, or the one GPU of this process. The program is compiled on its
        first run.

        >>> # train = CompiledProgram(main).with_data_parallel(loss_name=loss.name)
        """
        if self._data_parallel:
            raise PreconditionError("with_data_parallel was already called on this program")
        if share_vars_from is not None and not isinstance(share_vars_from, CompiledProgram):
            raise InvalidArgumentError(
                f"share_vars_from must be a CompiledProgram, got {type(share_vars_from).__name__}")
        self._data_parallel = True
        self._loss_name = loss_name.name if hasattr(loss_name, "name") else loss_name
        if build_strategy is not None:
            self._build_strategy = _check_type(build_strategy, BuildStrategy, "build_strategy")
        if exec_strategy is not None:
            self._exec_strategy = _check_type(exec_strategy, ExecutionStrategy, "exec_strategy")
        self._share_vars_from = share_vars_from
        self._places = places
        return self

    def _resolve_places(self, executor_place: Place) -> list[Place]:
        if self._places is not None:
            places = [_as_place(p) for p in self._places]
            if not places:
                raise InvalidArgumentError("with_data_parallel(places=[]) names no place")
            return places
        if executor_place.is_gpu:
            return [executor_place]  # one process per GPU
        return [CPUPlace()] * flags().cpu_num

    def _optimizer_state_shards(self):
        """For the save functions: (the scope it runs on, where each piece of Reduce-mode
        optimizer state lives), or None when no state is split (not data parallel, AllReduce
        mode, one device, or not run yet)."""
        if self._runner is None:  # a program sharing a trained one's variables may save first
            share = self._share_vars_from
            return share._optimizer_state_shards() if share is not None else None
        sharded = self._runner.sharded_state
        return None if sharded is None else (self._runner.scopes[0], sharded)

    def _run_compiled(self, executor, feed, fetch_names, scope, return_numpy, return_merged):
        if not self._data_parallel:
            if not isinstance(feed, dict):
                raise InvalidArgumentError(
                    f"feed must be a dict name -> array, got {type(feed).__name__}")
            return executor._run_program(self._program, feed, fetch_names, scope, return_numpy)
        if self._runner is None:
            from .parallel import DataParallelRunner

            share = None
            if self._share_vars_from is not None:
                if not self._share_vars_from._data_parallel:
                    raise InvalidArgumentError(
                        "share_vars_from names a CompiledProgram that is not data parallel: "
                        "call with_data_parallel on it too")
                share = self._share_vars_from._runner
                if share is None:
                    raise PreconditionError(
                        "share_vars_from names a CompiledProgram that has not run yet: run the "
                        "training program once before the program that shares its variables")
            self._runner = DataParallelRunner(self._program, self._build_strategy,
                                              self._loss_name, self._resolve_places(executor.place),
                                              scope, share, self._exec_strategy)
        return self._runner.run(scope, feed, fetch_names, return_numpy, return_merged)


def _check_type(value, kind, name):
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise InvalidArgumentError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _as_place(p) -> Place:
    if isinstance(p, Place):
        return p
    if isinstance(p, str) and p == "cpu":
        return CPUPlace()
    if isinstance(p, str) and p.startswith("gpu:"):
        return CUDAPlace(int(p.split(":")[1]))
    raise InvalidArgumentError(f"places entries must be places or 'cpu' / 'gpu:N', got {p!r}")
