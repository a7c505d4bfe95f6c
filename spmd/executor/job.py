"""Job: what one run of a program owns, and the one path of `exe.run`.

A job holds the places it runs on, their communicators, its own plan cache (`plans`), the
random streams (`place_rng` is the one policy) and, in Reduce mode, the StateSharding.
`start(scope)` does the first run's work, `step(scope, feed, fetch_names, return_numpy,
return_merged)` runs one step and returns what it fetched. Executor.run finds or makes the
job (`job_for`) and steps it:

- a plain Program, or a CompiledProgram without distribution, is a OnePlaceJob on the
  executor's place (one per program and memory options, held by the executor; a
  CompiledProgram holds its own);
- a CompiledProgram's distribution picks another kind from JOB_KINDS (data parallel:
  parallel.py's DataParallelJob), and an op of the program's global block may ask for one by
  its OpDef.job_kind (parameter-server mode's pserver and trainer, spmd/ps/jobs.py). A kind
  is imported when such a program first runs, so `import spmd` loads none of them.

Within a job, a step goes feed -> Plan.run (plan.py: kernels, then the collectives through the
job's communicators) -> its Outcome (values, LoDs, whether collectives started) -> fetches.
"""
from __future__ import annotations

import functools
import importlib

import numpy as np

from ..comm.factory import world_communicator
from ..core.lod import LoDTensor, LoDTensorArray
from ..core.places import array_module
from ..core.scope import host_array
from ..core.selected_rows import dense_of
from ..errors import InvalidArgumentError
from ..ops.registry import OP_DEFS
from . import feed_fetch_ops
from .feed import drop_unknown_feeds, untracked_lod_feeds, with_lod_levels
from .fetch import as_fetched
from .inplace import MemoryOptions
from .plan import Plan
from .plan_cache import PlanCache

# The kinds of job other than one place a CompiledProgram's distribution names, as
# "module:class", imported on the first run of such a program; the class is made with (source,
# executor place, scope). An op asks for its kind itself (OpDef.job_kind: parameter-server
# mode's send, recv, listen_and_serv, ...), so that no table here lists op types.
JOB_KINDS: dict = {"data_parallel": "spmd.executor.parallel:DataParallelJob"}
_LOADED_KINDS: dict = {}  # "module:class" -> the class, once imported


def place_rng(seed: int, rank: int | None = None):
    """The random stream of one place: the one RNG policy of every job. A one-place job's
    stream is default_rng(seed) (per program: seeded programs draw the same numbers run after
    run of the script); place `rank` of a data-parallel job draws default_rng([seed, rank]),
    so places differ (dropout) and a rerun repeats them. Seed 0: fresh entropy."""
    if rank is None:
        return np.random.default_rng(seed if seed else None)
    return np.random.default_rng([seed, rank]) if seed else np.random.default_rng()


def kind_of(key: str):
    """The job class JOB_KINDS names for `key` (imported now), or None."""
    return _load(JOB_KINDS.get(key))


def _load(kind):
    """`kind` as a class: a "module:class" path imported now (and noted for
    end_loaded_kinds), a class as it is, None as None."""
    if not isinstance(kind, str):
        return kind
    loaded = _LOADED_KINDS.get(kind)
    if loaded is None:
        module, _, name = kind.partition(":")
        loaded = _LOADED_KINDS[kind] = getattr(importlib.import_module(module), name)
    return loaded


def make_job(compiled, executor_place, scope):
    """The job CompiledProgram `compiled` runs as (CompiledProgram.job_on makes it once)."""
    if compiled.distribution is None:
        return (program_kind(compiled.program) or OnePlaceJob)(compiled, executor_place)
    kind = kind_of(compiled.distribution)
    if kind is None:
        raise InvalidArgumentError(
            f"no job kind for a CompiledProgram of kind '{compiled.distribution}'; "
            f"registered: {sorted(JOB_KINDS)}")
    return kind(compiled, executor_place, scope)


