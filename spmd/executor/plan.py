"""The compiled plan: a program's ops bound once to kernels and name slots, run as a flat loop.

This is also the reference semantics: ops run in program order, one kernel call each, and a
value is dropped right after its last reader. A run writes persistable variables back to the
scope only after every op succeeded, so a failed run leaves the scope as it was, but for the
updates an op already made in place (inplace.py: only where nothing but the run held the old
value; never under FLAGS_check_nan_inf). With ExecutionStrategy.num_threads > 1 the same
steps run on the SSA executor's threads (ssa.py), to the same values.
"""
from __future__ import annotations

import dataclasses
import types
import weakref

from .. import profiler as _profiler
from ..comm.base import SelfCommunicator
from ..core.lod import lod_key
from ..core.operator import OpRole
from ..core.variable import Parameter, Variable
from ..errors import (
    CommunicationError,
    ExecutionError,
    FeedError,
    NumericError,
    PreconditionError,
)
from ..flags import flags
from ..kernels.context import KernelContext
from ..kernels.registry import get_kernel, inplace_slots, reuse_pairs, takes_context
from ..ops.registry import get_op_def
from .buckets import attach_buckets
from .feed import check_feed_names, convert_feed
from .inplace import DyingInputs, MemoryOptions, MemoryReport, lend_pairs, lending
from .lod_binding import NO_LOD, bind_lod, tracked_names, with_lod_frees
from .numeric_check import check_feeds, checking
from .ssa import ScheduleReport, SSAExecutor, sequential_report

# ops that update parameters: in data parallel every rank must draw the same random numbers
# there (the per-rank generators serve the forward pass: dropout differs per shard)
_UPDATE_ROLES = frozenset({OpRole.OPTIMIZE, OpRole.LR_SCHED, OpRole.AVERAGE})

def _rank_tag() -> str:
    from ..comm.topology import detect  # cached after the first call of the process

    topology = detect()
    return f"{topology.tag()} " if topology.size > 1 else ""


class Step:
    __slots__ = ("fn", "ins", "outs", "attrs", "want", "frees", "where", "ctx")

    def __init__(self, fn, ins, outs, attrs, want, frees, where, ctx):
        self.fn, self.ins, self.outs, self.attrs = fn, ins, outs, attrs
        self.want, self.frees, self.where, self.ctx = want, frees, where, ctx


def _with_context(fn, ctx):
    """A kernel that takes a KernelContext, bound to `ctx`: the step loop calls every kernel
    alike."""
    def run(xp, ins, attrs, want):
        return fn(xp, ins, attrs, want, ctx)
    return run


