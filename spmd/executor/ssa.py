"""The SSA thread-pool executor: ExecutionStrategy.num_threads > 1 runs a plan's independent
ops at once on a pool of threads, with the numbers of the flat loop (plan.py), bitwise.

The ops form a dependency graph over the variable names their steps read and write (LoD keys
included): an op waits for the last writer of each name it reads (true dependency), and an op
that writes a name waits for that name's last writer (output dependency) and for every op
reading the value it replaces (anti dependency); so each op sees exactly the values it sees in
program order. Ops whose order matters beyond their values run in program order relative to
each other, one chain: collectives (every rank must issue them in the same order, else the
ranks deadlock), random ops (the generator's draws are consumed in program order), control
flow (a sub-block may hold either; its body runs sequentially), host ops calling Python
(print, py_func), parameter-server ops and any kernel taking a KernelContext not known to be
pure. The chain runs on the calling thread (the place's thread, as before: the communicators
and the profiler see the same thread); every other op runs on whichever thread is free, the
lowest program index first. A value is dropped once every op touching it finished (the flat
loop drops it after its last user in program order: the same values, at most later); a value
only read for its shape after its last data reader (stand_in.py) is replaced by its stand-in
once every op touching it up to that reader finished.

In-place updates (inplace.py) stay correct: an op writing a name over its input waits for
every reader of that name, and an alias of the buffer (a view, the same array under another
name, an in-flight op's inputs) holds a reference, which the loan's reference count refuses.
An elementwise op writing into an input that dies there (inplace.DyingInputs) keeps that loan
only where every other reader of the value is an op it waits for in the graph: a reader not
yet started holds no reference the count could see.
An update that may write over a value read from the scope also waits for every op before the
first such update in program order, so a run failing before it changes nothing in the scope
(as in program order: a step may be retried). Scratch is per op (KernelContext) or per thread
(kernels/workspace.py).

The first op that fails stops the dispatch; the ops in flight finish; then the run raises the
error naming that op, as the flat loop does. Threads are daemons started on a plan's first
concurrent run, reused by every run and stopped when the plan is dropped (Executor.close).
Only host (numpy) runs are concurrent; a GPU place queues its kernels on one stream anyway.
"""
from __future__ import annotations

import heapq
import threading

from ..errors import PreconditionError
from ..kernels.registry import kernel_def
from ..ops.registry import get_op_def
from ..record import FrozenRecord
from .stand_in import ShapeOnly


def in_program_order(op_type: str) -> bool:
    """Whether ops of `op_type` keep their program order relative to each other under the
    SSA executor (collectives, random draws, control flow, side effects).

    >>> in_program_order("c_allreduce_sum"), in_program_order("dropout"), in_program_order("mul")
    (True, True, False)
    """
    opdef = get_op_def(op_type)
    if opdef.collective or opdef.random or opdef.side_effects:
        return True
    # a kernel with a context may touch shared state through it, unless declared pure
    k = kernel_def(op_type)
    return k.context and not k.pure


class ScheduleReport(FrozenRecord, frozen=True):
    """How a plan runs its ops: `threads` (1: one at a time, in program order); `ops`;
    `chained`, the ops kept in program order; `levels`, the length of the longest chain of
    dependencies (ops / levels is the average width); `widest`, the most ops of one level
    (what could run at once); `max_in_flight`, the most ops seen running at once in any run
    so far.

    >>> ScheduleReport(1, 0, 0, 0, 0, 0).threads
    1
    """

    __slots__ = ("threads", "ops", "chained", "levels", "widest", "max_in_flight")
    _fields = __slots__

    def __init__(self, threads: int, ops: int, chained: int, levels: int, widest: int,
                 max_in_flight: int):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "threads", threads)
        set_(self, "ops", ops)
        set_(self, "chained", chained)
        set_(self, "levels", levels)
        set_(self, "widest", widest)
        set_(self, "max_in_flight", max_in_flight)


def sequential_report(steps, scope_updates=()) -> ScheduleReport:
    """The ScheduleReport of `steps` run one at a time: their graph's depth and width (what
    several threads could run at once), one op in flight."""
    g = Graph(steps, scope_updates)
    return ScheduleReport(1, len(steps), sum(g.chained), g.levels, g.widest, min(len(steps), 1))


def _names(bindings) -> set:
    return {n for _, names, _ in bindings for n in names}


