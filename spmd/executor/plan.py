"""The compiled plan: a program's ops bound once to kernels and name slots, run as a flat loop.

This is also the reference semantics: ops run in program order, one kernel call each, and a
value is dropped right after its last reader. A run writes persistable variables back to the
scope only after every op succeeded, so a failed run leaves the scope as it was, but for the
updates an op already made in place (inplace.py: only where nothing but the run held the old
value; never under FLAGS_check_nan_inf). With ExecutionStrategy.num_threads > 1 the same
steps run on the SSA executor's threads (ssa.py), to the same values.

Compiling is a short sequence: the dataflow of the ops (liveness.py: what a run reads, writes
back and frees after each step), each op's kernel bound into a step (steps.py), gradient
buckets, threads. A failed run's errors are made in run_errors.py, a profiled run is
profiled_run.py; the unprofiled loop (`_execute`) stays here, inlined on purpose.
"""
from __future__ import annotations

import copy
import weakref

from ..comm.base import SelfCommunicator
from ..core.lod import lod_key
from ..errors import CommunicationError, FeedError, NumericError, PreconditionError
from ..events import profiling as _profiling
from ..flags import flags
from ..ops.registry import get_op_def
from ..record import Record
from .buckets import attach_buckets
from .feed import check_feed_names, convert_feed, unset_value
from .inplace import DyingInputs, MemoryOptions, MemoryReport
from .liveness import liveness, ops_for_rank
from .lod_binding import NO_LOD, tracked_names
from .numeric_check import check_feeds
from .stand_in import ShapeOnly
from .steps import Binding, bind_steps

shape_only = ShapeOnly.of  # (a module global: the flat loop looks it up once per stand-in)


def _rank_tag() -> str:
    from ..comm.topology import detect  # cached after the first call of the process

    topology = detect()
    return f"{topology.tag()} " if topology.size > 1 else ""


