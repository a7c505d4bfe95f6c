"""The pserver side of parameter-server mode at run time: `exe.run(pserver_program)` serves.

A program whose global block holds `listen_and_serv` does not run as a plan: Executor.run
runs it as a PServerJob (ps/jobs.py, named by listen_and_serv's OpDef.job_kind, so the
executor imports nothing of ps until such a program runs), whose ListenAndServ gets the scope the
startup program filled, starts a PServer on the op's endpoint
(only that one) with a PServerRuntime as its handler, and serves until every trainer called
`complete` (Executor.close() on the trainer); then the updated persistables are written back
to the scope (fluid.io.save_persistables on the pserver program saves this pserver's slice).

PServerRuntime holds the pserver's values (name -> array, from the scope) and runs the
optimize blocks through plans of the program's sub-blocks (Plan(..., block_index).run_in):
- sync (distributed_mode 0): the gradients of step s from every trainer (named
  <grad>.trainer_<i>; the optimize blocks sum and average them) are kept until the last
  running trainer reaches the send barrier of step s; that call runs the learning-rate block
  once, then every optimize block once, then releases the barrier; parameters asked for with
  min_step s are those after step s;
- async (1, and half async 2): each gradient runs its block (after the learning-rate block)
  as it arrives;
- Geo-SGD (3, spmd/ps/geo.py): each parameter delta runs its block (param += delta) as it
  arrives; a trainer asking for a table's block gets, as SelectedRows, the rows any delta
  changed since that trainer last asked;
- prefetch: rows of a parameter block (a sparse table's) by their local ids;
- checkpoint_notify(dir): this pserver's persistables saved into dir/pserver_<id> (load them
  with fluid.io.load_persistables(exe, that dir, pserver_program) after the startup).
"""
from __future__ import annotations

import logging
import mmap
import os
import re
import signal
import sys
import threading
import time

import numpy as np

from ..core.places import array_module
from ..core.scope import Scope, scope_guard
from ..core.selected_rows import SelectedRows, add_rows, dense_of
from ..errors import InvalidArgumentError, PreconditionError
from ..executor.plan import Outcome
from ..flags import flags
from .block_runner import BlockRunner
from .handler import BARRIER_KINDS, PServerHandler, UnknownVariableError, arrive

__all__ = ["ListenAndServ", "PServerRuntime"]

log = logging.getLogger(__name__)
SYNC, GEO = 0, 3  # fluid's DistributedMode
DC_ASGD_TRAINER = "@TRAINER_ID@"  # spmd/ps/pserver_program.py's DC-ASGD ops read it
_TRAINER_SUFFIX = re.compile(r"^(.*)\.trainer_(\d+)$")


