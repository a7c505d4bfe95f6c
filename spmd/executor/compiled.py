"""CompiledProgram: a Program prepared for running by an Executor, per fluid's API; with
`with_data_parallel` it runs data-parallel over the places of this process and over every
process of the MPI job."""
from __future__ import annotations

from ..core.places import CPUPlace, CUDAPlace, Place
from ..core.program import Program
from ..errors import ArgumentTypeError, InvalidArgumentError, PreconditionError
from ..flags import flags
from ..passes.strategy import BuildStrategy, ExecutionStrategy


class SharedProgramNotRun(PreconditionError, ValueError):
    """share_vars_from names a program that has not run: a ValueError too, as fluid's ("The
    shared Program is not compiled and executed")."""


class CompiledProgram:
    """Wraps a Program for `Executor.run` (fluid.CompiledProgram).

    >>> import spmd.fluid as fluid
    >>> compiled = fluid.CompiledProgram(fluid.Program())
    """

    def __init__(self, program_or_graph, build_strategy: BuildStrategy | None = None):
        from ..core.graph import Graph

        # fluid's CompiledProgram(core.Graph(...)): runs the program the graph writes back to
        # (its `graph` attribute says it came from one: fluid.io refuses it, as fluid's does)
        self.graph = program_or_graph if isinstance(program_or_graph, Graph) else None
        if self.graph is not None:
            program_or_graph = self.graph.to_program()
        if not isinstance(program_or_graph, Program):  # a TypeError, as fluid's
            raise ArgumentTypeError(
                f"CompiledProgram expects a Program or a core.Graph, got "
                f"{type(program_or_graph).__name__}"
            )
        self._program = program_or_graph
        self._build_strategy = _check_type(build_strategy, BuildStrategy, "build_strategy")
        self._exec_strategy = ExecutionStrategy()
        # a job.JOB_KINDS kind ("data_parallel"); None: runs as a program on one place
        self.distribution: str | None = None
        self._loss_name = None
        self._share_vars_from = None
        self._places = None
        self._job = None  # what it runs as (executor/job.py), made on its first run
        self._one_place = None  # (source version, the program a plain run runs)
        self._bound = None  # (scope, place) of _compile

    @property
    def program(self) -> Program:
        return self._program

    @property
    def _local_scopes(self) -> list:
        """fluid's CompiledProgram._local_scopes: the list of scopes it handed its C++
        executor to share: empty unless it shares the variables of another data-parallel
        program, whose place scopes it is then."""
        share = self._share_vars_from
        return [] if share is None else list(share.place_scopes or [])

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
        if self.distribution is not None:
            raise PreconditionError("with_data_parallel was already called on this program")
        if share_vars_from is not None and not isinstance(share_vars_from, CompiledProgram):
            raise InvalidArgumentError(
                f"share_vars_from must be a CompiledProgram, got {type(share_vars_from).__name__}")
        self.distribution = "data_parallel"
        self._loss_name = loss_name.name if hasattr(loss_name, "name") else loss_name
        if build_strategy is not None:
            self._build_strategy = _check_type(build_strategy, BuildStrategy, "build_strategy")
        if exec_strategy is not None:
            self._exec_strategy = _check_type(exec_strategy, ExecutionStrategy, "exec_strategy")
        self._share_vars_from = share_vars_from
        # one place counts as a list of it, as fluid 1.8 (places=fluid.CPUPlace())
        self._places = [places] if places is not None and not isinstance(
            places, (list, tuple)) else places
        return self

    def _compile(self, scope, place) -> CompiledProgram:
        """Bind the program to `scope` and `place` (fluid's CompiledProgram._compile, which
        Executor.run calls): the first call binds, and for a data-parallel program makes its
        job on them; a later call with another scope or place is a ValueError, as fluid's
        ("Cannot compile program with different scope."). Returns self."""
        bound = self._bound
        if bound is not None:
            if scope is not None and scope is not bound[0]:
                raise InvalidArgumentError(
                    "Cannot compile program with different scope: this CompiledProgram was "
                    "compiled for another scope; make one CompiledProgram per scope")
            if place is not None and place != bound[1]:
                raise InvalidArgumentError(
                    f"Cannot compile program with different place: compiled for {bound[1]}, "
                    f"got {place}; make one CompiledProgram per place")
            return self
        self._bound = (scope, place)
        if self.distribution is not None:
            self.job_on(place, scope)
        return self

    def places_for(self, executor_place: Place) -> list[Place]:
        """The places of this process a run on `executor_place` uses (one for a program
        compiled without data parallelism)."""
        if self.distribution != "data_parallel":
            return [executor_place]
        if self._places is not None:
            places = [_as_place(p) for p in self._places]
            if not places:
                raise InvalidArgumentError("with_data_parallel(places=[]) names no place")
            return places
        if executor_place.is_gpu:
            return [executor_place]  # one process per GPU
        return [CPUPlace()] * flags().cpu_num

    @property
    def job(self):
        """The job this program runs as (executor/job.py), once it ran; None before."""
        return self._job

    def job_on(self, executor_place: Place, scope):
        """The job this program runs as, made on its first run on `scope` (the scope of that
        run): its distribution's kind (job.JOB_KINDS), or without one a OnePlaceJob on the
        executor's place."""
        job = self._job
        if job is None or (self.distribution is None and job.place != executor_place):
            from .job import make_job

            job = self._job = make_job(self, executor_place, scope)
        return job

    def _distributed_job(self):
        return self._job if self.distribution is not None else None

    def memory_options(self):
        """What its plans may do to save memory, from its BuildStrategy: updates and
        elementwise ops on dying inputs in place (enable_inplace) and the memory_optimize
        rewrite (an executor.inplace.MemoryOptions).

        >>> import spmd.fluid as fluid
        >>> fluid.CompiledProgram(fluid.Program()).memory_options().inplace
        True
        """
        from .inplace import MemoryOptions

        bs = self._build_strategy
        return MemoryOptions(inplace=bool(bs.enable_inplace), share=bool(bs.memory_optimize))

    def one_place_program(self) -> Program:
        """The program a run without data parallelism runs: the program itself, or, when the
        BuildStrategy asks for a pass that serves one place (the fusions, memory_optimize,
        debug_graphviz_path: passes.data_parallel.build_one_place), a copy those passes
        rewrote, made again when the program changed."""
        if not _one_place_passes_asked(self._build_strategy):
            return self._program
        version = self._program._version
        if self._one_place is None or self._one_place[0] != version:
            from ..passes.data_parallel import build_one_place

            self._one_place = (version, build_one_place(self._program, self._build_strategy)[0])
        return self._one_place[1]

    # -- what a data-parallel program made of the program: None until its first run ----------
    @property
    def data_parallel_program(self) -> Program | None:
        """The program every place runs (collectives inserted, Reduce-mode ops owned)."""
        job = self._distributed_job()
        return None if job is None else job.program

    @property
    def place_scopes(self) -> list | None:
        """The scope of each place of this process (the first is the scope of the run)."""
        job = self._distributed_job()
        return None if job is None else list(job.scopes)

    @property
    def place_ranks(self) -> list | None:
        """The global rank of each place of this process."""
        job = self._distributed_job()
        return None if job is None else list(job.ranks)

    @property
    def allreduce_layout(self):
        """With BuildStrategy.use_hierarchical_allreduce over several processes, once run:
        the nodes the processes form and whether an allreduce takes the hierarchical path
        (a comm.hierarchy.NodeLayout: `.hierarchical`, `.nodes`, `.node`, `.local_rank`,
        `.describe()`); None for the flat allreduce (or before the first run).

        >>> # compiled.allreduce_layout.hierarchical   # True at 4 ranks as 2 nodes of 2
        """
        return getattr(self._distributed_job(), "allreduce_layout", None)

    @property
    def state_sharding(self):
        """Reduce mode: where each piece of optimizer state lives (a StateSharding), once the
        first run split it; None otherwise."""
        shards = self.optimizer_state_sharding()
        return None if shards is None else shards[1]

    def optimizer_state_sharding(self):
        """For the save functions: (the scope it runs on, its StateSharding), or None when no
        state is split (not data parallel, AllReduce mode, one device, or not run yet)."""
        job = self._distributed_job()
        if job is None:  # a program sharing a trained one's variables may save first
            share = self._share_vars_from
            return share.optimizer_state_sharding() if share is not None else None
        sharding = job.state_sharding
        return None if sharding is None else (job.scopes[0], sharding)


# the BuildStrategy fields of the passes that run on one place (Pass.one_place), read without
# importing the passes (a plain CompiledProgram would otherwise load all of them)
ONE_PLACE_FIELDS = ("fuse_elewise_add_act_ops", "fuse_bn_act_ops", "fuse_all_optimizer_ops",
                    "memory_optimize", "debug_graphviz_path")


def _one_place_passes_asked(strategy: BuildStrategy) -> bool:
    from ..passes.pass_builder import graphviz_paths  # (no pass module loads with it)

    return any(getattr(strategy, name) for name in ONE_PLACE_FIELDS) or bool(
        graphviz_paths(strategy))


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


def compiled_of(program):
    """The CompiledProgram `program` is or stands for (Paddle 2.x's fleet binds one to its
    Program as `_graph`), or None."""
    if type(program) is CompiledProgram:
        return program
    graph = getattr(program, "_graph", program)
    return graph if isinstance(graph, CompiledProgram) else None


def places_in_process(program, place) -> int:
    """How many places of this process one run of `program` feeds (each reads a batch)."""
    places = getattr(program, "places_for", None)  # a CompiledProgram
    return len(places(place)) if places is not None else 1