def _bindings(slots: dict, opdef_slots: dict):
    return tuple((s, tuple(names), opdef_slots[s].duplicable) for s, names in slots.items())


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
        var = block._var_recursive  # a sub-block reads its ancestors' variables
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
            var(n)  # raises NotFoundError naming the variable
        ops = [(i, op) for i, op in enumerate(block.ops)
               if rank is None or op.owner is None or op.owner == rank]
        foreign = {n for op in block.ops if rank is not None and op.owner not in (None, rank)
                   for n in op.output_arg_names}
        written: set[str] = set()
        reads_before_write: list[str] = []
        zero_reads: list[str] = []
        last_use: dict[str, int] = {}
        for k, (_, op) in enumerate(ops):
            for n in op.input_arg_names:
                if n not in written and n not in reads_before_write and n not in zero_reads:
                    if n in foreign and not var(n).persistable:
                        zero_reads.append(n)
                    else:
                        reads_before_write.append(n)
                last_use[n] = k
            for n in op.output_arg_names:
                written.add(n)
                last_use[n] = max(last_use.get(n, k), k)
        self.zero_reads = [_zeros_spec(var(n)) for n in zero_reads]
        self._zeros = None  # (xp, name -> array), made on the first run
        feed_set = set(feed_names)
        self._needed_feeds = [n for n in reads_before_write if var(n).is_data
                              and not var(n).persistable]
        self.scope_reads = [n for n in reads_before_write if n not in feed_set]
        self.fetch_from_scope = [n for n in self.fetch_names
                                 if n not in written and n not in feed_set]
        self._from_scope = self.scope_reads + self.fetch_from_scope  # read every run
        keep = set(self.fetch_names) | {n for n, v in block.vars.items() if v.persistable}
        if block_index:  # a sub-block frees only its own temporaries, never its caller's values
            keep |= {n for n in last_use if n not in block.vars}
        frees_at: dict[int, list[str]] = {}
        for n, k in last_use.items():
            if n not in keep:
                frees_at.setdefault(k, []).append(n)
        self.persist_writes = sorted(n for n in written if var(n).persistable)
        # LoD variables (lod_level > 0): their LoD travels under lod_key(name) beside them
        self.lod_tracked = tracked = tracked_names(block)
        lod_aware = bool(tracked) or any(get_op_def(op.type).lod_inputs for _, op in ops)
        self._lod_reads = [n for n in self._from_scope if n in tracked]
        self._lod_writes = [n for n in self.persist_writes if n in tracked]
        self.steps = []
        self.has_collectives = False
        self.check_nan_inf = flags().check_nan_inf
        self._memory_report = MemoryReport()
        # a sub-block's values are its caller's; a failed NaN check leaves the scope as it was
        inplace = self.memory.inplace and not block_index and not self.check_nan_inf
        dying = DyingInputs(self._memory_report) if inplace else None  # activations
        unwritten = set(self.scope_reads)  # read from the scope, not yet written by an op
        scope_updates: list[int] = []
        rank_tag = self.tag or _rank_tag  # looked up only by the ops that print it
        numeric_tag = (self.tag or _rank_tag()) if self.check_nan_inf else ""
        for k, (i, op) in enumerate(ops):
            opdef = get_op_def(op.type)
            attrs = types.MappingProxyType(dict(op.attrs))  # nothing is written at run time
            # an update's draws (Dpsgd's noise) are the same on every rank
            ctx = KernelContext(update_rng if update_rng is not None
                                and op.role in _UPDATE_ROLES else rng,
                                self._plan_comm, place, rank_tag, self.run_block, op)
            self.has_collectives = self.has_collectives or opdef.collective
            fn = get_kernel(op.type)
            if dying is not None:  # innermost: the kernel itself takes `lent`
                fn = dying.bind(fn, op, opdef, k, frees_at.get(k, ()), reuse_pairs(op.type))
            if takes_context(op.type):
                fn = _with_context(fn, ctx)
            # a collective queued on the communication thread fills its outputs later: they
            # are checked as the outputs of the c_sync_comm_stream that waits for them
            queued = opdef.collective and not attrs.get("use_calc_stream", True)
            if self.check_nan_inf and not queued:
                fn = checking(fn, (i, op), numeric_tag)
            ins = _bindings(op.inputs, opdef.input_slots)
            outs = _bindings(op.outputs, opdef.output_slots)
            frees = tuple(frees_at.get(k, ()))
            if lod_aware:
                fn, ins, outs = bind_lod(fn, op, opdef, ins, outs, tracked)
                frees = with_lod_frees(frees, tracked)
            slots = inplace_slots(op.type) if inplace else ()
            pairs = lend_pairs(op, opdef, unwritten, slots) if slots else ()
            unwritten.difference_update(op.output_arg_names)
            if pairs:  # outermost: it counts the references the run's own `ins` holds
                fn = lending(fn, ctx, pairs, self._memory_report)
                if any(others > 1 for *_, others in pairs):  # may write over a scope value
                    scope_updates.append(k)
                self._memory_report.inplace_ops += 1
            self.steps.append(Step(fn, ins, outs, attrs, frozenset(op.outputs), frees,
                                   (i, op), ctx))
        self.lod_aware = lod_aware
        self.fetched_lods: list | None = None  # the latest run's LoD per fetch (lod_aware)
        if self.has_collectives:
            attach_buckets(self.steps, block)
        # program index of the first collective: a run that fails at an op before it issued
        # no collective, so every rank is still in line and the run may be retried
        self._first_collective = next((s.where[0] for s in self.steps
                                       if get_op_def(s.where[1].type).collective), None)
        # whether the latest run reached a collective (so it may have started on other ranks);
        # after a failure, False means this run issued none: the caller may retry the step
        self.started_collectives = False
        concurrent = threads > 1 and not block_index and not getattr(place, "is_gpu", False)
        self._scope_updates = tuple(scope_updates)
        if concurrent and dying is not None:
            dying.keep_thread_safe(self.steps, self._scope_updates)
        self._ssa = SSAExecutor(self.steps, threads, self._scope_updates) if concurrent else None
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
        return dataclasses.replace(self._memory_report)

    def schedule_report(self) -> ScheduleReport:
        """How this plan runs its ops: on how many threads, how many stay in program order,
        the depth and width of their dependency graph (what several threads could run at
        once), and the most ops seen running at once (1 for one thread).

        >>> # exe.plan_cache.find(main, ["x"], [loss.name]).schedule_report().max_in_flight
        """
        if self._ssa is not None:
            return self._ssa.report()
        if self._sequential is None:
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
        block = self.block
        check_feed_names(block, feed, self._needed_feeds)
        converted = {}
        for name, value in feed.items():
            convert_feed(block.vars[name], value, xp, converted, self.lod_tracked)
        if self.check_nan_inf:
            check_feeds(converted, xp, "" if self.tag else _rank_tag())
        return converted

    def _inputs(self, scope, feed: dict, xp, checked: bool) -> dict:
        """The values the ops read first: checked feeds, stand-in zeros, scope values."""
        self.started_collectives = False
        self._memory_report.lent_last_run = self._memory_report.reused_last_run = 0
        env = dict(feed) if checked else self.checked_feed(feed, xp)
        if self.zero_reads:
            env.update(self._stand_in_zeros(xp))
        for n in self._from_scope:
            value = scope.get(n)
            if value is None:
                raise _uninitialized(self.block._var_recursive(n))
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

    def run(self, scope, feed: dict, xp, place, checked: bool = False):
        """Run once and return the fetches; `checked`: `feed` is `checked_feed`'s result."""
        rec = _profiler._active  # profiling off: this read is its whole cost
        if rec is not None:
            return self._run_profiled(rec, scope, feed, xp, checked)
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
            if self.has_collectives:  # outputs of collectives are complete before the commit
                (wait_all or self.comm.wait_all)()
        except Exception as e:  # noqa: BLE001 - re-raised with the op named
            error = self._failure(e, step, env)
            if error is e:
                raise
            raise error from e

    def _execute_ssa(self, steps, env: dict, xp, wait_all=None) -> None:
        """`_execute` on the SSA executor's threads (ssa.py): the same values and failures;
        `started_collectives` says whether a collective was actually issued."""
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
                self.started_collectives = failed[2]
            if error is e:
                raise
            raise error from e

    def _commit(self, scope, env: dict) -> list:
        """After every op succeeded: persistables written back, the fetches returned."""
        self.started_collectives = self.has_collectives
        for n in self.persist_writes:
            scope._assign(n, env[n])
        for n in self._lod_writes:
            scope.set_lod(n, env[lod_key(n)])
        if self.lod_aware:  # what return_numpy=False hands out with each fetch
            self.fetched_lods = [env.get(lod_key(n)) for n in self.fetch_names]
        return [env[n] for n in self.fetch_names]

    def _failure(self, e, step, env):
        """The exception to raise for `e` raised by `step`: the op named, with its inputs."""
        first = self._first_collective
        self.started_collectives = (first is not None and step is not None
                                    and step.where[0] >= first)
        if self.has_collectives:
            _drain(self.comm)
        if isinstance(e, (CommunicationError, NumericError)):
            return e  # already names the rank and the collective, or the op
        i, op = step.where
        shapes = {n: tuple(env[n].shape) for n in op.input_arg_names
                  if n in env and hasattr(env[n], "shape")}
        unset = [n for n in dict.fromkeys(op.input_arg_names) if n in env and env[n] is None]
        hint = "".join(
            f"\n  '{n}' holds no value: no op wrote it before this one (a While loop that ran "
            f"zero times, or a conditional block that did not run, leaves a variable only it "
            f"writes without one); give it a value before, e.g. "
            f"fluid.layers.fill_constant(shape, dtype, value, out={n})" for n in unset)
        return ExecutionError(
            f"{self.tag}op #{i} '{op.type}' failed: {type(e).__name__}: {e}{hint}\n"
            f"  op: {op}\n  input shapes: {shapes}"
        )

    def _run_profiled(self, rec, scope, feed, xp, checked):
        """`run` with every op timed (fluid.profiler): events 'feed', one per op type,
        'wait_collectives', 'fetch', and the whole run. The same loop over steps whose kernels
        are wrapped in a timer, so the unprofiled loop pays nothing for the profiler."""
        now, thread = _profiler.now_ns, rec.thread_index()
        start = now()
        env = self._tagged_inputs(scope, feed, xp, checked)
        rec.record("feed", start, now(), thread)
        wait = (_timer(self.comm.wait_all, "wait_collectives", rec, thread)
                if self.has_collectives else None)
        if self._ssa is not None and xp.__name__ == "numpy":  # each op on its thread's track
            self._execute_ssa(_timed(self.steps, rec, None), env, xp, wait)
        else:
            self._execute(_timed(self.steps, rec, thread), env, xp, wait)
        t0 = now()
        fetched = self._commit(scope, env)
        end = now()
        rec.record("fetch", t0, end, thread)
        rec.record(self._run_event, start, end, thread)
        return fetched


