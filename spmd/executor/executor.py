"""Executor: runs a Program (or a CompiledProgram) over a Scope as a job (job.py): `run`
finds or makes the job of what it is given and steps it."""
from __future__ import annotations

from .. import guard
from ..core.places import CPUPlace, Place
from ..core.program import Program, default_main_program
from ..core.scope import global_scope
from ..core.variable import Variable
from ..errors import InvalidArgumentError, PreconditionError
from .allocator import tune_allocator
from .compiled import compiled_of as _compiled
from .compiled import places_in_process as _places_in_process
from .job import ExecutorPlans, OnePlaceJob, end_loaded_kinds, program_kind
from .math_threads import apply_once as apply_fluid_math_threads


def _fetch_name(item) -> str:
    if isinstance(item, Variable):
        return item.name
    if isinstance(item, str):
        return item
    raise InvalidArgumentError(
        f"fetch_list items must be Variables or names, got {type(item).__name__}"
    )


def _feed_by_name(feed):
    """Feed keys may be Variables or names; a list feed holds one dict per place."""
    if type(feed) is dict:
        for k in feed:
            if type(k) is not str:
                break
        else:
            return dict(feed)  # names already (the usual feed)
    if isinstance(feed, dict):
        return {(k.name if isinstance(k, Variable) else k): v for k, v in feed.items()}
    if isinstance(feed, (list, tuple)):
        return [_feed_by_name(f) if isinstance(f, dict) else f for f in feed]
    return feed


def _call_run_hooks(program, feed, scope, place):
    """The program's run hooks (readers, learning-rate schedulers) see the feed and scope
    before the run; a CompiledProgram's are those of the Program it compiles. A hook marked
    `takes_places` (a non-iterable reader) is also told how many places the run feeds, since
    each place reads its own batch, and the Program run (a test clone reads the loader of the
    program it was cloned from, and may run a short last step); it returns the feed (a list
    of per-place dicts when there are several). Returns the feed to run with."""
    target = getattr(program, "program", program)
    for hook in getattr(target, "run_hooks", ()):
        if getattr(hook, "takes_places", False):
            feed = hook(feed, scope, num_places=_places_in_process(program, place),
                        program=target)
        else:
            hook(feed, scope)
    return feed


def _plain_fetch_names(fetch_list) -> list | None:
    """The names of a fetch list of names and Variables (the usual one, in one pass), or
    None when it holds anything else: optimizer ops, lists of them, minimize()'s result,
    a bad item (pruning.split_optimize_ops then sorts it out, or says what is wrong)."""
    if fetch_list is None:
        return []
    if type(fetch_list) is not list and type(fetch_list) is not tuple:
        return None
    names = []
    for item in fetch_list:
        if type(item) is str:
            names.append(item)
        elif isinstance(item, Variable):
            names.append(item.name)
        else:
            return None
    return names


