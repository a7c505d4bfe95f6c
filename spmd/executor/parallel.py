"""Data-parallel execution: the compiled data-parallel program run on every place of this
process (one thread per place when there are several), each place with its own scope and
communicator; processes meet in the collectives the passes inserted. ExecutionStrategy.
num_threads is, as in fluid, how many threads run the ops of all the places of this process:
each place gets num_threads // places of them (at least its own), and with more than one it
runs its independent ops at once (ssa.py).

A process with several places reduces across them in shared memory first, then across
processes (comm/local.py's HierarchicalCommunicator). Global rank of local place i is
process_rank * places + i. With BuildStrategy.use_hierarchical_allreduce the cross-process
allreduce also goes by nodes (comm/hierarchy.py; `allreduce_layout` says how).
"""
from __future__ import annotations

import weakref

import numpy as np

from ..comm.factory import is_world_communicator
from ..comm.topology import detect, launched_by_mpi
from ..core.operator import OpRole
from ..core.places import array_module
from ..core.scope import Scope
from ..errors import CommunicationError, FeedError, InvalidArgumentError, PreconditionError
from ..flags import flags
from ..ops.registry import get_op_def
from ..passes.broadcast_params import broadcast_program
from ..passes.data_parallel import build_data_parallel
from ..passes.state_sharding import StateSharding
from ..passes.strategy import warn_unacted
from .feed import drop_unknown_feeds, merge_fetches, split_feed
from .feed_fetch_ops import check_feed_fetch_ops, has_feed_fetch_ops, runnable
from .fetch import as_fetched, as_lod_tensors, host_copy
from .fingerprint import check_same_program
from .first_broadcast import broadcast_into_scope, check_same_persistables, split_by_kind
from .inplace import MemoryOptions
from .job import place_rng
from .job_comms import place_communicators, shut_down, state_communicator
from .plan import Plan, collectives_started
from .plan_cache import PlanCache


def _trained_loss(program, loss_name):
    """`loss_name` when `program` has its backward pass; None for a test clone compiled with
    the training loss's name (fluid runs it forward only, no gradient needed)."""
    if loss_name is None or loss_name in program.grad_var_map:
        return loss_name
    if any(op.role is OpRole.LOSS for op in program.global_block().ops):
        return loss_name  # a backward pass of another loss: build_data_parallel names it
    return None


def _shared_job(compiled):
    """The job of the CompiledProgram `compiled` shares its variables with, or None."""
    share = compiled._share_vars_from
    if share is None:
        return None
    if share.distribution != "data_parallel":
        raise InvalidArgumentError(
            "share_vars_from names a CompiledProgram that is not data parallel: "
            "call with_data_parallel on it too")
    if share.job is None:
        from .compiled import SharedProgramNotRun

        raise SharedProgramNotRun(
            "share_vars_from names a CompiledProgram that has not run yet: run the "
            "training program once before the program that shares its variables")
    return share.job