class Plan:
    """Compiled for one (program version, feed names, fetch names), on one rank.

    Data parallelism in Reduce mode marks some ops with an owner rank: a plan for `rank` skips
    ops owned by others. A value only another rank's ops write reads as zeros here: the one
    place that happens is a sum of per-parameter partial results (global-norm clipping), whose
    owned terms this rank then adds up and allreduces.
    """

    def __init__(self, program, feed_names, fetch_names, rng, comm=None, rank=None, tag="",
                 update_rng=None, place=None, block_index: int = 0,
                 memory: MemoryOptions | None = None, threads: int = 1):
        """`comm`: the communicator the collectives use, or a function making it on first use
        (a program without collectives never touches MPI). `block_index`: the block it runs;
        a sub-block's plan is run with `run_in` on values its caller gives (`sub_plan`).
        `memory`: what it may do to save memory (default: MemoryOptions()). `threads` > 1:
        independent ops run at once on that many threads (ssa.py; ExecutionStrategy.
        num_threads), host places only; a sub-block runs its ops one at a time."""
        block = program.block(block_index)
        self.memory = memory if memory is not None else MemoryOptions()
        self._made_with = (program, rng, comm, rank, tag, update_rng, place, self.memory)
        self._sub_plans: dict[int, Plan] = {}
        self.tag = f"{tag} " if tag else ""  # "[rank r/n] " in multi-process runs
        self._run_event = "Executor::Run" if rank is None else "ParallelExecutor::Run"
        self.block = block
        self._comm = None if callable(comm) else comm
        self._comm_source = comm if callable(comm) else None
        self.fetch_names = list(fetch_names)
        for n in self.fetch_names:
            block._var_recursive(n)  # raises NotFoundError naming the variable
        ops = ops_for_rank(block, rank)
        live = liveness(block, ops, feed_names, self.fetch_names, block_index)
        self._bind_dataflow(live)
        self._bind_lod(block, ops)
        self.check_nan_inf = flags().check_nan_inf
        self._memory_report = MemoryReport()
        # a sub-block's values are its caller's; a failed NaN check leaves the scope as it was
        inplace = self.memory.inplace and not block_index and not self.check_nan_inf
        dying = DyingInputs(self._memory_report) if inplace else None  # activations
        binding = self._binding(rng, update_rng, place, inplace, dying)
        self.steps, self._scope_updates = bind_steps(ops, live.frees_at, self.scope_reads, binding,
                                                     live.shrinks_at)
        self._memory_report.stand_ins = sum(len(s.shrinks) for s in self.steps)
        self._bind_collectives(block)
        concurrent = threads > 1 and not block_index and not getattr(place, "is_gpu", False)
        self._bind_threads(threads if concurrent else 1, dying)

    def _bind_dataflow(self, live) -> None:
        """What each run reads (feeds, scope values, stand-in zeros) and writes back."""
        self.zero_reads = live.zero_reads  # (name, shape, dtype) of each stand-in
        self._zeros = None  # (xp, name -> array), made on the first run
        self._needed_feeds = live.needed_feeds
        self._feeds_as_they_are = None  # (xp, name -> (type, dtype, shape)): see _note_feed
        self.scope_reads = live.scope_reads
        self.fetch_from_scope = live.fetch_from_scope
        self._from_scope = self.scope_reads + self.fetch_from_scope  # read every run
        self.persist_writes = live.persist_writes

    def _bind_lod(self, block, ops) -> None:
        """LoD variables (lod_level > 0): their LoD travels under lod_key(name) beside them."""
        self.lod_tracked = tracked = tracked_names(block)
        self.lod_aware = bool(tracked) or any(get_op_def(op.type).lod_inputs for _, op in ops)
        self._lod_reads = [n for n in self._from_scope if n in tracked]
        # a persistable written with a LoD: tracked, or an op's LoD output of its own (the
        # elements' LoDs of a tensor array lod_tensor_to_array writes)
        lod_written = {n for _, op in ops for slot in get_op_def(op.type).lod_outputs
                       for n in op.outputs.get(slot, ())}
        self._lod_writes = [n for n in self.persist_writes if n in tracked or n in lod_written]

    def _binding(self, rng, update_rng, place, inplace: bool, dying) -> Binding:
        """What every op's kernel is bound with (steps.py)."""
        return Binding(
            rng=rng, update_rng=update_rng, comm=self._plan_comm, place=place,
            rank_tag=self.tag or _rank_tag,  # looked up only by the ops that print it
            run_block=self.run_block,
            numeric_tag=(self.tag or _rank_tag()) if self.check_nan_inf else None,
            lod_aware=self.lod_aware, lod_tracked=self.lod_tracked, inplace=inplace,
            dying=dying, report=self._memory_report)

    def _bind_collectives(self, block) -> None:
        """Gradient buckets, and where the first collective is (retrying after a failure)."""
        self.has_collectives = any(get_op_def(s.where[1].type).collective for s in self.steps)
        if self.has_collectives:
            attach_buckets(self.steps, block)
        # program index of the first collective: a run that fails at an op before it issued
        # no collective, so every rank is still in line and the run may be retried
        self._first_collective = next((s.where[0] for s in self.steps
                                       if get_op_def(s.where[1].type).collective), None)

    def _bind_threads(self, threads: int, dying) -> None:
        """The SSA executor running the steps on `threads` threads (none for one thread)."""
        if threads > 1 and dying is not None:
            dying.keep_thread_safe(self.steps, self._scope_updates)
        self._ssa = None
        if threads > 1:  # (ssa.py imported only then)
            from .ssa import SSAExecutor

            self._ssa = SSAExecutor(self.steps, threads, self._scope_updates)
        if self._ssa is not None:  # its threads end with the plan
            weakref.finalize(self, self._ssa.close)
        self._sequential = None  # schedule_report of a one-thread plan, made on demand

    def sub_plan(self, block_index: int) -> Plan:
        """The plan of sub-block `block_index` of the same program, made once, with this
        plan's generators, communicator, rank and place (a control-flow op runs its body
        with it)."""
        plan = self._sub_plans.get(block_index)
        if plan is None:
            program, rng, comm, rank, tag, update_rng, place, memory = self._made_with
            plan = self._sub_plans[block_index] = Plan(
                program, [], [], rng, self._comm or comm, rank, tag, update_rng, place,
                block_index, memory)
        return plan

    def run_block(self, block_index: int, env: dict, xp) -> dict:
        """Run sub-block `block_index` on `env` (name -> array: everything the block reads
        from outside it); its writes land in `env`, which is returned."""
        return self.sub_plan(block_index).run_in(env, xp)

    def run_in(self, env: dict, xp) -> dict:
        """Run this plan's ops on `env` in place (no feed, no scope, nothing committed): how a
        sub-block runs. A value it reads that `env` lacks fails naming the op."""
        if self.lod_aware:
            env[NO_LOD] = None  # where an untracked variable's LoD is read from
        self._execute(self.steps, env, xp)
        return env

    def memory_report(self) -> MemoryReport:
        """What the memory options did so far (a copy): the ops that may update in place and
        the buffers lent to them.

        >>> # exe.plan_cache.find(main, ["x"], [loss.name]).memory_report().lent_last_run
        """
        return copy.copy(self._memory_report)  # the caller's own, as the report stood

    def shared_buckets(self) -> int:
        """How many of this plan's fused all-reduce buckets are summed in node-shared memory
        (executor/shared_bucket.py): decided at each bucket's first all-reduce, so 0 before
        the first run.

        >>> # exe.plan_cache.find(compiled.data_parallel_program, ["x"], [loss.name], 0)
        >>> # .shared_buckets()
        """
        return sum(1 for s in self.steps if getattr(s.ctx.bucket, "shared", None))

    def schedule_report(self):
        """How this plan runs its ops (an ssa.ScheduleReport): on how many threads, how
        many stay in program order, the depth and width of their dependency graph (what
        several threads could run at once), and the most ops seen running at once (1 for
        one thread).

        >>> # exe.plan_cache.find(main, ["x"], [loss.name]).schedule_report().max_in_flight
        """
        if self._ssa is not None:
            return self._ssa.report()
        if self._sequential is None:
            from .ssa import sequential_report

            self._sequential = sequential_report(self.steps, self._scope_updates)
        return self._sequential

    def close_threads(self) -> None:
        """Stop the threads of the SSA executor (num_threads > 1), if any; a later run starts
        them again. Executor.close() calls it."""
        if self._ssa is not None:
            self._ssa.close()

    @property
    def comm(self):
        """The communicator this plan's collectives use (made on first use)."""
        if self._comm is None:
            self._comm = self._comm_source() if self._comm_source else SelfCommunicator()
        return self._comm

    def _plan_comm(self):
        return self.comm

    def checked_feed(self, feed: dict, xp) -> dict:
        """`feed` checked (names, dtypes, shapes, an empty batch; NaN/Inf under
        FLAGS_check_nan_inf) and converted, or FeedError. Nothing has run yet when it raises,
        so a caller may fix the feed and run again."""
        accepted = self._feeds_as_they_are
        if accepted is not None and xp is accepted[0] and len(feed) == len(accepted[1]):
            same = accepted[1]
            for name, value in feed.items():
                seen = same.get(name)
                if (seen is None or type(value) is not seen[0] or value.dtype != seen[1]
                        or value.shape != seen[2] or not value.flags.c_contiguous):
                    break
            else:  # the names, types, dtypes and shapes of a feed that passed as it was
                return dict(feed)
        block = self.block
        check_feed_names(block, feed, self._needed_feeds)
        converted = {}
        for name, value in feed.items():
            convert_feed(block.vars[name], value, xp, converted, self.lod_tracked)
        if self.check_nan_inf:
            check_feeds(converted, xp, "" if self.tag else _rank_tag())
        else:
            self._note_feed(feed, converted, xp)
        return converted

    def _note_feed(self, feed: dict, converted: dict, xp) -> None:
        """Remember a feed every array of which passed the checks as it was (no conversion,
        no LoD): a later feed of the same names, array types, dtypes and shapes would pass
        them alike, so it skips them (checked_feed's first loop; the checks then cost a
        dictionary's worth of comparisons a step)."""
        same = {}
        for name, value in feed.items():
            if converted.get(name) is not value or name in self.lod_tracked:
                self._feeds_as_they_are = None
                return
            same[name] = (type(value), value.dtype, value.shape)
        self._feeds_as_they_are = (xp, same) if len(converted) == len(feed) else None

    def _inputs(self, scope, feed: dict, xp, checked: bool) -> dict:
        """The values the ops read first: checked feeds, stand-in zeros, scope values."""
        report = self._memory_report
        report.lent_last_run = report.reused_last_run = report.spent_last_run = 0
        env = dict(feed) if checked else self.checked_feed(feed, xp)
        if self.zero_reads:
            env.update(self._stand_in_zeros(xp))
        for n in self._from_scope:
            value = scope.get(n)
            if value is None:  # a tensor array starts empty (feed.unset_value)
                value = unset_value(self.block._var_recursive(n))
                if value is None:
                    from .run_errors import uninitialized

                    raise uninitialized(self.block._var_recursive(n))
            env[n] = value
        if self.lod_aware:
            env[NO_LOD] = None
            for n in self._lod_reads:
                env[lod_key(n)] = scope.lod(n)
        return env

    def _stand_in_zeros(self, xp) -> dict:
        """The zeros standing in for values only other ranks compute, made once per array
        module: kernels never modify their inputs, so one array serves every step (Reduce
        mode reads a chunk per parameter this way, megabytes a step otherwise)."""
        zeros = self._zeros
        if zeros is None or zeros[0] is not xp:
            zeros = self._zeros = (xp, {name: xp.zeros(shape, dtype=dtype)
                                        for name, shape, dtype in self.zero_reads})
        return zeros[1]

    def run(self, scope, feed: dict, xp, place, checked: bool = False) -> Outcome:
        """Run once and return its Outcome; `checked`: `feed` is `checked_feed`'s result. A
        failed run raises, the exception saying whether a collective of it may have started
        (`collectives_started(error)`)."""
        # the profiler's recorder while fluid.profiler profiles (events.py, kept by
        # spmd/profiler.py); profiling off, this one attribute read is its whole cost
        rec = _profiling.recorder
        if rec is not None:
            from .profiled_run import run_profiled  # (with the profiler: only when profiling)

            return run_profiled(self, rec, scope, feed, xp, checked)
        env = self._tagged_inputs(scope, feed, xp, checked)
        if self._ssa is not None and xp.__name__ == "numpy":
            self._execute_ssa(self.steps, env, xp)
        else:
            self._execute(self.steps, env, xp)
        return self._commit(scope, env)

    def _tagged_inputs(self, scope, feed: dict, xp, checked: bool) -> dict:
        try:
            return self._inputs(scope, feed, xp, checked)
        except (FeedError, PreconditionError) as e:
            if not self.tag:
                raise
            raise type(e)(f"{self.tag}{e}") from None

    def _execute(self, steps, env: dict, xp, wait_all=None) -> None:
        """The flat loop: each step's kernel on its inputs from `env`, outputs into `env`,
        dead values dropped; then the queued collectives waited for (by `wait_all`, default
        the communicator's)."""
        step = None
        try:
            for step in steps:
                ins = {}
                for slot, names, dup in step.ins:
                    ins[slot] = [env[n] for n in names] if dup else env[names[0]]
                res = step.fn(xp, ins, step.attrs, step.want)
                for slot, names, dup in step.outs:
                    if dup:
                        env.update(zip(names, res[slot]))
                    else:
                        env[names[0]] = res[slot]
                res = None  # no reference to a value beyond its last reader (nor to lend)
                for n in step.frees:
                    del env[n]
                if step.shrinks:  # only their shapes are read from here on (most: empty)
                    for n in step.shrinks:
                        env[n] = shape_only(env[n], n)
            if self.has_collectives:  # outputs of collectives are complete before the commit
                (wait_all or self.comm.wait_all)()
        except Exception as e:  # noqa: BLE001 - re-raised with the op named
            error = self._failure(e, step, env)
            if error is e:
                raise
            raise error from e

    def _execute_ssa(self, steps, env: dict, xp, wait_all=None) -> None:
        """`_execute` on the SSA executor's threads (ssa.py): the same values and failures;
        a failure says whether a collective was actually issued (`collectives_started`)."""
        failed = self._ssa.execute(steps, env, xp)
        step = steps[-1] if steps else None
        try:
            if failed is not None:
                step = steps[failed[1]]
                raise failed[0]
            if self.has_collectives:
                (wait_all or self.comm.wait_all)()
        except Exception as e:  # noqa: BLE001 - re-raised with the op named
            error = self._failure(e, step, env)
            if failed is not None:
                error.collectives_started = failed[2]
            if error is e:
                raise
            raise error from e

    def _commit(self, scope, env: dict) -> Outcome:
        """After every op succeeded: persistables written back, the fetches returned."""
        for n in self.persist_writes:
            scope._assign(n, env[n])
        for n in self._lod_writes:
            scope.set_lod(n, env[lod_key(n)])
        # the LoD of each fetch: what return_numpy=False hands out with it
        lods = [env.get(lod_key(n)) for n in self.fetch_names] if self.lod_aware else None
        return Outcome([env[n] for n in self.fetch_names], lods, self.has_collectives)

    def _failure(self, e, step, env):
        """The exception to raise for `e` raised by `step`: the op named, with its inputs,
        and whether a collective of the run may have started (`collectives_started`)."""
        first = self._first_collective
        started = first is not None and step is not None and step.where[0] >= first
        if self.has_collectives:
            _drain(self.comm)
        if isinstance(e, (CommunicationError, NumericError)):
            error = e  # already names the rank and the collective, or the op
        else:
            from .run_errors import op_failed

            error = op_failed(self.tag, e, step.where, env)
        error.collectives_started = started
        return error


class Outcome(Record):
    """What one run of a plan gave: the fetched values, the LoD of each (None when the plan
    tracks no LoD), and whether its collectives ran (so they started on the other ranks)."""

    __slots__ = ("values", "lods", "started_collectives")
    _fields = __slots__

    def __init__(self, values: list, lods: list | None, started_collectives: bool):
        self.values, self.lods, self.started_collectives = values, lods, started_collectives


def collectives_started(error: BaseException) -> bool:
    """Whether the failed run that raised `error` may have started a collective across
    processes; False means it issued none, so every rank is still in line and the caller may
    retry the step (an error raised before any op ran says nothing: False)."""
    return bool(getattr(error, "collectives_started", False))


def _drain(comm):
    """After a failure, let collectives already issued finish, so nothing runs behind the
    error; their own failures are secondary to the one being raised."""
    try:
        comm.wait_all()
    except Exception:  # noqa: BLE001
        pass