class Executor:
    """Runs programs on `place`; plans are compiled once per (program, feed names, fetch names).

    >>> exe = Executor(CPUPlace())
    >>> exe.run(Program())
    []
    """

    def __init__(self, place: Place | None = None):
        self.place = place if place is not None else CPUPlace()
        if not isinstance(self.place, Place):
            raise InvalidArgumentError(
                f"Executor expects a place (fluid.CPUPlace() or fluid.CUDAPlace(i)), "
                f"got {self.place!r}"
            )
        tune_allocator()
        apply_fluid_math_threads()  # fluid's one math thread per op (OMP_NUM_THREADS)
        # the jobs it ran: a plain program's, by program; a CompiledProgram's (which holds
        # it too), by id: held here as their plans were, so close() stops their threads
        self._jobs: dict = {}
        self._compiled_jobs: dict = {}
        # the jobs that split their scopes' optimizer state (Reduce mode), kept by close():
        # a save or load after it must still see the split (state_sharding)
        self._closed_splits: list = []
        # run(use_prune=True): cache key -> (the program given, its pruned program); and per
        # CompiledProgram given, its first pruned copy, whose variables later copies share
        self._pruned_programs: dict = {}
        self._pruned_compiled_first: dict = {}
        self._closed = False

    @property
    def _default_executor(self):
        """fluid's core.Executor behind this one (fluid.core._create_loaded_parameter takes
        it for its place): spmd has no second executor, so this one."""
        return self

    def run(self, program=None, feed=None, fetch_list=None, feed_var_name="feed",
            fetch_var_name="fetch", scope=None, return_numpy=True, use_program_cache=True,
            return_merged=True, use_prune=False):
        """Run `program` (default: the default main program) once and return the fetches.
        With use_prune (or optimizer ops in fetch_list, see spmd/executor/prune_program.py)
        the program runs pruned to what the fetches need from the feeds."""
        if self._closed:
            raise PreconditionError("this Executor was closed; create a new one")
        guard.note_step()  # named when a peer leaves: the runs both sides reached
        program = default_main_program() if program is None else program
        scope = global_scope() if scope is None else scope
        feed = _feed_by_name({} if feed is None else feed)
        fetch_names = _plain_fetch_names(fetch_list)
        if fetch_names is None or use_prune:  # optimizer ops to split off, or pruning asked
            program, feed, fetch_names = self._split_fetches(program, feed, fetch_list, use_prune)
        feed = _call_run_hooks(program, feed, scope, self.place)
        job = self._job(program, scope)
        if not job.started:
            job.start(scope, self.state_sharding)
        return job.step(scope, feed, fetch_names, return_numpy, return_merged)

    def _split_fetches(self, program, feed, fetch_list, use_prune):
        """(program, feed, fetch names) of a fetch list holding optimizer ops, or of a run
        with use_prune: the program pruned to them (once per cache key, `_pruned`)."""
        fetch_list = [] if fetch_list is None else fetch_list
        if not isinstance(fetch_list, (list, tuple)):
            fetch_list = [fetch_list]
        given_fetches = fetch_list
        from . import prune_program as pruning  # (only for such runs)

        fetch_list, optimize_ops = pruning.split_optimize_ops(fetch_list)
        if optimize_ops or use_prune:
            program, feed = self._pruned(program, feed, given_fetches, fetch_list, optimize_ops)
        return program, feed, [_fetch_name(f) for f in fetch_list]

    def _job(self, program, scope):
        """The job that runs `program`: a plain program's (one per program, kept here), or
        a CompiledProgram's on this place and scope, noted as one this executor ran
        (plan_cache, state_sharding, close)."""
        compiled = _compiled(program)
        if compiled is not None:
            job = compiled.job_on(self.place, scope)
            self._compiled_jobs[id(job)] = job
            return job
        if type(program) is not Program and not isinstance(program, Program):
            raise InvalidArgumentError(
                f"Executor.run expects a Program or CompiledProgram, got {type(program).__name__}"
            )
        job = self._jobs.get(program._uid)
        if job is None:
            kind = program_kind(program) or OnePlaceJob
            job = self._jobs[program._uid] = kind(program, self.place)
        return job

    def _every_job(self) -> list:
        return list(self._jobs.values()) + list(self._compiled_jobs.values())

    @property
    def plan_cache(self) -> ExecutorPlans:
        """Every plan the jobs this executor ran compiled (`find`, `len`, `clear`)."""
        return ExecutorPlans(self._every_job())

    def state_sharding(self, scope):
        """The StateSharding whose Reduce-mode optimizer state `scope` holds split across the
        ranks, by a job this executor started on it (asked of the jobs: the split outlives
        close()); None when none split it. io's saves and loads check it."""
        for job in self._every_job() + self._closed_splits:
            sharding = job.state_sharding
            if sharding is not None and any(place_scope is scope for place_scope in job.scopes):
                return sharding
        return None

    def _pruned(self, program, feed, given_fetches, fetch_list, optimize_ops):
        """(the pruned program, the feed it takes), pruned once per cache key, as fluid's."""
        from . import prune_program as pruning

        key = pruning.cache_key(program, feed, given_fetches)
        cached = self._pruned_programs.get(key)
        if cached is None:
            given = program
            if _compiled(program) is not None:
                first = self._pruned_compiled_first.get(id(given))
                program = pruning.compiled_copy(_compiled(program),
                                                None if first is None else first[1])
                if first is None:
                    self._pruned_compiled_first[id(given)] = (given, program)
            # the given program is held with its pruned one, so its id stays its own
            cached = (given, self._prune_program(program, feed, fetch_list, optimize_ops))
            self._pruned_programs[key] = cached
        return cached[1], pruning.update_feed(cached[1], feed)

    def _prune_program(self, program, feed=None, fetch_list=None, optimize_ops=None):
        """fluid's Executor._prune_program: `program` pruned to `fetch_list` and
        `optimize_ops` (every optimizer op when none is named) from the feeds."""
        from . import prune_program as pruning

        return pruning.prune(program, feed, fetch_list or [], optimize_ops or [])

    def train_from_dataset(self, program=None, dataset=None, scope=None, thread=0,
                           debug=False, fetch_list=None, fetch_info=None, print_period=100,
                           fetch_handler=None):
        """Run `program` over every batch of a fluid Dataset (see spmd.executor.dataset_run).

        >>> # exe.train_from_dataset(main, dataset, fetch_list=[loss], fetch_info=["loss"])
        """
        from .dataset_run import run_from_dataset

        return run_from_dataset(self, program, dataset, scope, thread, False, debug,
                                fetch_list, fetch_info, print_period, fetch_handler)

    def infer_from_dataset(self, program=None, dataset=None, scope=None, thread=0,
                           debug=False, fetch_list=None, fetch_info=None, print_period=100,
                           fetch_handler=None):
        """train_from_dataset for evaluation (see spmd.executor.dataset_run)."""
        from .dataset_run import run_from_dataset

        return run_from_dataset(self, program, dataset, scope, thread, True, debug,
                                fetch_list, fetch_info, print_period, fetch_handler)

    def close(self):
        """Drop compiled plans; the executor cannot run afterwards. In parameter-server mode
        it also tells every pserver this trainer is done (fluid's Executor.close)."""
        for job in self._every_job():
            job.close()
        self._closed_splits = [job for job in self._every_job() if job.state_sharding is not None]
        self._jobs.clear()
        self._compiled_jobs.clear()
        self._pruned_programs.clear()
        self._pruned_compiled_first.clear()
        self._closed = True
        end_loaded_kinds(self)