class DataParallelJob:
    """The job of a CompiledProgram with_data_parallel (job.py): the data-parallel program
    on every place of this process, a scope, communicator, plan and random stream each."""

    def __init__(self, compiled, executor_place, scope):
        share_from = _shared_job(compiled)
        # an inference model's feed / fetch ops and py_reader's reader ops are not run
        program = runnable(compiled.program)
        build_strategy, loss_name = compiled._build_strategy, compiled._loss_name
        places = compiled.places_for(executor_place)
        self.topology = detect()
        self.exec_strategy = compiled._exec_strategy
        self.in_program_order = bool(build_strategy.enable_sequential_execution)
        self.plans = PlanCache()  # (data-parallel program, feed names, fetch names, place)
        warn_unacted(build_strategy)
        warn_unacted(self.exec_strategy)
        self.places = list(places)
        self.xp = array_module(self.places[0])
        self.tag = self.topology.tag()
        nplaces, nprocs = len(self.places), self.topology.size
        self._check_trainers(build_strategy, nprocs)
        if self.places[0].is_gpu and nplaces > 1:
            raise InvalidArgumentError(
                f"{self.tag} {nplaces} GPU places in one process: spmd runs one process per "
                f"GPU (launch one rank per GPU with mpirun / paddle-launch)")
        self.num_devices = nplaces * nprocs
        self.memory = MemoryOptions(inplace=bool(build_strategy.enable_inplace),
                                    share=bool(build_strategy.memory_optimize))
        self._source = program  # as the user built it (whole optimizer state)
        self._compiled_source = compiled.program  # as given (feed / fetch ops checked)
        self._has_feed_fetch_ops = has_feed_fetch_ops(compiled.program)
        self._prepared: dict = {}  # (feed names, fetch names) -> what _prepare found
        self.program, self.sharding = build_data_parallel(
            program, build_strategy, self.num_devices, _trained_loss(program, loss_name),
            flags().fuse_parameter_memory_size_mb)
        self.ranks = [self.topology.rank * nplaces + i for i in range(nplaces)]
        if share_from is not None:
            if len(share_from.places) != nplaces:
                raise InvalidArgumentError(
                    f"{self.tag} share_vars_from: the program it names runs on "
                    f"{len(share_from.places)} place(s) but this one on {nplaces}; give both "
                    f"with_data_parallel calls the same places")
            self.scopes, self.comms = share_from.scopes, share_from.comms
            self._group = share_from._group
            self.allreduce_layout = share_from.allreduce_layout
        else:
            self.scopes = [scope] + [Scope() for _ in range(nplaces - 1)]
            self._group, self.comms, self.allreduce_layout = place_communicators(
                self.topology, self.places, build_strategy)
        self._share_from = share_from
        seed = program.random_seed
        self._rngs = [place_rng(seed, r) for r in self.ranks]
        # one generator per place for updates' random draws (Dpsgd's noise), seeded alike on
        # every rank and place on the first run, so that every rank updates alike
        self._update_rngs: list = []
        self.started = False
        self._broken: str | None = None  # why this rank can no longer take part in steps
        self._pool = None
        if nplaces > 1:  # (imported only where several places share a process)
            import concurrent.futures

            self._pool = concurrent.futures.ThreadPoolExecutor(nplaces, "spmd-place")
        owned = {n for op in self.program.global_block().ops if op.owner is not None
                 for n in op.output_arg_names}
        unowned = {n for op in self.program.global_block().ops if op.owner is None
                   for n in op.output_arg_names}
        self._owner_only = owned - unowned  # values only one rank computes (Reduce mode)
        # fluid 1.8 runs a program without a backward pass (a test clone) on the first k
        # places when a step feeds only k (a DataLoader's short last batch); a program with
        # collectives could not, as the places left out would never join them
        ops = self.program.global_block().ops
        self._every_place_because = (
            "a training program runs on every place" if any(
                op.role in (OpRole.BACKWARD, OpRole.LOSS) for op in ops) else
            "this program has collectives, which every place must join" if any(
                get_op_def(op.type).collective for op in ops) else None)
        # the place threads and communication threads end with the runner; never the
        # process's shared world communicator, which other programs' steps may be using (a
        # garbage collection at a different moment on each rank would cross their collectives)
        closing = [] if share_from is not None else [
            comm for comm in self.comms if not is_world_communicator(comm)]
        weakref.finalize(self, shut_down, self._pool, closing)

    @property
    def state_sharding(self) -> StateSharding | None:
        """Reduce mode, once the state is split: where each piece of optimizer state lives
        (the training program's, for a program sharing its variables)."""
        if self._share_from is not None:
            return self._share_from.state_sharding
        return self.sharding if self.started else None

    def _check_trainers(self, strategy, nprocs):
        if strategy.num_trainers not in (1, nprocs):
            raise InvalidArgumentError(
                f"{self.tag} num_trainers={strategy.num_trainers} but {nprocs} process(es) run "
                f"this job; start one process per trainer (mpirun -n {strategy.num_trainers})")
        if strategy.num_trainers > 1 and strategy.trainer_id != self.topology.rank:
            raise InvalidArgumentError(
                f"{self.tag} trainer_id={strategy.trainer_id} but this process is MPI rank "
                f"{self.topology.rank}; pass trainer_id=<MPI rank>")

    # -- first run -----------------------------------------------------------------------------
    def start(self, scope, sharded_state=None):
        """Check every process compiled the same program, then give every place rank 0's
        parameters; in Reduce mode drop optimizer state this rank does not own.
        `sharded_state(scope)`: the StateSharding whose split state a scope already holds
        (the executor's jobs', Executor.state_sharding)."""
        self._check_scope(scope)
        if self._share_from is not None:
            if not self._share_from.started:
                raise PreconditionError(
                    f"{self.tag} share_vars_from: the CompiledProgram it names has not run yet; "
                    f"run the training program once before the one sharing its variables")
            self._update_rngs = self._share_from._update_rngs
            self.started = True
            return
        # rank 0's program seed (or a random one) for the update generators, on every rank:
        # ranks may seed their programs differently (dropout), and the updates must not differ
        seed = np.array([self.program.random_seed
                         or np.random.SeedSequence().entropy % 2 ** 62 + 1], np.int64)
        if self.topology.size > 1:
            from ..comm.mpi import MPICommunicator

            mpi = MPICommunicator()
            check_same_program(self.program, mpi)
            mpi.broadcast(seed, 0)  # every rank, whatever its own seed
        self._update_rngs = [np.random.default_rng([int(seed[0]), _UPDATES])
                             for _ in self.places]
        first = self.scopes[0]
        for other in self.scopes[1:]:
            for name in first.local_var_names():
                other.put(name, first.get(name).copy())
        if self.num_devices > 1:
            state = {n for names in self._source.optimizer_state.values() for n in names}
            earlier = sharded_state(first) if sharded_state is not None else None
            split = sorted(state & earlier.owners().keys()) if earlier is not None else []
            if split:
                raise PreconditionError(
                    f"{self.tag} optimizer state {split[:3]} in this scope was already split "
                    f"across the ranks by a Reduce-mode CompiledProgram; run the startup program "
                    f"into a fresh scope for another data-parallel program")
            bcast = broadcast_program(self.program, state,
                                      has_value=lambda n: first.get(n) is not None)
            # host arrays in place, chunked (first_broadcast.py): no second copy of a table
            direct, rest = split_by_kind(bcast, first.get)
            if self.topology.size > 1:
                check_same_persistables(bcast, first.get, mpi)
            self._run_on_places(lambda i: broadcast_into_scope(self.scopes[i], direct,
                                                               self.comms[i], first))
            if rest is not None:
                self._run_on_places(lambda i: Plan(rest, [], [], None, self.comms[i],
                                                   tag=self.tag, place=self.places[i])
                                    .run(self.scopes[i], {}, self._xp(), self.places[i]))
        if self.sharding is not None:
            self.sharding.bind(self.program, self.scopes, self.ranks,
                               state_communicator(self.topology),
                               self.tag if self.topology.size > 1 else "")
            for scope, rank in zip(self.scopes, self.ranks):
                self.sharding.place_state(scope, rank)
        self.started = True

    def _xp(self):
        return self.xp

    # -- every run -----------------------------------------------------------------------------
    def close(self) -> None:
        """Executor.close(): drop the compiled plans (made again on a later run)."""
        self.plans.clear()

    def _prepare(self, feed, fetch_names) -> tuple:
        """What every step of these feed and fetch names shares: whether a fed name is not
        the program's, the fed persistables (name, dtype), the names fed whole to every
        place (persistables); a fetch only the owning rank computes is refused here."""
        owner_only = sorted(self._owner_only.intersection(fetch_names))
        if owner_only:
            raise InvalidArgumentError(
                f"{self.tag} cannot fetch {owner_only}: in Reduce mode only the owning rank "
                f"computes them; fetch the parameters (broadcast to every rank) or the loss")
        given, block = self._compiled_source.global_block(), self.program.global_block()
        names = _names(feed)
        persistable = tuple(dict.fromkeys(
            (n, given.vars[n].dtype) for n in names
            if n in given.vars and given.vars[n].persistable))
        replicated = {n for n in names if block.has_var(n) and block.vars[n].persistable}
        return not all(given.has_var(n) for n in names), persistable, replicated

    def _check_scope(self, scope) -> None:
        if self._broken is not None:
            raise PreconditionError(
                f"{self.tag} this data-parallel program cannot run any more: {self._broken}. "
                f"Its collectives no longer line up with the other ranks'; restart the job")
        if scope is not self.scopes[0]:
            raise InvalidArgumentError(
                f"{self.tag} a data-parallel CompiledProgram runs on the scope of its first run; "
                f"this run passed another scope. Compile one CompiledProgram per scope")

    def step(self, scope, feed, fetch_names, return_numpy: bool = True,
             return_merged: bool = True) -> list:
        """One step on every place, from this job's plans."""
        self._check_scope(scope)
        given = self._compiled_source.global_block()
        key = (tuple(feed) if type(feed) is dict else tuple(_names(feed)), tuple(fetch_names))
        known = self._prepared.get(key)
        if known is None:
            known = self._prepared[key] = self._prepare(feed, fetch_names)
        drops, persistable, replicated = known
        if drops:  # warned of every run, as fluid's
            feed = drop_unknown_feeds(given, feed)
        if self._has_feed_fetch_ops:
            check_feed_fetch_ops(self._compiled_source, feed, fetch_names)
        # as in one process: a fed persistable (a scheduler's rate) is in the scope
        for name, dtype in persistable:
            first = feed[0] if isinstance(feed, list) else feed
            if name in first:
                scope._assign(name, np.array(first[name], dtype=dtype))
        if not self.started:
            self.start(scope)
        shards = split_feed(feed, len(self.places), tag=f"{self.tag} ", replicated=replicated,
                            every_place_because=self._every_place_because)
        feed_names = list(shards[0])
        plans = [self.plans.get(self.program, feed_names, fetch_names, i,
                                lambda i=i: Plan(self.program, feed_names, fetch_names,
                                                 self._rngs[i], comm=self.comms[i],
                                                 rank=self.ranks[i], tag=self.tag,
                                                 update_rng=self._update_rngs[i],
                                                 place=self.places[i], memory=self.memory,
                                                 threads=self._threads_per_place()))
                 for i in range(len(self.places))]
        if self.exec_strategy._dry_run:  # fluid: the schedule without kernels, fetches None
            return [None] * len(fetch_names)
        xp = self._xp()
        # Every place's feed is checked before any place runs: a bad feed then fails before any
        # collective started, on this rank, and the program stays usable (the other ranks wait
        # in this step's first collective, which a corrected run of this step joins).
        try:
            shards = [plans[i].checked_feed(shard, xp) for i, shard in enumerate(shards)]
        except FeedError as e:
            if not self.tag or (self.topology.size == 1 and not launched_by_mpi()):
                raise  # one process of its own: fluid's words as they are
            tagged = FeedError(f"{self.tag} {e}")
            for note in getattr(e, "__notes__", ()):  # the fix, said beside fluid's words
                tagged.add_note(note)
            raise tagged from None
        started = [False] * len(plans)

        def run_place(i):
            try:
                outcome = plans[i].run(self.scopes[i], shards[i], xp, self.places[i],
                                       checked=True)
            except BaseException as e:
                started[i] = collectives_started(e)
                raise
            started[i] = outcome.started_collectives
            return outcome.values

        try:  # on the first len(shards) places: fewer only for a program that may (see init)
            results = self._run_on_places(run_place, len(shards))
        except Exception as e:
            if self.topology.size > 1 and _collectives_began(started):
                self._broken = (f"a step failed here ({type(e).__name__}) after its "
                                f"collectives began")
            raise
        # copies: a fetched gradient may be a view of a bucket the next step reuses
        per_place = [[host_copy(a) for a in r] for r in results]
        if not return_numpy:  # as fluid 1.8: a LoDTensor per fetch, merged over the places,
            # or (return_merged=False) a list per fetch of one LoDTensor per place that ran
            if return_merged:
                return [as_lod_tensors(v) for v in merge_fetches(per_place, True)]
            return [[as_lod_tensors(a) for a in values]
                    for values in merge_fetches(per_place, False)]
        return [as_fetched(v) for v in merge_fetches(per_place, return_merged)]

    def _threads_per_place(self) -> int:
        """ExecutionStrategy.num_threads shared by this process's places (fluid's one pool
        for all of them): each its own thread at least. BuildStrategy's
        enable_sequential_execution asks for program order, as fluid's sequential_execution_pass
        gives it: one thread a place, whatever num_threads says."""
        if self.in_program_order:
            return 1
        return max(1, int(self.exec_strategy.num_threads) // len(self.places))

    def _run_on_places(self, fn, count: int | None = None):
        """fn(place index) on every place (the first `count` places); several places run on
        threads, and one place's failure wakes the others instead of leaving them waiting in
        a collective."""
        count = len(self.places) if count is None else count
        if count == 1:
            return [fn(0)]
        results, errors = [None] * count, [None] * count

        def work(i):
            try:
                results[i] = fn(i)
            except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
                errors[i] = e
                self._group.abort()

        pool = self._pool or self._share_from._pool
        for future in [pool.submit(work, i) for i in range(count)]:
            future.result()
        # the root cause, not the places that were woken by the abort
        failed = [e for e in errors if e is not None]
        first = next((e for e in failed if not isinstance(e, CommunicationError)),
                     failed[0] if failed else None)
        if first is not None:
            self._group.reset()
            raise first
        return results


_UPDATES = 0x0D75  # a generator for updates' random draws, apart from the per-rank ones


def _collectives_began(started: list) -> bool:
    """After a failed step: whether a collective of it may have started across processes.
    A place that failed before its first collective keeps every cross-process collective of
    the step from starting (place 0 runs one only when every place of the process has joined
    it), so the ranks stay in line: the others wait in the step's first collective, which a
    retried step here joins. Otherwise this rank fell out of line with the others."""
    return all(started)


def _names(feed) -> list:
    """The fed names of a dict feed or of a list of per-place dicts."""
    if isinstance(feed, dict):
        return list(feed)
    return [n for f in feed if isinstance(f, dict) for n in f]