class PServerRuntime(PServerHandler):
    """The handler of one pserver: its values, its optimize blocks, its barriers."""

    def __init__(self, program, op, values: dict, place):
        self.program, self.place = program, place
        self.xp = array_module(place)
        a = op.attrs
        self.endpoint, self.pserver_id = a["endpoint"], a["pserver_id"]
        self.trainers, self.sync = int(a["Fanin"]), a["distributed_mode"] == SYNC
        self.dc_asgd = bool(a.get("dc_asgd"))
        self.lr_block = int(a["lr_decay_block_id"])
        self.grad_blocks = {}
        for entry in a["grad_to_block_id"]:
            if not entry:  # fluid's ListenAndServ layer lists [""]: no gradient -> block map
                continue
            grad, _, idx = entry.rpartition(":")
            self.grad_blocks[grad] = int(idx)
        self.blocks = [b for b in a["optimize_blocks"] if b != self.lr_block]
        self.vars = program.global_block().vars
        self.accepted = set(op.input("X")) | self._lr_inputs()
        self.geo = a["distributed_mode"] == GEO
        # Geo-SGD: deltas arrive unlisted in X (fluid's); a table's rows changed since each
        # trainer's last receive are what that trainer receives of it
        self.geo_rows: dict = {}
        if self.geo:
            self.accepted |= set(self.grad_blocks)
            for entry in a["sparse_grad_to_param"]:
                delta, _, param = entry.rpartition(":")
                self.geo_rows[param] = (delta, [set() for _ in range(self.trainers)])
        rng = np.random.default_rng(program.random_seed or None)
        self.values = values
        self._run_ops_before_serving(op, rng)
        # each block a program of its own, so its updates write the held rows in place
        # (block_runner.py); they run one at a time, under self._cond
        # a server built with fluid's ListenAndServ layer (no gradient -> block map) is asked
        # for any variable its program declares at the top, as fluid's scope holds them all:
        # what its blocks write there is kept; a transpiled one's trainers get only its
        # persistable parameter blocks, and its blocks' temporaries are freed
        keep = self._top_level_outputs() if not self.grad_blocks else set()
        self.runners = {b: BlockRunner(program, b, values, place, rng, keep=keep)
                        for b in self.blocks + ([self.lr_block] if self.lr_block >= 0 else [])}
        self.step = 0  # sync: the step whose gradients are being received
        self.completed: set = set()
        self.failure: Exception | None = None
        self.last_call = time.monotonic()
        self._arrived = {kind: {} for kind in BARRIER_KINDS}
        self._generation = dict.fromkeys(BARRIER_KINDS, 0)
        self._closed = False
        self._cond = threading.Condition()

    def _run_ops_before_serving(self, serv_op, rng) -> None:
        """The global block's ops before listen_and_serv (a hand-built server's initializers
        of what it receives), run first, as fluid's executor runs them: what they write is
        held as the pserver's values."""
        ops = self.program.global_block().ops
        before = ops[:next(i for i, o in enumerate(ops) if o is serv_op)]
        if before:
            keep = {n for o in before for n in o.output_arg_names}
            BlockRunner(self.program, 0, self.values, self.place, rng, keep=keep,
                        ops=before).run(self.xp)

    def _top_level_outputs(self) -> set:
        written = {n for b in self.blocks for op in self.program.block(b).ops
                   for n in op.output_arg_names}
        return written & set(self.vars)

    def _lr_inputs(self) -> set:
        """What the learning-rate block reads and nothing writes: the async step counters
        the trainers send."""
        if self.lr_block < 0:
            return set()
        ops = self.program.block(self.lr_block).ops
        written = {n for op in ops for n in op.output_arg_names}
        return {n for op in ops for n in op.input_arg_names if n not in written}

    # -- checks --------------------------------------------------------------------------
    def _where(self, trainer_id) -> str:
        return f"pserver {self.endpoint} (trainer {trainer_id})"

    def _check_value(self, trainer_id, name, value) -> None:
        if name not in self.accepted:
            raise UnknownVariableError(
                f"{self._where(trainer_id)}: '{name}' is not a gradient this pserver "
                f"receives (it receives {sorted(self.accepted)[:8]}); was the trainer's "
                f"program transpiled with the same pservers and trainers?")
        m = _TRAINER_SUFFIX.match(name)
        if m and name in self.vars and int(m.group(2)) != trainer_id:
            raise InvalidArgumentError(
                f"{self._where(trainer_id)}: trainer {trainer_id} sent '{name}', trainer "
                f"{m.group(2)}'s gradient: check PADDLE_TRAINER_ID (each trainer transpiles "
                f"with its own trainer_id)")
        var = self.vars[name]
        shape = value.shape
        dtype = value.dtype
        if tuple(var.shape) != tuple(shape) or np.dtype(dtype) != np.dtype(var.dtype):
            raise InvalidArgumentError(
                f"{self._where(trainer_id)}: '{name}' should be {var.dtype} "
                f"{list(var.shape)}, got {np.dtype(dtype)} {list(shape)}")

    def _running(self, trainer_id, what) -> None:
        self.last_call = time.monotonic()
        if self.failure is not None:
            raise PreconditionError(f"pserver {self.endpoint} failed: {self.failure}")
        if self._closed:
            raise PreconditionError(f"pserver {self.endpoint} is shutting down")
        if trainer_id in self.completed:
            raise PreconditionError(
                f"{self._where(trainer_id)}: {what} after this trainer completed "
                f"(Executor.close()); create a new Executor only after training")

    # -- running blocks ------------------------------------------------------------------
    def _run_block(self, b: int) -> None:
        self.runners[b].run(self.xp)

    def lent_total(self) -> int:
        """The buffers the optimize blocks' plans lent their updates so far: each one an
        update written in place (a table's slice, a moment) instead of into a copy."""
        return sum(r.memory_report().lent_total for r in self.runners.values())

    def _optimize(self, blocks, what: str) -> None:
        try:
            if self.lr_block >= 0:
                self._run_block(self.lr_block)
            for b in blocks:
                self._run_block(b)
        except Exception as e:  # noqa: BLE001 - every waiting trainer is told
            self.failure = PreconditionError(
                f"pserver {self.endpoint}: the optimize blocks of {what} failed: "
                f"{type(e).__name__}: {e}")
            self._cond.notify_all()
            log.error("%s", self.failure)
            raise self.failure from e

    # -- the calls -----------------------------------------------------------------------
    def send_variables(self, trainer_id, step, values):
        with self._cond:
            self._running(trainer_id, "send_variables")
            for name, value in values.items():
                self._check_value(trainer_id, name, value)
            if self.sync and step != self.step and not set(values) <= self._lr_inputs():
                raise InvalidArgumentError(
                    f"{self._where(trainer_id)}: gradients of step {step} sent while the "
                    f"pserver gathers step {self.step}; every trainer must run the same "
                    f"sequence of trainer programs")
            for name, value in values.items():
                self.values[name] = _on(self.xp, value)
            if self.geo:
                self._record_geo_rows(values)
            if not self.sync:
                blocks = sorted({self.grad_blocks[g] for g in values if g in self.grad_blocks})
                if blocks:
                    # DC-ASGD's blocks pick the sender's parameter backup by this id
                    self.values[DC_ASGD_TRAINER] = self.xp.asarray([trainer_id], np.int64)
                    self._optimize(blocks, f"trainer {trainer_id}'s gradients")

    def get_variables(self, trainer_id, names, min_step, timeout):
        with self._cond:
            self._running(trainer_id, "get_variables")
            if min_step is not None and self.sync:
                done = self._cond.wait_for(
                    lambda: self.step > min_step or self.failure is not None or self._closed,
                    timeout)
                if not done:
                    raise TimeoutError(
                        f"pserver {self.endpoint}: parameters after step {min_step} not "
                        f"ready within {timeout:.1f} s (the send barrier of that step has "
                        f"not passed)")
                self._running(trainer_id, "get_variables")
            missing = [n for n in names if n not in self.values]
            if missing:
                raise UnknownVariableError(
                    f"{self._where(trainer_id)}: no variable {missing}; this pserver holds "
                    f"{sorted(n for n in self.values if '@GRAD' not in n)[:8]}")
            if self.dc_asgd:  # the parameters this trainer's next gradients are computed at
                for n in names:
                    backup = f"{n}.trainer_{trainer_id}_bak"
                    if backup in self.vars:
                        self.values[backup] = self.xp.array(self.values[n], copy=True)
            if self.geo:
                return {n: self._geo_value(trainer_id, n) for n in names}
            # copies: the reply is encoded after the lock is released, and the updates write
            # the held arrays in place (what is copied is what is sent anyway)
            return {n: _host_copy(dense_of(self.values[n])) for n in names}

    def _record_geo_rows(self, values) -> None:
        for delta, per_trainer in self.geo_rows.values():
            sent = values.get(delta)
            if isinstance(sent, SelectedRows) and sent.rows.size:
                rows = set(np.asarray(_host(sent.rows)).reshape(-1).tolist())
                for changed in per_trainer:
                    changed |= rows

    def _geo_value(self, trainer_id, name):
        """A table's rows changed since this trainer's last receive (fluid's
        AsyncSparseParamUpdateRecorder), as SelectedRows; a dense block whole."""
        value = self.values[name]
        if name not in self.geo_rows:
            return _host(dense_of(value))
        changed = self.geo_rows[name][1][trainer_id]
        rows = np.array(sorted(changed), dtype=np.int64)
        changed.clear()
        return SelectedRows(rows, _host(value[rows]), int(value.shape[0]))

    def prefetch(self, trainer_id, table, ids, timeout):
        with self._cond:
            self._running(trainer_id, "prefetch")
            held = self.values.get(table)
            if held is None or isinstance(held, SelectedRows) or held.ndim < 1:
                raise UnknownVariableError(
                    f"{self._where(trainer_id)}: no table '{table}' to prefetch rows of")
            if ids.size and (ids.min() < 0 or ids.max() >= held.shape[0]):
                raise InvalidArgumentError(
                    f"{self._where(trainer_id)}: prefetch of '{table}': ids must be in "
                    f"[0, {held.shape[0]}), got [{ids.min()}, {ids.max()}]")
            return _host(held[ids])

    def _release(self, kind: str) -> None:
        arrived = self._arrived[kind]
        running = set(range(self.trainers)) - self.completed
        if not arrived or not set(arrived) >= running:
            return
        step = next(iter(arrived.values()))
        arrived.clear()
        if kind == "send":
            self._optimize(self.blocks, f"step {step}")
            self.step = step + 1
        self._generation[kind] += 1
        self._cond.notify_all()

    def barrier(self, trainer_id, kind, step, timeout):
        if not self.sync:
            return  # async: nothing waits (the async trainer program has no barrier)
        with self._cond:
            self._running(trainer_id, f"the {kind} barrier")
            arrived = self._arrived[kind]
            arrive(arrived, trainer_id, kind, step, f"pserver {self.endpoint}: ")
            generation = self._generation[kind]
            self._release(kind)
            ready = self._cond.wait_for(
                lambda: self._generation[kind] != generation or self.failure is not None
                or self._closed, timeout)
            if not ready:
                arrived.pop(trainer_id, None)
                lost = set(range(self.trainers)) - self.completed - set(arrived) - {trainer_id}
                error = TimeoutError(
                    f"pserver {self.endpoint}: {kind} barrier of step {step}: trainers "
                    f"{sorted(lost)} did not arrive within {timeout:.1f} s")
                # sync mode cannot go on without them: every waiting call fails now and the
                # pserver stops serving (ListenAndServ raises this) instead of idling on
                self.failure = error
                self._cond.notify_all()
                log.error("%s; the pserver stops", error)
                raise error
            if self._generation[kind] == generation:
                self._running(trainer_id, f"the {kind} barrier")

    def checkpoint_notify(self, trainer_id, dirname):
        with self._cond:
            self._running(trainer_id, "checkpoint_notify")
            self.save(os.path.join(dirname, f"pserver_{self.pserver_id}"))

    def complete(self, trainer_id):
        with self._cond:
            self.last_call = time.monotonic()
            self.completed.add(trainer_id)
            if self.sync:
                self._drop_gradients_of(trainer_id)
            for kind in BARRIER_KINDS:
                self._release(kind)
            self._cond.notify_all()

    def _drop_gradients_of(self, trainer_id: int) -> None:
        """A trainer that completed sends no more: its last gradients become zeros, so the
        later steps of the others average their own (still over every trainer, as DDP's
        join does by default) instead of re-applying its stale ones."""
        for name, value in list(self.values.items()):
            m = _TRAINER_SUFFIX.match(name)
            if m is None or int(m.group(2)) != trainer_id:
                continue
            if isinstance(value, SelectedRows):
                xp = self.xp
                self.values[name] = SelectedRows(
                    xp.zeros((0,), np.int64), xp.zeros((0,) + tuple(value.value.shape[1:]),
                                                       value.value.dtype), value.height)
            else:
                self.values[name] = self.xp.zeros_like(value)

    def shutdown(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- values and the scope ------------------------------------------------------------
    def persistables(self) -> dict:
        """This pserver's persistable values (a sparse gradient as its dense table, in
        memory only its rows take; one never received as zeros), as its program declares
        them."""
        out = {}
        for name, var in self.vars.items():
            if not var.persistable or var.type == "RAW":
                continue
            value = self.values.get(name)
            if value is None:
                if any(d < 0 for d in var.shape):
                    continue
                value = self.xp.zeros(tuple(var.shape), dtype=var.dtype)
            out[name] = rows_backed_dense(value) if self.xp is np else dense_of(value)
        return out

    def save(self, dirname: str) -> None:
        from ..io import save_vars

        scope = Scope()
        for name, value in self.persistables().items():
            scope.put(name, value)
        block = self.program.global_block()
        with scope_guard(scope):
            save_vars(None, dirname, self.program,
                      vars=[block.var(n) for n in scope.local_var_names()])


def _on(xp, value):
    if xp is np or isinstance(value, SelectedRows):
        return value if not isinstance(value, SelectedRows) or xp is np else SelectedRows(
            xp.asarray(value.rows), xp.asarray(value.value), value.height)
    return xp.asarray(value)


def rows_backed_dense(value):
    """`value`, or the dense host table of a SelectedRows in anonymous memory that the OS
    backs only where its rows are written: numpy asks for huge pages for large arrays, so the
    few rows of a sparse gradient written into np.zeros would make most of a table resident
    (a 10M-row table's 2.5 GB, to hand back one step's gradient)."""
    if not isinstance(value, SelectedRows) or not isinstance(value.value, np.ndarray):
        return value
    shape, dtype = value.shape, value.value.dtype
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes == 0:
        return np.zeros(shape, dtype)
    out = np.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype).reshape(shape)
    add_rows(np, out, value.rows, value.value)
    return out