def program_kind(program):
    """The job class an op of `program`'s global block asks for (its OpDef.job_kind:
    parameter-server mode), or None: a plain program then runs as a OnePlaceJob. An op type
    with no definition asks for nothing here (its plan names it)."""
    for op in program.global_block().ops:
        try:
            kind = OP_DEFS[op.type].job_kind
        except KeyError:
            continue
        if kind is not None:
            return _load(kind)
    return None


def end_loaded_kinds(executor) -> None:
    """Executor.close(): every job kind loaded in this process that keeps state for the whole
    process (parameter-server mode's trainer session: fluid's Executor.close tells every
    pserver this process talked to that it is done, whichever executor ran the steps) ends it
    (`end_process(executor)`). Kinds never imported are not loaded for it."""
    for kind in list(_LOADED_KINDS.values()):
        end = getattr(kind, "end_process", None)
        if end is not None:
            end(executor)


def _declare_persistables(program, scope) -> None:
    """Make the program's persistable variables in `scope` (with no value where they have
    none): fluid's executor makes them before it runs an op, so after a failed run they exist,
    and programs (Paddle's tests) look them up."""
    for name, var in program.global_block().vars.items():
        if var.persistable and scope.find_var(name) is None:
            scope.var(name)


def handed_out(value, lod, return_numpy: bool):
    """One fetched value as fluid hands it out: a numpy array (a copy: a fetch may be the
    scope's own array or a view of it), or with return_numpy=False a LoDTensor with its LoD;
    a tensor array as a list of those; a sparse gradient as its dense table."""
    if isinstance(value, list):  # a tensor array: its LoD is its elements' LoDs
        lods = lod if isinstance(lod, list) else [None] * len(value)
        items = [handed_out(v, v_lod, return_numpy) for v, v_lod in zip(value, lods)]
        return items if return_numpy else LoDTensorArray(items)
    if value is None:  # a variable no op wrote (a loop that ran zero times): fluid's None
        return None
    value = dense_of(value)
    if return_numpy:
        return as_fetched(host_array(value, copy=True))
    return LoDTensor(value, lod)


class ExecutorPlans:
    """Executor.plan_cache: the plans of the jobs an executor ran, looked up as one cache.
    `find(program, feed names, fetch names)`: a plain run's plan (a one-place job with the
    default memory options); with `where`, a place index: that place's plan of a
    data-parallel job."""

    def __init__(self, jobs: list):
        self._jobs = jobs

    def find(self, program, feed_names, fetch_names, where=None):
        for job in self._jobs:
            if where is None and not (isinstance(job, OnePlaceJob) and job.memory is None):
                continue
            plan = job.plans.find(program, feed_names, fetch_names, where or 0)
            if plan is not None:
                return plan
        return None

    def __len__(self) -> int:
        return sum(len(job.plans) for job in self._jobs)

    def clear(self) -> None:
        """Drop every plan of those jobs (ParallelExecutor.drop_local_exe_scopes)."""
        for job in self._jobs:
            job.plans.clear()


class _Prepared:
    """What a step of one (program version, feed names, fetch names) needs that does not
    depend on the fed values: worked out on its first step, reused after."""

    __slots__ = ("version", "program", "persistable_feeds", "drops_feeds", "plan_key")

    def __init__(self, version, program, persistable_feeds, drops_feeds, plan_key):
        self.version = version  # of the program given
        self.program = program  # what runs: without an inference model's feed / fetch ops
        self.persistable_feeds = persistable_feeds  # (name, dtype) of fed persistables
        self.drops_feeds = drops_feeds  # a fed name the program lacks (feed.drop_unknown_feeds)
        self.plan_key = plan_key  # of `program`'s plan in the job's PlanCache