class Graph:
    """The dependencies of a plan's steps: per step its successors, how many steps it waits
    for, whether it is on the chain, and which droppable values it touches.

    `scope_updates`: the steps that may write over a value read from the scope (an in-place
    update); each also waits for every step before the first of them, so that a run failing
    there leaves the scope as it was, as in program order."""

    def __init__(self, steps, scope_updates=()):
        self.chained = tuple(in_program_order(s.where[1].type) for s in steps)
        preds, touched = _dependencies(steps, self.chained)
        if scope_updates:
            _after_everything_before(preds, scope_updates)
        succs: list[list] = [[] for _ in steps]
        for k, ps in enumerate(preds):
            for p in ps:
                succs[p].append(k)
        self.succs = tuple(tuple(sorted(s)) for s in succs)
        self.waits = tuple(len(p) for p in preds)
        self.roots = tuple(k for k, p in enumerate(preds) if not p)
        droppable = {n for step in steps for n in step.frees}
        self.users = {n: len(touched[n]) for n in droppable}
        drops: list[list] = [[] for _ in steps]
        for n in droppable:
            for k in touched[n]:
                drops[k].append(n)
        self.drops = tuple(tuple(d) for d in drops)
        self.shrink_users, self.shrinks = _shrinks(steps, touched)
        level = [0] * len(steps)
        for k, ps in enumerate(preds):
            level[k] = 1 + max((level[p] for p in ps), default=0)
        self.levels = max(level, default=0)
        width: dict[int, int] = {}
        for v in level:
            width[v] = width.get(v, 0) + 1
        self.widest = max(width.values(), default=0)


def _dependencies(steps, chained) -> tuple[list, dict]:
    """(per step the steps it waits for, name -> the steps touching it): true, output and
    anti dependencies on names, and each chained step after the chained step before it."""
    preds: list[set] = [set() for _ in steps]
    last_writer: dict[str, int] = {}
    readers: dict[str, list] = {}  # of the value a name holds now
    touched: dict[str, list] = {}
    chain_prev = None
    for k, step in enumerate(steps):
        reads, writes = _names(step.ins), _names(step.outs)
        for n in reads:
            if n in last_writer:
                preds[k].add(last_writer[n])
        for n in writes:
            if n in last_writer:
                preds[k].add(last_writer[n])
            preds[k].update(readers.get(n, ()))
        for n in reads:
            readers.setdefault(n, []).append(k)
        for n in writes:
            last_writer[n] = k
            readers[n] = []
        for n in reads | writes | set(step.frees):
            touched.setdefault(n, []).append(k)
        if chained[k]:
            if chain_prev is not None:
                preds[k].add(chain_prev)
            chain_prev = k
        preds[k].discard(k)
    return preds, touched


def _shrinks(steps, touched: dict) -> tuple[dict, tuple]:
    """(name -> how many steps must finish before its shape-only stand-in replaces it, per
    step the names it counts down): the steps touching the name up to the one whose
    `shrinks` name it (its last data reader in program order); the ops after it read only
    the shape, of the array or of the stand-in alike."""
    users: dict[str, int] = {}
    per_step: list[list] = [[] for _ in steps]
    for kb, step in enumerate(steps):
        for n in step.shrinks:
            before = [k for k in touched[n] if k <= kb]
            users[n] = len(before)
            for k in before:
                per_step[k].append(n)
    return users, tuple(tuple(p) for p in per_step)


def _after_everything_before(preds: list, updates) -> None:
    """Each step of `updates` waits for every step before the first of them: for the steps
    there that nothing there waits for (the others finish before those)."""
    first = min(updates)
    waited = {p for k in range(first) for p in preds[k]}
    last = [j for j in range(first) if j not in waited]
    for k in updates:
        preds[k].update(last)


class _Run:
    """One run's state, guarded by its pool's lock."""

    __slots__ = ("steps", "graph", "env", "xp", "waits", "users", "ready", "chain", "left",
                 "in_flight", "failure", "began", "shrink_users")

    def __init__(self, steps, graph: Graph, env: dict, xp):
        self.steps, self.graph, self.env, self.xp = steps, graph, env, xp
        self.waits = list(graph.waits)
        self.users = dict(graph.users)
        self.shrink_users = dict(graph.shrink_users)
        self.ready: list[int] = []  # pure ops whose inputs are ready, by program index
        self.chain = None  # the chained op whose turn it is, once its inputs are ready
        self.left = len(steps)
        self.in_flight = 0
        self.failure = None  # (exception, step index) of the first op that failed
        self.began = False  # whether a collective was issued

    def release(self, k: int) -> None:
        if self.graph.chained[k]:
            self.chain = k
        else:
            heapq.heappush(self.ready, k)


def _call(step, env: dict, xp):
    """Run one step: its inputs from `env`, its outputs into it; the exception it raised, or
    None. Nothing of it is referenced once it returns (an update may then have its input)."""
    try:
        ins = {}
        for slot, names, dup in step.ins:
            ins[slot] = [env[n] for n in names] if dup else env[names[0]]
        res = step.fn(xp, ins, step.attrs, step.want)
        for slot, names, dup in step.outs:
            if dup:
                env.update(zip(names, res[slot]))
            else:
                env[names[0]] = res[slot]
        return None
    except Exception as e:  # noqa: BLE001 - the plan raises it, naming the op
        return e


