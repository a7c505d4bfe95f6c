"""Executor: runs a Program (or a CompiledProgram) on one place over a Scope."""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from .. import guard
from ..comm.factory import world_communicator
from ..core.lod import LoDTensor, LoDTensorArray
from ..core.places import CPUPlace, Place, array_module
from ..core.program import Program, default_main_program
from ..core.scope import global_scope, host_array
from ..core.selected_rows import dense_of
from ..core.variable import Variable
from ..errors import InvalidArgumentError, PreconditionError
from . import feed_fetch_ops
from . import prune_program as pruning
from .allocator import tune_allocator
from .feed import drop_unknown_feeds, untracked_lod_feeds, with_lod_levels
from .fetch import as_fetched
from .inplace import MemoryOptions
from .math_threads import apply_once as apply_fluid_math_threads
from .plan import Plan
from .plan_cache import PlanCache

# Programs that do not run as a plan, found by an op in their global block: op type -> a
# function (program, feed names, fetch names, place) making what Executor.run runs in place of
# a Plan (same `run(scope, feed, xp, place)` and `fetched_lods`). Parameter-server mode's
# listen_and_serv registers one (spmd/ps/pserver.py): the pserver's program serves until its
# trainers are done. Chosen when the plan is compiled, so other programs pay nothing per step.
PROGRAM_RUNNERS: dict[str, Callable] = {}
# Called with the executor by Executor.close() (parameter-server mode: tell every pserver this
# trainer is done, as fluid's Executor.close does).
CLOSE_HOOKS: list[Callable] = []


def register_program_runner(op_type: str):
    """Decorator: programs whose global block holds an `op_type` op run through the function
    it decorates (see PROGRAM_RUNNERS)."""

    def register(make):
        if op_type in PROGRAM_RUNNERS:
            raise ValueError(f"a program runner for op '{op_type}' is registered twice")
        PROGRAM_RUNNERS[op_type] = make
        return make

    return register


def register_close_hook(hook: Callable) -> Callable:
    """`hook(executor)` runs in every Executor.close()."""
    if hook not in CLOSE_HOOKS:
        CLOSE_HOOKS.append(hook)
    return hook


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


def _places_in_process(program, place) -> int:
    """How many places of this process one run of `program` feeds (each reads a batch)."""
    places = getattr(program, "places_for", None)  # a CompiledProgram
    return len(places(place)) if places is not None else 1


def _compiled(program):
    """The CompiledProgram `program` is or stands for (Paddle 2.x's fleet binds one to its
    Program as `_graph`), or None."""
    from .compiled import CompiledProgram

    if isinstance(program, CompiledProgram):
        return program
    graph = getattr(program, "_graph", None)
    return graph if isinstance(graph, CompiledProgram) else None


def _handed_out(value, lod, return_numpy: bool):
    """One fetched value as fluid hands it out: a numpy array (a copy: a fetch may be the
    scope's own array or a view of it), or with return_numpy=False a LoDTensor with its LoD;
    a tensor array as a list of those; a sparse gradient as its dense table."""
    if isinstance(value, list):  # a tensor array: its LoD is its elements' LoDs
        lods = lod if isinstance(lod, list) else [None] * len(value)
        items = [_handed_out(v, v_lod, return_numpy) for v, v_lod in zip(value, lods)]
        return items if return_numpy else LoDTensorArray(items)
    if value is None:  # a variable no op wrote (a loop that ran zero times): fluid's None
        return None
    value = dense_of(value)
    if return_numpy:
        return as_fetched(host_array(value, copy=True))
    return LoDTensor(value, lod)


def _declare_persistables(program, scope) -> None:
    """Make the program's persistable variables in `scope` (with no value where they have
    none): fluid's executor makes them before it runs an op, so after a failed run they exist,
    and programs (Paddle's tests) look them up."""
    for name, var in program.global_block().vars.items():
        if var.persistable and scope.find_var(name) is None:
            scope.var(name)