class OnePlaceJob:
    """A program on the executor's place: a plain Program, or a CompiledProgram compiled
    without distribution (then the program its one-place passes made, with its memory
    options). One place, the world communicator made on first use, a stream per program."""

    def __init__(self, source, place, scope=None):
        self.source, self.place, self.places = source, place, [place]
        compiled = hasattr(source, "one_place_program")
        self._given = source.program if compiled else source  # whose names a feed must hold
        self._fixed = None if compiled else source  # None: source.one_place_program()
        memory = source.memory_options() if compiled else None
        self.memory = None if memory is None or memory == MemoryOptions() else memory
        self.plans = PlanCache()  # (program, feed names, fetch names, place index 0)
        self.xp = array_module(place)
        device = place.device_id if place.is_gpu else None
        self._comm = functools.partial(world_communicator, device)
        self._rngs: dict = {}  # program uid -> (its seed, its stream)
        self._prepared: dict = {}  # (uid, feed names, fetch names) -> _Prepared
        self._lod_copies: dict = {}  # see _with_fed_lod

    state_sharding = None  # nothing is split over one place
    started = True  # nothing to do before a one-place job's first step

    def start(self, scope, sharded_state=None) -> None:
        """Nothing to do before a one-place job's first step."""

    def close(self) -> None:
        self.plans.clear()
        self._prepared.clear()
        self._lod_copies.clear()

    def rng(self, program):
        """The program's stream (place_rng), made again when its seed changed."""
        seed = program.random_seed
        entry = self._rngs.get(program._uid)
        if entry is None or entry[0] != seed:
            entry = self._rngs[program._uid] = (seed, place_rng(seed))
        return entry[1]

    def _make_plan(self, program, feed_names, fetch_names) -> Plan:
        return Plan(program, feed_names, fetch_names, self.rng(program), comm=self._comm,
                    place=self.place, memory=self.memory)

    def _prepare(self, program, feed: dict, fetch_names) -> _Prepared:
        """What steps of these feed and fetch names on this version of `program` share."""
        given = self._given.global_block()
        drops = not all(given.has_var(n) for n in feed)
        if drops:
            feed = drop_unknown_feeds(given, feed)
        runnable = program
        if feed_fetch_ops.has_feed_fetch_ops(program):  # an inference model's feed/fetch ops
            feed_fetch_ops.check_run(program, list(feed), fetch_names)
            runnable = feed_fetch_ops.runnable(program)
        block = runnable.global_block()
        persistable = tuple((n, block.vars[n].dtype) for n in feed
                            if n in block.vars and block.vars[n].persistable)
        return _Prepared(program._version, runnable, persistable, drops,
                         PlanCache.key(runnable, list(feed), fetch_names, 0))

    def step(self, scope, feed, fetch_names, return_numpy=True, return_merged=True) -> list:
        if isinstance(feed, list) and len(feed) == 1:
            feed = feed[0]  # a one-place list, as fluid takes it (what loaders yield)
        if not isinstance(feed, dict):
            raise InvalidArgumentError(
                f"feed must be a dict name -> array, got {type(feed).__name__}")
        program = self._fixed or self.source.one_place_program()
        key = (program._uid, tuple(feed), tuple(fetch_names))
        prepared = self._prepared.get(key)
        if prepared is None or prepared.version != program._version:
            prepared = self._prepared[key] = self._prepare(program, feed, fetch_names)
        if prepared.drops_feeds:  # warned of every run, as fluid's
            feed = drop_unknown_feeds(self._given.global_block(), feed)
        run, plan_key = prepared.program, prepared.plan_key
        for value in feed.values():
            if type(value) is not np.ndarray and isinstance(value, LoDTensor):
                run, plan_key = self._with_fed_lod(run, feed), None
                break
        plan = self.plans.get(run, feed, fetch_names, 0,
                              lambda: self._make_plan(run, list(feed), fetch_names), plan_key)
        # fluid's feed op writes a fed variable into the scope before the ops run: a
        # persistable one stays there after the run (Paddle's gradient_checker feeds its
        # inputs once, then reads them back), unless an op of the run updates it in place
        for name, dtype in prepared.persistable_feeds:
            scope._assign(name, np.array(feed[name], dtype=dtype))
        try:
            outcome = plan.run(scope, feed, self.xp, self.place)
        except Exception:
            _declare_persistables(run, scope)
            raise
        values, lods = outcome.values, outcome.lods
        if lods is None:
            return [handed_out(v, None, return_numpy) for v in values]
        return [handed_out(v, lod, return_numpy) for v, lod in zip(values, lods)]

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