def _timer(fn, name: str, rec, thread):
    """`fn` recording an event `name` around each call, on `thread` (None: the calling
    thread's)."""
    now = _profiler.now_ns

    def timed(*args):
        t0 = now()
        result = fn(*args)
        rec.record(name, t0, now(), thread)
        return result
    return timed


def _timed(steps, rec, thread) -> list:
    """`steps` with each kernel wrapped to record an event named after its op type."""
    return [Step(_timer(s.fn, s.where[1].type, rec, thread), s.ins, s.outs, s.attrs, s.want,
                 s.frees, s.where, s.ctx) for s in steps]


def _zeros_spec(var: Variable):
    if any(d < 0 for d in var.shape):
        raise PreconditionError(
            f"'{var.name}' is computed only on another rank but read here, and its shape "
            f"{list(var.shape)} is not fully known, so it cannot stand in as zeros")
    return var.name, tuple(var.shape), var.dtype


def _drain(comm):
    """After a failure, let collectives already issued finish, so nothing runs behind the
    error; their own failures are secondary to the one being raised."""
    try:
        comm.wait_all()
    except Exception:  # noqa: BLE001
        pass


def _uninitialized(var: Variable):
    if var.persistable:
        kind = "parameter" if isinstance(var, Parameter) else "persistable variable"
        return PreconditionError(
            f"{kind} '{var.name}' has no value in the scope: run the startup program "
            f"(exe.run(fluid.default_startup_program())) or load it before running this program"
        )
    return FeedError(
        f"variable '{var.name}' is read before any op writes it and was neither fed nor set in "
        f"the scope; feed it (feed={{'{var.name}': array}})"
    )
