"""Fused all-reduce buckets in node-shared memory: when every rank of an MPI world runs on one
node, a bucket's buffer becomes this rank's segment of an MPI shared window, and the bucket is
summed by the ranks reading each other's segments directly.

Each rank owns a slice of the bucket (n slices cut on cache lines, so no two ranks write one
line): once the ranks have met (every segment holds its rank's gradients), each adds its slice
of every segment in rank order and writes the sum into that slice of every segment; once they
have met again, each segment holds the whole sum. The producers already wrote the weight
gradients into the segment (the bucket's `out=` views) and the optimizer reads the sum from
there, so the bytes move once each way, where MPI's shared-memory allreduce copies them through
buffers of its own: measured here (2 ranks, the bench MLP's 2.7 MB, interleaved) 0.15-0.22 ms
against 0.8-1.0 ms. Each slice is summed by one rank and copied to the others, so every rank
holds the same bits, as after MPI's allreduce (at 2 ranks the sum a + b is MPI's own).

Reduce mode's flat sections (passes/reduce_flat.py) go the same way: the reduce-scatter's send
buffer is this rank's segment (each rank sums only its own section of every segment, nothing
written back; SharedSections, two windows in turn, so no rank writes one another may still
read), and the all-gather's result, the updated parameters, is one block every rank maps:
each owner's update writes its pieces there and the ranks meet, nothing is copied
(SharedParams, three blocks in turn, each written only when no one refers to it).

The ranks meet in the communicator's own barrier (MPI_Win_sync on either side orders the
stores), run at once under its watchdog as an inline collective is, named "allreduce": the
collective timeout, a peer that left the job and the arrival board work as for MPI's allreduce.
SharedParams' meeting also carries each rank's word of whether the next block is free.

Ranks may run different plans of one shape in a step (a program whose rank 0 alone fetches the
loss every few steps, as the model zoo's BERT train.py): what the plans of one shape share (the
windows, the answer below, Reduce mode's turns and its next free block) is kept by that shape,
never by one plan, and a block agreed for a plan that did not run the next step is not used.

Whether a bucket is shared is decided at the first all-reduce of its shape by every rank
together (one small MPI allreduce of each rank's answer, kept for the later plans of that
shape): a communicator of the plain MPI kinds whose ranks are all
on this node, host arrays of a dtype numpy sums as MPI does, not a world joined without a
launcher, `enabled`, and room left under MAX_SHARED_BYTES. Otherwise the bucket stays private
and the communicator reduces it.

The window lives as long as the process (freeing one is collective, and garbage collection
runs at different moments on different ranks), like the arrival board's.
"""
from __future__ import annotations

import math
import sys

import numpy as np

# dtypes whose sum numpy takes as MPI does (elementwise, the same rounding)
_SUMMED = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64"))
_LINE = 64  # bytes: slices are cut on cache lines, so two ranks never write one line

_nodes: dict = {}  # id(mpi4py communicator) -> (the communicator, whether all on one node)
_windows: dict = {}  # (id(mpi4py comm), bytes, key) -> (it, window, memories, bytes): _window
_answers: dict = {}  # (id(mpi4py comm), knobs, dtype, size, turns, key) -> (it, MPI or None)

# False (on every rank, before a program's first step) keeps its buckets private, reduced by
# the communicator: the same sums, through MPI's own allreduce
enabled = True
# at most this many bytes of shared windows a process (a rank's segments, every window): a
# larger model's buckets stay private (MPI's system limits on shared memory are not asked)
MAX_SHARED_BYTES = 1 << 30


def share(bucket, comm):
    """A SharedSegment for `bucket` summed over `comm` (a fused all-reduce), or False where it
    stays private; collective over `comm` the first time a bucket of its place and size asks
    (every rank calls it at the bucket's first all-reduce)."""
    size = sum(math.prod(s) for s in bucket.shapes)
    MPI = _agreed(comm, bucket.dtype, bucket.array_module, size,
                  key=("allreduce", bucket.ordinal))
    return SharedSegment(bucket, comm, comm.comm, MPI) if MPI else False