def _host(value):
    return value if isinstance(value, np.ndarray) else value.get()


def _host_copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value.get()


class ListenAndServ:
    """What a pserver program's job runs (see the module doc)."""

    def __init__(self, program, feed_names, fetch_names, place):
        if feed_names or fetch_names:
            raise InvalidArgumentError(
                "exe.run(pserver_program) serves until the trainers are done: it takes no "
                "feed and fetches nothing")
        ops = [op for op in program.global_block().ops if op.type == "listen_and_serv"]
        if len(ops) != 1:
            raise InvalidArgumentError(
                f"a pserver program holds one listen_and_serv op, this one {len(ops)}")
        self.program, self.op, self.place = program, ops[0], place
        self.runtime: PServerRuntime | None = None

    def run(self, scope, feed, xp, place):
        values = {n: scope.get(n) for n in self.program.global_block().vars
                  if scope.get(n) is not None}
        # while serving, the pserver alone holds what this scope held (taken out, put back at
        # the end), so its updates may write the table in place (block_runner.py)
        moved = [n for n in scope.local_var_names() if n in values]
        scope.erase(moved)
        try:
            runtime = self.runtime = PServerRuntime(self.program, self.op, values, self.place)
        except BaseException:
            for n in moved:
                scope.put(n, values[n])
            raise
        try:
            self._serve(runtime)
        finally:
            with runtime._cond:
                for n in moved:
                    scope.put(n, runtime.values.get(n, values[n]))
        with runtime._cond:
            for name, value in runtime.persistables().items():
                scope._assign(name, value)
        log.info("pserver %s: every trainer completed after %d sync steps", runtime.endpoint,
                 runtime.step)
        return Outcome([], None, False)

    @staticmethod
    def _serve(runtime) -> None:
        from .rpc import PServer

        server = PServer(runtime.endpoint, runtime, trainers=runtime.trainers)
        server.start()
        runtime.endpoint = server.endpoint  # "ip:0" listens on the port it picked
        idle = flags().ps_idle_timeout_s
        port_file = _write_port_file(server.endpoint)
        restore = _exit_on_signals(server)
        try:
            while not server.wait_complete(0.2):
                if runtime.failure is not None:
                    raise runtime.failure
                if time.monotonic() - runtime.last_call > idle:
                    missing = sorted(set(range(runtime.trainers)) - runtime.completed)
                    raise TimeoutError(
                        f"pserver {runtime.endpoint}: no call from any trainer for {idle:g} s; "
                        f"trainers {missing} never completed (each trainer ends with "
                        f"exe.close()). Raise SPMD_PS_IDLE_TIMEOUT if they are that slow")
        finally:
            restore()
            server.stop(grace=1.0)
            _remove(port_file)


