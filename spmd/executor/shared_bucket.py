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

The ranks meet in the communicator's own barrier (MPI_Win_sync on either side orders the
stores), run at once under its watchdog as an inline collective is, named "allreduce": the
collective timeout, a peer that left the job and the arrival board work as for MPI's allreduce.

Whether a bucket is shared is decided at its first all-reduce by every rank together (one small
MPI allreduce of each rank's answer): a communicator of the plain MPI kinds whose ranks are all
on this node, host arrays of a dtype numpy sums as MPI does, not a world joined without a
launcher, and `enabled`. Otherwise the bucket stays private and the communicator reduces it.

The window lives as long as the process (freeing one is collective, and garbage collection
runs at different moments on different ranks), like the arrival board's.
"""
from __future__ import annotations

import math

import numpy as np

# dtypes whose sum numpy takes as MPI does (elementwise, the same rounding)
_SUMMED = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64"))
_LINE = 64  # bytes: slices are cut on cache lines, so two ranks never write one line

_nodes: dict = {}  # id(mpi4py communicator) -> (the communicator, whether all on one node)

# False (on every rank, before a program's first step) keeps its buckets private, reduced by
# the communicator: the same sums, through MPI's own allreduce
enabled = True


def share(bucket, comm):
    """A SharedSegment for `bucket` reduced over `comm`, or False where it stays private;
    collective over `comm` (called by every rank at the bucket's first all-reduce)."""
    from ..comm.mpi import MPICommunicator
    from ..comm.mpi_persistent import PersistentMPICommunicator

    if type(comm) not in (MPICommunicator, PersistentMPICommunicator) or comm.size < 2:
        return False  # (the same kind on every rank: nothing to agree on)
    from mpi4py import MPI

    able = np.array([enabled and np.dtype(bucket.dtype) in _SUMMED
                     and bucket.array_module in (None, np)
                     and sum(math.prod(s) for s in bucket.shapes) > 0], dtype=np.int32)
    # every rank takes the same way (under the collective timeout: a rank that never comes
    # fails the others in time, and past it every rank is here for the calls below)
    if not comm.iallreduce(able, "min", overlap=False).wait()[0]:
        return False
    if not _one_node(comm.comm, MPI):  # (the same answer on every rank)
        return False
    return SharedSegment(bucket, comm, comm.comm, MPI)


def _one_node(mpi, MPI) -> bool:
    """Whether every rank of `mpi` shares this node's memory (collective on first call)."""
    known = _nodes.get(id(mpi))
    if known is None or known[0] is not mpi:
        from ..comm.join import joined_start

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
        nbytes = -(-(size * dtype.itemsize) // 4096) * 4096
        info = MPI.Info.Create()
        info.Set("alloc_shared_noncontig", "true")  # each segment on pages of its own
        self._win = MPI.Win.Allocate_shared(nbytes, 1, info=info, comm=mpi)
        info.Free()
        self._win.Lock_all(MPI.MODE_NOCHECK)  # the epoch Win_sync (the memory barrier) needs
        self._comm = comm
        self.rank, self.size = comm.rank, comm.size
        data = []
        for k in range(self.size):
            memory, _ = self._win.Shared_query(k)
            # an array straight over the window (not a view of one over it): the views of a
            # segment then have the segment as their base, as a private bucket's views do
            data.append(np.ndarray(size, dtype=dtype, buffer=memory))
        per_line = _LINE // dtype.itemsize
        cuts = [min(size, -(-(size * k // self.size) // per_line) * per_line)
                for k in range(self.size + 1)]
        lo, hi = cuts[self.rank], cuts[self.rank + 1]
        self._mine = [d[lo:hi] for d in data]  # this rank's slice of every segment
        self._slice = data[self.rank][lo:hi]
        self._scratch = np.empty(hi - lo, dtype=dtype) if self.size > 2 else None
        # the ranks meet in the communicator's barrier, run at once on this thread under its
        # watchdog (the collective timeout, a departed peer), named after the all-reduce
        self._meet = comm.engine.issue
        # the bucket's buffer and views now live here (producers are offered these from now on)
        buffer = data[self.rank]
        views, start = [], 0
        for shape in bucket.shapes:
            n = math.prod(shape)
            views.append(buffer[start:start + n].reshape(shape))
            start += n
        self.buffer, self.views = buffer, views

    def allreduce(self, arrays) -> list:
        """Sum `arrays` (the bucket's members, in order) over the ranks; the reduced views."""
        views = self.views
        for a, view in zip(arrays, views):
            if a is not view:  # its producer did not write it in place
                view[...] = a
        win, meet = self._win, self._meet
        win.Sync()  # (Win_sync: this rank's stores are seen by the others after the barrier)
        meet("barrier", (), False, label="allreduce")  # every segment holds its gradients
        win.Sync()
        mine = self._mine
        if self.size == 2:
            np.add(mine[0], mine[1], out=self._slice)
            mine[1 - self.rank][...] = self._slice
        else:
            acc = self._scratch
            np.add(mine[0], mine[1], out=acc)
            for k in range(2, self.size):
                acc += mine[k]
            for part in mine:
                part[...] = acc
        win.Sync()
        meet("barrier", (), False, label="allreduce")  # every slice is summed everywhere
        win.Sync()
        return views