def share_sections(bucket, comm):
    """SharedSections for `bucket` (a flat reduce-scatter's send buffer: the inputs end to end,
    padded to comm.size equal sections), or False; collective as `share`."""
    size = sum(math.prod(s) for s in bucket.shapes)
    MPI = _agreed(comm, bucket.dtype, bucket.array_module, size,
                  key=("sections", bucket.ordinal))
    return SharedSections(bucket, comm, MPI) if MPI else False


def share_gather(section: int, dtype, comm, ordinal: int = 0):
    """SharedParams for a flat all-gather of `section` elements per rank (the `ordinal`-th
    of its plan's buffers), or False; collective as `share`."""
    MPI = _agreed(comm, dtype, np, section * comm.size, turns=3, key=("params", ordinal))
    return SharedParams(section, dtype, comm, MPI, ordinal) if MPI else False


def _agreed(comm, dtype, xp, size: int, turns: int = 2, key: tuple = ()):
    """mpi4py's MPI where every rank of `comm` may share this buffer of `size` elements in
    `turns` windows (module doc), else None; the same answer on every rank.

    Collective only the first time a buffer of its `key` (its kind and place in its plan, as
    its windows are kept), dtype and size asks: a later plan of the same shape gets the answer
    kept then, on this rank alone. Ranks may compile plans at different steps: a program whose
    rank 0 alone fetches the loss every few steps (the model zoo's BERT train.py) compiles on
    rank 0 a plan the others made at their first step, and a collective made there by one rank
    would meet the others' next barrier (a hang)."""
    from ..comm.mpi import MPICommunicator
    from ..comm.mpi_persistent import PersistentMPICommunicator

    if type(comm) not in (MPICommunicator, PersistentMPICommunicator) or comm.size < 2:
        return None  # (the same kind on every rank: nothing to agree on)
    from mpi4py import MPI

    # (the knobs too: set alike on every rank, a change asks again)
    asked = (id(comm.comm), enabled, MAX_SHARED_BYTES, np.dtype(dtype).str, size, turns, *key)
    kept = _answers.get(asked)
    if kept is not None and kept[0] is comm.comm:
        return kept[1]
    answer = _ask_every_rank(comm, dtype, xp, size, turns, MPI)
    _answers[asked] = (comm.comm, answer)
    return answer


def _ask_every_rank(comm, dtype, xp, size: int, turns: int, MPI):
    """_agreed's collective: every rank's answer, the same on every rank."""
    made = sum(kept[3] for kept in _windows.values())
    able = np.array([enabled and np.dtype(dtype) in _SUMMED and xp in (None, np) and size > 0
                     and made + turns * size * np.dtype(dtype).itemsize <= MAX_SHARED_BYTES],
                    dtype=np.int32)
    # every rank takes the same way (under the collective timeout: a rank that never comes
    # fails the others in time, and past it every rank is here for the calls below)
    if not comm.iallreduce(able, "min", overlap=False).wait()[0]:
        return None
    return MPI if _one_node(comm.comm, MPI) else None  # (the same answer on every rank)