class SSAExecutor:
    """Runs a plan's steps on `threads` threads: the calling thread and threads - 1 helpers.

    A thread that takes an op wakes one idle thread when more ops are ready, so no more
    threads wake than there is work for; the calling thread also waits for its chained ops
    and for the end of the run.

    >>> SSAExecutor([], 2).report().threads
    2
    """

    def __init__(self, steps, threads: int, scope_updates=()):
        self.threads = threads
        self.graph = Graph(steps, scope_updates)
        self._collective = tuple(get_op_def(s.where[1].type).collective for s in steps)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # idle helpers wait here
        self._main = threading.Condition(self._lock)  # the calling thread waits here
        self._main_idle = False
        self._run: _Run | None = None
        self._helpers: list[threading.Thread] = []
        self._closed = False
        self._max_in_flight = 0

    def report(self) -> ScheduleReport:
        g = self.graph
        return ScheduleReport(self.threads, len(g.waits), sum(g.chained), g.levels, g.widest,
                              self._max_in_flight)

    def close(self) -> None:
        """Stop the helper threads (after the ops they run now); a later run starts them
        again."""
        with self._lock:
            self._closed = True
            self._work.notify_all()
            helpers, self._helpers = self._helpers, []
        for t in helpers:
            if t is not threading.current_thread():
                t.join(timeout=5)

    def execute(self, steps, env: dict, xp):
        """Run `steps` (this graph's steps, maybe wrapped) on `env`; None when every one
        succeeded, else (the first exception, its step index, whether a collective was
        issued). A BaseException of the calling thread (KeyboardInterrupt) is re-raised once
        the ops in flight are done."""
        run = _Run(steps, self.graph, env, xp)
        with self._lock:
            if self._run is not None:
                raise PreconditionError("this plan is already running on another thread; "
                                        "run one step of a plan at a time")
            if not self._helpers and self.threads > 1:
                self._closed = False
                self._helpers = [threading.Thread(target=self._helper, name=f"spmd-ssa-{i}",
                                                  daemon=True) for i in range(self.threads - 1)]
                for t in self._helpers:
                    t.start()
            self._run = run
            for k in self.graph.roots:
                run.release(k)
            try:
                self._drive(run)
            except BaseException as e:  # KeyboardInterrupt: only once nothing runs any more
                if run.failure is None:
                    run.failure = (e, None)
                while run.in_flight:
                    self._wait_main()
                raise
            finally:
                self._run = None
        return None if run.failure is None else (*run.failure, run.began)

    def _drive(self, run: _Run) -> None:
        """The calling thread's loop (holding the lock): the chained ops, and pure ops when
        none is its turn, until every op finished or one failed and the rest in flight
        ended."""
        while True:
            if run.failure is not None or run.left == 0:
                if run.in_flight == 0:
                    return
                self._wait_main()
                continue
            if run.chain is not None:
                k, run.chain = run.chain, None
            elif run.ready:
                k = heapq.heappop(run.ready)
            else:
                self._wait_main()
                continue
            if run.ready:
                self._work.notify()
            error = self._step(run, k)
            if error is not None and not isinstance(error, Exception):
                raise error

    def _wait_main(self) -> None:
        self._main_idle = True
        try:
            self._main.wait()
        finally:
            self._main_idle = False

    def _helper(self) -> None:
        with self._lock:
            while not self._closed:
                run = self._run
                if run is None or run.failure is not None or not run.ready:
                    run = None  # an idle thread holds no run's values (they would block loans)
                    self._work.wait()
                    continue
                k = heapq.heappop(run.ready)
                if run.ready:  # more than this thread takes: one more thread
                    self._wake_one()
                self._step(run, k)

    def _wake_one(self) -> None:
        if self._main_idle:
            self._main.notify()
        else:
            self._work.notify()

    def _step(self, run: _Run, k: int):
        """Run step k with the lock released, then account for it (holding the lock).
        Returns what _call returned, or the BaseException that interrupted it."""
        run.in_flight += 1
        if run.in_flight > self._max_in_flight:
            self._max_in_flight = run.in_flight
        if self._collective[k]:
            run.began = True
        self._lock.release()
        try:
            error = _call(run.steps[k], run.env, run.xp)
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt: handed to the caller
            error = e
        finally:
            self._lock.acquire()
        run.in_flight -= 1
        run.left -= 1
        if error is not None:
            if run.failure is None:
                run.failure = (error, k)
            if self._main_idle and run.in_flight == 0:
                self._main.notify()
            return error
        graph, waits = run.graph, run.waits
        for s in graph.succs[k]:
            waits[s] -= 1
            if waits[s] == 0:
                run.release(s)
        users, env = run.users, run.env
        for n in graph.shrinks[k]:  # its last data reader is done: keep only its shape
            run.shrink_users[n] -= 1
            if run.shrink_users[n] == 0 and n in env:
                env[n] = ShapeOnly.of(env[n], n)
        for n in graph.drops[k]:
            users[n] -= 1
            if users[n] == 0:
                env.pop(n, None)
        if self._main_idle and (run.chain is not None or run.ready or run.left == 0
                                or (run.failure is not None and run.in_flight == 0)):
            self._main.notify()
        return None