def _keep_persistable_feeds(program, feed, scope) -> None:
    """fluid's feed op writes a fed variable into the scope before the ops run: a persistable
    one stays there after the run (Paddle's gradient_checker feeds its inputs once, then reads
    them back), unless an op of the run writes it (an in-place update), whose value the run
    then leaves in the scope."""
    block = program.global_block()
    for name, value in feed.items():
        var = block.vars.get(name)
        if var is not None and var.persistable:
            scope._assign(name, np.array(value, dtype=var.dtype))


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
        self.plan_cache = PlanCache()  # every plan this executor compiled, data parallel too
        # run(use_prune=True): cache key -> (the program given, its pruned program); and per
        # CompiledProgram given, its first pruned copy, whose variables later copies share
        self._pruned_programs: dict = {}
        self._pruned_compiled_first: dict = {}
        self._rngs: dict = {}
        self._lod_copies: dict = {}  # see _with_fed_lod
        self._closed = False

    @property
    def _default_executor(self):
        """fluid's core.Executor behind this one (fluid.core._create_loaded_parameter takes
        it for its place): spmd has no second executor, so this one."""
        return self

    def _rng(self, program: Program):
        seed = program.random_seed
        entry = self._rngs.get(program._uid)
        if entry is None or entry[0] != seed:
            entry = (seed, np.random.default_rng(seed if seed else None))
            self._rngs[program._uid] = entry
        return entry[1]

    def _plan(self, program: Program, feed_names, fetch_names, memory=None) -> Plan:
        # plans of one program with other memory options are other plans
        where = None if memory is None or memory == MemoryOptions() else memory
        return self.plan_cache.get(
            program, feed_names, fetch_names, where,
            lambda: self._make_plan(program, feed_names, fetch_names, memory))

    def _make_plan(self, program: Program, feed_names, fetch_names, memory=None):
        if PROGRAM_RUNNERS:
            for op in program.global_block().ops:
                make = PROGRAM_RUNNERS.get(op.type)
                if make is not None:
                    return make(program, feed_names, fetch_names, self.place)
        return Plan(program, feed_names, fetch_names, self._rng(program),
                    comm=functools.partial(world_communicator, self._device_id()),
                    place=self.place, memory=memory)

    def _device_id(self) -> int | None:
        return self.place.device_id if self.place.is_gpu else None

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
        fetch_list = [] if fetch_list is None else fetch_list
        if not isinstance(fetch_list, (list, tuple)):
            fetch_list = [fetch_list]
        given_fetches = fetch_list
        fetch_list, optimize_ops = pruning.split_optimize_ops(fetch_list)
        if optimize_ops or use_prune:
            program, feed = self._pruned(program, feed, given_fetches, fetch_list, optimize_ops)
        fetch_names = [_fetch_name(f) for f in fetch_list]
        feed = _call_run_hooks(program, feed, scope, self.place)
        compiled = _compiled(program)
        source = compiled.program if compiled is not None else program
        if isinstance(source, Program):
            feed = drop_unknown_feeds(source.global_block(), feed)
        if compiled is not None:
            self._check_feed_fetch_ops(compiled, feed, fetch_names)
            runner = compiled.runner(self.place, scope)
            if runner is not None:  # data parallel
                # as in one process: a fed persistable (a scheduler's rate) is in the scope
                _keep_persistable_feeds(source, feed[0] if isinstance(feed, list) else feed,
                                        scope)
                return runner.run(scope, feed, fetch_names, return_numpy, return_merged,
                                  self.plan_cache)
            if isinstance(feed, list) and len(feed) == 1:
                feed = feed[0]  # a one-place list, as fluid takes it (what loaders yield)
            if not isinstance(feed, dict):
                raise InvalidArgumentError(
                    f"feed must be a dict name -> array, got {type(feed).__name__}")
            # compiled for one place: the program as it is, or as memory_optimize made it
            return self._run_program(compiled.one_place_program(), feed, fetch_names, scope,
                                     return_numpy, compiled.memory_options())
        if not isinstance(program, Program):
            raise InvalidArgumentError(
                f"Executor.run expects a Program or CompiledProgram, got {type(program).__name__}"
            )
        if isinstance(feed, list) and len(feed) == 1:
            feed = feed[0]  # fluid accepts a one-place list for a plain program
        if not isinstance(feed, dict):
            raise InvalidArgumentError(
                f"feed must be a dict name -> array, got {type(feed).__name__}")
        return self._run_program(program, feed, fetch_names, scope, return_numpy)

    def _pruned(self, program, feed, given_fetches, fetch_list, optimize_ops):
        """(the pruned program, the feed it takes), pruned once per cache key, as fluid's."""
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
        return pruning.prune(program, feed, fetch_list or [], optimize_ops or [])

    @staticmethod
    def _check_feed_fetch_ops(compiled, feed, fetch_names) -> None:
        """A data-parallel run of a program with feed / fetch ops (a loaded inference model)
        is checked against them as fluid's; its runner runs the program without them
        (compiled.py, spmd/executor/feed_fetch_ops.py)."""
        source = compiled.program
        if compiled.distribution is None or not feed_fetch_ops.has_feed_fetch_ops(source):
            return
        one_place = feed[0] if isinstance(feed, list) and feed else feed  # each place's feed
        feed_fetch_ops.check_run(source, pruning.feed_names(one_place), fetch_names)

    def _with_fed_lod(self, program, feed):
        """`program`, or its copy carrying the LoD fed to variables declared lod_level=0 that
        an op reads as LoD (feed.untracked_lod_feeds), made once per program version."""
        key = (id(program), program._version, tuple(
            (n, len(v.lod())) for n, v in feed.items() if isinstance(v, LoDTensor) and v.lod()))
        cached = self._lod_copies.get(key)
        if cached is None:
            levels = untracked_lod_feeds(program, feed)
            copy = with_lod_levels(program, levels) if levels else None
            cached = self._lod_copies[key] = (program, copy)  # the given one keeps its id
        return cached[1] if cached[1] is not None else program

    def _run_program(self, program, feed, fetch_names, scope, return_numpy, memory=None):
        if feed_fetch_ops.has_feed_fetch_ops(program):  # an inference model's feed/fetch ops
            feed_fetch_ops.check_run(program, list(feed), fetch_names)
            program = feed_fetch_ops.runnable(program)
        if any(isinstance(v, LoDTensor) for v in feed.values()):
            program = self._with_fed_lod(program, feed)
        plan = self._plan(program, list(feed), fetch_names, memory)
        _keep_persistable_feeds(program, feed, scope)
        try:
            outcome = plan.run(scope, feed, array_module(self.place), self.place)
        except Exception:
            _declare_persistables(program, scope)
            raise
        results = outcome.values
        lods = outcome.lods or [None] * len(results)
        return [_handed_out(r, lod, return_numpy) for r, lod in zip(results, lods)]

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
        self.plan_cache.clear()
        self._pruned_programs.clear()
        self._pruned_compiled_first.clear()
        self._lod_copies.clear()
        self._closed = True
        for hook in list(CLOSE_HOOKS):
            hook(self)