def _window(comm, MPI, nbytes: int, key: tuple, whole: bool = False) -> tuple:
    """(an MPI shared window of `nbytes` per rank, locked for Win_sync, every rank's memory
    in it); collective when made. Windows are kept by (`key`: the kind of buffer, its turn, its
    bucket's place among its plan's buckets; the size) and shared by every plan asking for the
    same: a buffer's contents live only within one step of one plan, and MPI has room for
    about 2000 windows a process (MPICH crashes past them), so one per CompiledProgram would
    run out in a long job or test session. The same plans ask in the same order on every rank,
    so every rank makes the same windows."""
    nbytes = max(4096, -(-nbytes // 4096) * 4096)
    mpi = comm.comm
    full = (id(mpi), nbytes, *key)
    if whole:  # one block on rank 0, every rank's view of it (key: the whole size)
        full = (id(mpi), -nbytes, *key)
        nbytes = nbytes if comm.rank == 0 else 0
    kept = _windows.get(full)
    if kept is not None and kept[0] is mpi:
        return kept[1], kept[2]
    info = MPI.Info.Create()
    info.Set("alloc_shared_noncontig", "true")  # each segment on pages of its own
    win = MPI.Win.Allocate_shared(nbytes, 1, info=info, comm=mpi)
    info.Free()
    win.Lock_all(MPI.MODE_NOCHECK)  # the epoch Win_sync (the memory barrier) needs
    memories = [win.Shared_query(0 if whole else k)[0] for k in range(comm.size)]
    _windows[full] = (mpi, win, memories, nbytes)
    return win, memories


def windows() -> int:
    """How many shared windows this process has made (they are kept: see _window)."""
    return len(_windows)


def _met(comm):
    """How the ranks meet: the communicator's barrier, run at once on this thread under its
    watchdog (the collective timeout, a departed peer), named after the all-reduce."""
    issue = comm.engine.issue

    def meet(win, label: str):
        win.Sync()  # (Win_sync: this rank's stores are seen by the others after the barrier)
        issue("barrier", (), False, label=label)
        win.Sync()
    return meet


def _summed(parts, out):
    """The sum of `parts` in rank order, into `out`."""
    np.add(parts[0], parts[1], out=out)
    for part in parts[2:]:
        out += part
    return out


def _one_node(mpi, MPI) -> bool:
    """Whether every rank of `mpi` shares this node's memory (collective on first call)."""
    known = _nodes.get(id(mpi))
    if known is None or known[0] is not mpi:
        from ..comm.join_mark import joined_start

        if joined_start():  # worlds joined by connect/accept share no MPI window
            alone = False
        else:
            node = mpi.Split_type(MPI.COMM_TYPE_SHARED)
            alone = node.Get_size() == mpi.Get_size()
            node.Free()
        known = _nodes[id(mpi)] = (mpi, alone)
    return known[1]


class SharedSegment:
    """One bucket's MPI shared window: every rank's segment of it, and this rank's slice of
    each (see the module doc)."""

    def __init__(self, bucket, comm, mpi, MPI):
        dtype = np.dtype(bucket.dtype)
        size = sum(math.prod(s) for s in bucket.shapes)
        self._win, memories = _window(comm, MPI, size * dtype.itemsize,
                                      ("allreduce", bucket.ordinal))
        self._comm = comm
        self.rank, self.size = comm.rank, comm.size
        # arrays straight over the window (not views of one over it): the views of a segment
        # then have the segment as their base, as a private bucket's views do
        data = [np.ndarray(size, dtype=dtype, buffer=m) for m in memories]
        per_line = _LINE // dtype.itemsize
        cuts = [min(size, -(-(size * k // self.size) // per_line) * per_line)
                for k in range(self.size + 1)]
        lo, hi = cuts[self.rank], cuts[self.rank + 1]
        self._mine = [d[lo:hi] for d in data]  # this rank's slice of every segment
        self._slice = data[self.rank][lo:hi]
        self._scratch = np.empty(hi - lo, dtype=dtype) if self.size > 2 else None
        self._meet = _met(comm)
        # the bucket's buffer and views now live here (producers are offered these from now on)
        self.buffer = data[self.rank]
        self.views = bucket.views_over(self.buffer)

    def allreduce(self, arrays) -> list:
        """Sum `arrays` (the bucket's members, in order) over the ranks; the reduced views."""
        views = self.views
        for a, view in zip(arrays, views):
            if a is not view:  # its producer did not write it in place
                view[...] = a
        win, meet = self._win, self._meet
        meet(win, "allreduce")  # every segment holds its rank's gradients
        mine = self._mine
        if self.size == 2:
            np.add(mine[0], mine[1], out=self._slice)
            mine[1 - self.rank][...] = self._slice
        else:
            _summed(mine, self._scratch)
            for part in mine:
                part[...] = self._scratch
        meet(win, "allreduce")  # every slice is summed into every segment
        return views


class SharedSections:
    """A flat reduce-scatter's send buffer (Reduce mode, passes/reduce_flat.py) in two MPI
    shared windows used in turn, step after step: once the ranks have met, each sums its own
    section of every rank's segment into a fresh array, and nothing is written back. The next
    step's gradients go into the other window, so a rank still reading this one is never
    written over; the one after that waits for the next meeting, which every rank reaches
    only after its reads of this one."""

    def __init__(self, bucket, comm, MPI):
        dtype = np.dtype(bucket.dtype)
        total = sum(math.prod(s) for s in bucket.shapes)  # (its padding included)
        self._comm, self.rank, self.size = comm, comm.rank, comm.size
        self.section = total // comm.size
        self._meet = _met(comm)
        self._turns = []
        for turn in range(2):
            win, memories = _window(comm, MPI, total * dtype.itemsize,
                                    ("sections", bucket.ordinal, turn))
            data = [np.ndarray(total, dtype=dtype, buffer=m) for m in memories]
            lo = self.rank * self.section
            buffer = data[self.rank]
            self._turns.append((win, buffer, bucket.views_over(buffer),
                                [d[lo:lo + self.section] for d in data]))
        # the turn is the windows' (every plan of this shape's): each step moves it once on
        # every rank, whichever plan runs it, so ranks running other plans (other fetch
        # lists) still write the same window in a step
        key = (id(comm.comm), "sections", bucket.ordinal, total * dtype.itemsize)
        turn_of = _section_turns.get(key)
        if turn_of is None or turn_of[1] is not self._turns[0][0]:
            turn_of = _section_turns[key] = [0, self._turns[0][0]]
        self._turn_of = turn_of
        self.buffer, self.views = self._turns[turn_of[0]][1], self._turns[turn_of[0]][2]
        # this rank's sums, one array a turn: a step's result is read within its step (by
        # the updates), and written again two steps later, so the views of it the
        # reduce-scatter hands on can be kept (kernels/collective.py _keep_outputs)
        self._results = [np.empty(self.section, dtype=dtype) for _ in range(2)]

    def reduce_scatter(self, arrays, bucket):
        """The sum over the ranks of this rank's section of `arrays` (the bucket's members in
        order), into this turn's result array (the same one every other step); `bucket`'s
        buffer and views move to the next window."""
        turn = self._turn_of[0]
        win, _, views, parts = self._turns[turn]
        for a, view in zip(arrays, views):
            if a is not view:  # its producer did not write it in place
                view[...] = a
        self._meet(win, "reduce_scatter")  # every segment holds its rank's gradients
        out = self._results[turn]
        np.add(parts[0], parts[1], out=out)  # (_summed's order, without its frame)
        for part in parts[2:]:
            out += part
        self._turn_of[0] = turn ^ 1
        _, buffer, views, _ = self._turns[turn ^ 1]
        self.buffer, self.views = buffer, views
        bucket.buffer, bucket.views = buffer, views
        return out

    def current(self):
        """(buffer, views) of this step's window: where the producers write the gradients."""
        _, buffer, views, _ = self._turns[self._turn_of[0]]
        return buffer, views


class _Held:
    __slots__ = ("spare",)  # (one slot: its refcount is calibrated as GatherBuffer's spare)


class _Rotation:
    """What every SharedParams of one window key shares (the plans of one shape): the three
    blocks, each held by a _Held; the flag words; and the turn, moved on by every meeting of
    any of them (meetings are collective, so it moves alike on every rank)."""

    def __init__(self, wins, helds, flag_win, flags):
        self.wins, self.helds, self.flag_win, self.flags = wins, helds, flag_win, flags
        self.turn = 0
        self.meetings = 0  # how many meetings it had: a block agreed at one is for the next


_rotations: dict = {}  # (id(mpi4py comm), window key) -> _Rotation
_section_turns: dict = {}  # (id(mpi4py comm), "sections", ordinal, bytes) -> [turn, window]


class SharedParams:
    """A flat all-gather's result (Reduce mode's updated parameters) in node-shared memory:
    three MPI shared windows, each one block of (comm.size, section) that every rank maps, used
    in turn. Each owner's update writes its pieces straight into the turn's block (the
    GatherBuffer hands them out), and once the ranks have met every rank's parameters are
    views of that block: nothing is copied, the node holds the parameters once.

    A block is written only when no one refers to it on any rank: at each meeting every rank
    writes its word of whether the next turn's block is free, that is, nothing but its _Held
    refers to it (not a caller's numpy.asarray of a parameter, not a plan whose scope's
    parameters are its views: the plans of one shape share the blocks), and reads the others'
    after it; a buffer the ranks agreed for takes the block at once (`meet` returns it), so no
    other plan takes it in between. Not free: that step gathers into a private buffer through
    the communicator, as an unshared buffer does. Three, not two: when a step decides, the
    parameters the step read are still held by the run itself. A flag word has a slot per
    turn: a rank late in reading one meeting's words never reads the next one's."""

    def __init__(self, section: int, dtype, comm, MPI, ordinal: int = 0):
        dtype = np.dtype(dtype)
        self._comm = comm
        nbytes = comm.size * section * dtype.itemsize
        key = ("params", ordinal, nbytes)
        wins = []
        for turn in range(3):
            wins.append(_window(comm, MPI, nbytes, (*key, turn), whole=True))
        flag_win, flag_memories = _window(comm, MPI, _LINE, (*key, "flags"))
        rotation = _rotations.get((id(comm.comm), key))
        if rotation is None or rotation.wins[0] is not wins[0][0]:
            helds = []
            for _, memories in wins:
                helds.append(_Held())
                helds[-1].spare = np.ndarray((comm.size, section), dtype=dtype,
                                             buffer=memories[0])
            rotation = _rotations[(id(comm.comm), key)] = _Rotation(
                [w for w, _ in wins], helds, flag_win,
                [np.ndarray(6, dtype=np.int32, buffer=m) for m in flag_memories])
        self.rotation = rotation  # (GatherBuffer reads rotation.meetings: no call a step)
        self._meet = _met(comm)
        self._used = None  # the window of the block this step writes (None: a private buffer)

    def meet(self, in_block: bool):
        """The step's meeting, once every rank wrote its pieces (into this step's block,
        `in_block`, or a private buffer); (the block the next step writes, where every rank
        agreed it is free, else None; whether every rank wrote into this step's block). Where
        one did not (its plan is not the one that took the block: ranks whose fetch lists
        differ run other plans of this shape), every rank gathers through the communicator."""
        rotation = self.rotation
        used = self._used if in_block else None
        rotation.turn = turn = (rotation.turn + 1) % 3
        rotation.meetings += 1
        nxt = rotation.helds[turn]
        words = rotation.flags[self._comm.rank]
        # (_references' expression inlined: the same count, no frame a step)
        words[turn] = sys.getrefcount(nxt.spare) == _ALONE_HELD
        words[3 + turn] = in_block
        if used is not None:
            used.Sync()  # (this rank's stores into the block are seen by the others after it)
        self._meet(rotation.flag_win, "allgather")
        if used is not None:
            used.Sync()
        agreed = every_in = True  # (a loop, not all() over a generator: no calls per rank)
        for flags in rotation.flags:
            if not flags[turn]:
                agreed = False
            if not flags[3 + turn]:
                every_in = False
        self._used = rotation.wins[turn] if agreed else None
        return (nxt.spare if agreed else None), every_in


def _references(held) -> int:
    return sys.getrefcount(held.spare)


_probe = _Held()
_probe.spare = object()
_ALONE_HELD = _references(_probe)  # (calibrated: what an access adds differs by version)
del _probe