PORT_FILE = "/tmp/paddle.{pid}.port"


def port_file_path(pid: int | None = None) -> str:
    """Where a serving pserver process writes its port (fluid's listen_and_serv does the same;
    Paddle's tests start pservers on port 0 and wait for this file)."""
    return PORT_FILE.format(pid=os.getpid() if pid is None else pid)


def _write_port_file(endpoint: str) -> str | None:
    path = port_file_path()
    tmp = f"{path}.{threading.get_ident()}.tmp"
    try:  # written whole, then renamed: a reader never sees it half written
        with open(tmp, "w") as f:
            f.write(endpoint.rpartition(":")[2])
        os.replace(tmp, path)
    except OSError as exc:  # the pserver serves anyway; only port-0 waiters need it
        log.warning("pserver %s: could not write its port to %s: %s", endpoint, path, exc)
        return None
    return path


def _remove(path) -> None:
    if path is not None:
        try:
            os.remove(path)
        except OSError:
            pass


def _exit_on_signals(server):
    """SIGINT and SIGTERM stop the server and end the process with status 0, as fluid's
    listen_and_serv does (Paddle's tests stop their pservers so), even where they were ignored
    (a background job of a shell). Only where this is the main thread and no Python handler
    of someone else's is set (spmd's launcher forwards its own). Returns the function that
    puts the earlier handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    ours = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in ours}

    def stop_and_exit(signum, frame):
        # as fluid's StopAndExit: stop serving, then exit(0) without the interpreter's
        # shutdown (which would run MPI's finalize, waiting on processes being torn down)
        log.info("pserver %s: signal %d, stopping", server.endpoint, signum)
        try:
            server.stop(grace=1.0)
            _remove(port_file_path())
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError, AttributeError):
                    pass
            os._exit(0)

    taken = [sig for sig in ours
              if previous[sig] in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler)]
    for sig in taken:
        signal.signal(sig, stop_and_exit)

    def restore():
        for sig in taken:
            signal.signal(sig, previous[sig])

    return restore
