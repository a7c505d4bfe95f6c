"""Persistent gradient buckets for fused all-reduce, and the buffers of flat all-gathers.

Each fused c_allreduce_sum of a plan gets one flat buffer, allocated on first use and reused
every step, with a view per gradient. The kernel that produces a gradient last is offered its
view as an `out=` buffer (its KernelContext's `out(xp, slot)`); kernels that can write there
(mul_grad's weight gradient: almost all the bytes of an MLP) save the packing copy. The views
are valid until the same plan's next run, so fetched gradients are copied out.

Each c_allgather_flat (Reduce mode over flat sections, passes/reduce_flat.py) gets a
GatherBuffer: the buffer its step gathers into, whose views become the parameters. The update
op that writes an owned piece last (sgd's ParamOut) is offered that piece's place in it, so
the owner's new values need no packing copy.

Which collective each kind serves, and how it reads that op, is the kind's own declaration
(`@serves(op type)` and its `for_op`), in one table: attach_buckets asks the table, so a new
kind of bucket is one class here and nothing in the loop.
"""
from __future__ import annotations

import functools
import math
import sys
import threading

import numpy as np

from ..ops.registry import get_op_def

_KINDS: dict[str, type] = {}  # op type -> the bucket kind serving it (@serves)


def serves(op_type: str):
    """Class decorator: the kind serves `op_type`'s steps (its `for_op` says which of them,
    and reads their attributes); one kind per op type."""
    def register(kind):
        if op_type in _KINDS:
            raise ValueError(f"{op_type} is served by {_KINDS[op_type].__name__} already; "
                             f"{kind.__name__} cannot serve it too")
        _KINDS[op_type] = kind
        kind.op_type = op_type
        return kind
    return register


def _known(block, names) -> bool:
    """Whether every variable of `names` has a fully known shape."""
    return all(n in block.vars and all(d >= 0 for d in block.vars[n].shape) for n in names)


@serves("c_allreduce_sum")
class Bucket:
    """A fused all-reduce's gradients in one flat buffer (its outputs are the bucket's views
    until written again: `outputs_are_views`)."""

    outputs_are_views = True

    @classmethod
    def for_op(cls, op, block, ctx, ordinal: int):
        """The bucket of a fused all-reduce (two or more gradients of known shapes), else
        None."""
        names = op.input("X")
        if len(names) < 2 or not _known(block, names):
            return None
        return cls([tuple(block.vars[n].shape) for n in names], block.vars[names[0]].dtype,
                   ordinal)

    def __init__(self, shapes: list[tuple], dtype: str, ordinal: int = 0):
        """`ordinal`: its place among its plan's buckets (the shared windows it may get are
        kept by it: executor/shared_bucket.py)."""
        self.shapes, self.dtype, self.ordinal = shapes, dtype, ordinal
        self._xp = None
        self.buffer = None
        self.views: list = []
        self._lock = threading.Lock()  # producers may ask at once (ExecutionStrategy.num_threads)
        self.shared = None  # shared_bucket.SharedSegment, False (stays private), None: not asked

    def get(self, xp):
        if self._xp is not xp:
            with self._lock:
                if self._xp is not xp:
                    self._make(xp)
        return self.buffer, self.views

    def _make(self, xp):
        buffer = xp.empty(sum(math.prod(s) for s in self.shapes), dtype=self.dtype)
        self.buffer, self.views = buffer, self.views_over(buffer)
        self._xp = xp  # last: a caller seeing it sees the buffer and views made with it

    def views_over(self, buffer) -> list:
        """Views of flat `buffer`, one per member, laid end to end from its start (the private
        buffer's, or a shared window's: executor/shared_bucket.py)."""
        views, start = [], 0
        for shape in self.shapes:
            n = math.prod(shape)
            views.append(buffer[start:start + n].reshape(shape))
            start += n
        return views

    def view(self, index: int):
        return lambda xp: self.get(xp)[1][index]

    @property
    def array_module(self):
        """numpy or cupy, once the buffer is made; None before."""
        return self._xp

    def sum_across(self, comm, arrays):
        """The sum of `arrays` (this bucket's members) over `comm`'s ranks through node-shared
        memory (executor/shared_bucket.py), as its reduced views; None where the bucket cannot
        be shared (the communicator reduces it then). Collective: every rank calls it at the
        same all-reduce; the first call decides, on every rank alike."""
        shared = self.shared
        if shared is None:
            from .shared_bucket import share

            with self._lock:
                shared = self.shared = share(self, comm)
                if shared:  # the buffer and views are the shared segment's from now on
                    self.buffer, self.views, self._xp = shared.buffer, shared.views, np
        if shared is False:
            return None
        return shared.allreduce(arrays)


class KeptOutputs:
    """The outputs a flat reduce-scatter summed in node-shared memory hands on, kept for each
    of the two result arrays it sums into in turn (kernels/collective.py
    c_reduce_scatter_owned, _keep_outputs):
    `entries`, (result, the inputs its passed-through pieces are cut from, outputs) each;
    `older`, the entry a new result replaces. (The kept views refer to their result, so an
    update never spends one, inplace.Spend: sgd writes its handed piece of the all-gather's
    buffer then, and spending would gain nothing.)"""

    __slots__ = ("entries", "older")

    def __init__(self):
        self.entries = [(None, (), None), (None, (), None)]
        self.older = 0


@serves("c_reduce_scatter_owned")
class SectionsBucket(Bucket):
    """A flat reduce-scatter's send buffer (passes/reduce_flat.py): its inputs end to end,
    padded to nranks equal sections. Its outputs are this rank's sections, not its views
    (summed in node-shared memory, views kept in `kept` from step to step)."""

    outputs_are_views = False

    def __init__(self, shapes: list[tuple], dtype: str, ordinal: int = 0):
        super().__init__(shapes, dtype, ordinal)
        self.kept = KeptOutputs()

    @classmethod
    def for_op(cls, op, block, ctx, ordinal: int):
        """The send buffer of a flat reduce-scatter (`flat`, inputs of known shapes), else
        None (a row-chunked one packs its pieces itself)."""
        names = op.input("X")
        if not op.attrs.get("flat") or not _known(block, names):
            return None
        shapes = [tuple(block.vars[n].shape) for n in names]
        total = sum(math.prod(shape) for shape in shapes)
        nranks = op.attrs["nranks"]
        shapes.append((-(-total // nranks) * nranks - total,))  # the padding
        return cls(shapes, block.vars[names[0]].dtype, ordinal)

    def sum_section(self, comm, arrays):
        """This rank's section of the sum over `comm`'s ranks of `arrays` (this bucket's
        members: a flat reduce-scatter's send buffer, padded to equal sections) through
        node-shared memory (executor/shared_bucket.py), a fresh array; None where the bucket
        cannot be shared. Collective as sum_across."""
        shared = self.shared
        if shared is None:
            from .shared_bucket import share_sections

            with self._lock:
                shared = self.shared = share_sections(self, comm)
                if shared:
                    self.buffer, self.views, self._xp = shared.buffer, shared.views, np
        if shared is False:
            return None
        return shared.reduce_scatter(arrays, self)

    def get(self, xp):
        shared = self.shared
        if shared:  # the window of this step's turn, which the plans of its shape share
            return shared.current()
        return super().get(xp)


class _Alone:
    __slots__ = ("spare",)


def _references(holder) -> int:
    return sys.getrefcount(holder.spare)


# what _references counts for an array nothing but its holder refers to (calibrated, not
# assumed: the count an access adds differs between Python versions)
_probe = _Alone()
_probe.spare = object()
_ALONE = _references(_probe)
del _probe


@serves("c_allgather_flat")
class GatherBuffer:
    """The buffer one c_allgather_flat gathers into, (nranks, section), chosen once per step:
    the parameters become views of it, so it is never the one the step before filled (the
    update ops read those parameters while writing their new pieces here). The one before
    that is used again when nothing else refers to it any more, numpy arrays only (a view's
    `base` keeps it alive, so a caller still holding parameters it took from the scope with
    numpy.asarray keeps it from being reused: they never change under later steps);
    otherwise the step gets a new buffer. Reusing spares the first touch of new memory.

    `piece(xp, i)`: where this rank's piece i goes in the step's buffer, shaped as the piece
    (None for a piece another rank owns); the all-gather kernel skips the copy of a piece its
    producer wrote there (`handed`, a list by piece index: the kernel reads it by
    subscript, no call per piece). `gather_across(...)`: the step's all-gather, which also
    ends the step (the next one's node-shared block, if the ranks agreed on one, is chosen
    there; else the next step chooses on first use)."""

    __slots__ = ("spare", "sizes", "shapes", "owners", "dtype", "_ctx", "_layout",
                 "current", "handed", "previous", "_lock", "shared", "ordinal", "block",
                 "was_block", "_pieces", "_reshaped", "claimed_at")

    outputs_are_views = False  # (the parameters are, but nothing spends them as gradients)

    @classmethod
    def for_op(cls, op, block, ctx, ordinal: int):
        """The buffer of a flat all-gather (pieces of known shapes), else None."""
        names = op.input("X")
        if not names or not _known(block, names):
            return None
        return cls([tuple(block.vars[n].shape) for n in names], op.attrs["owners"],
                   block.vars[names[0]].dtype, ctx, ordinal)

    def __init__(self, shapes: list[tuple], owners: list[int], dtype, ctx, ordinal: int = 0):
        """`ctx`: the all-gather's KernelContext (its communicator gives the rank); `ordinal`:
        its place among its plan's buffers, as Bucket's."""
        self.ordinal = ordinal
        self.shapes, self.owners, self.dtype = shapes, list(owners), dtype
        self.sizes = [math.prod(s) for s in shapes]
        self._reshaped = [None if len(s) == 1 else s for s in shapes]
        self._ctx = ctx
        self._layout = None  # (rank, nranks, offsets, section)
        self.current = None
        self._pieces = len(shapes)
        self.handed: list = [None] * self._pieces  # piece index -> its view handed out
        self.previous = None
        self.spare = None
        self._lock = threading.Lock()  # update ops may ask at once (ExecutionStrategy.num_threads)
        self.shared = None  # shared_bucket.SharedParams, False (MPI gathers), None: not asked
        self.block = None  # this step's shared block (current), or None: a private buffer
        self.was_block = False  # whether `previous` is a shared block
        self.claimed_at = -1  # the meeting count when `block` was agreed

    def layout(self):
        """(rank, nranks, offset of each piece within its owner's section, section size)."""
        if self._layout is None:
            from ..kernels.collective import flat_sections

            comm = self._ctx.comm
            offsets, section = flat_sections(self.sizes, self.owners, comm.size)
            self._layout = (comm.rank, comm.size, offsets, section)
        return self._layout

    def buffer(self, xp):
        """This step's buffer (chosen here, once a step: no frame of its own for the choice)."""
        if self.current is None:
            with self._lock:
                if self.current is None:
                    # (a node-shared block the ranks agreed on is chosen already, by the
                    # step before: gather_across)
                    _, nranks, _, section = self._layout or self.layout()
                    # (no local name for the spare: it would count as one more reference)
                    if (self.spare is not None and xp is np
                            and self.spare.shape == (nranks, section)
                            and _references(self) == _ALONE):
                        self.current = self.spare
                    else:
                        self.current = xp.empty((nranks, section), dtype=self.dtype)
                    self.spare = None
        return self.current

    def piece(self, xp, i: int):
        rank, _, offsets, _ = self._layout or self.layout()  # (made once: no call after)
        if self.owners[i] != rank:
            return None
        if self.block is not None and self.shared.rotation.meetings != self.claimed_at:
            self.drop_stale_block()
        current = self.current if self.current is not None else self.buffer(xp)
        view = current[rank, offsets[i]:offsets[i] + self.sizes[i]]
        shape = self._reshaped[i]  # (None: a 1-D piece is the slice itself, no reshape call)
        if shape is not None:
            view = view.reshape(shape)
        self.handed[i] = view
        return view

    def view(self, index: int):
        return functools.partial(self.piece, i=index)  # (no frame of its own per call)

    def gather_across(self, comm, mine, gathered):
        """`gathered` (nranks, section) with every rank's section, where it is this step's
        node-shared block (executor/shared_bucket.py: the owners wrote their sections into it,
        `mine` being this rank's, and the ranks met); None where it is a private buffer (the
        communicator gathers then: the first step, a block someone still refers to, or no
        sharing). Either way the step is done with this buffer after it; where the ranks
        agreed on the next step's block at this meeting, it is the next step's buffer from
        now. Collective: the first call decides, on every rank alike."""
        shared = self.shared
        if shared is None:
            from .shared_bucket import share_gather

            # (a device array is never shared: the same kind on every rank)
            shared = self.shared = isinstance(gathered, np.ndarray) and share_gather(
                gathered.shape[1], gathered.dtype, comm, self.ordinal)
        every = nxt = None
        if shared is not False:
            in_block = self.block is not None and gathered is self.block
            nxt, every_in = shared.meet(in_block)  # the next step's block, or None
            if every_in:
                every = gathered
            elif in_block:  # another rank wrote elsewhere: gathered by the communicator into
                # a private array, so that no rank writes the shared block the others map
                every = comm.iallgather(mine.copy(), overlap=False).wait()
            # (else the communicator gathers into `gathered`, private, now)
        # the step is done with its buffer (here, not in a method: no frame a step). A device
        # array is never used again (its pool makes new ones cheap), nor a shared block (the
        # ranks agree when one is written): not kept as the spare
        previous = self.previous
        spare = previous if type(previous) is np.ndarray and not self.was_block else None
        self.was_block = self.block is not None
        self.spare, self.previous, self.current = spare, self.current, None
        self.block = None
        self.handed = [None] * self._pieces
        if nxt is not None:  # the next step's buffer, chosen now (the updates then find it)
            self.current = self.block = nxt
            self.claimed_at = shared.rotation.meetings
            self.spare = None
        return every

    def drop_stale_block(self) -> None:
        """Called where `block` was agreed before the last meeting (shared.rotation.meetings
        != claimed_at): a block agreed at a meeting is for the step right after it, and where
        another plan of this shape ran that step (ranks fetching different things compile
        several), the block may hold that step's parameters now: this step takes a private
        buffer."""
        self.current = self.block = None


def attach_buckets(steps, block):
    """Give every step a bucket kind serves (@serves: a fused c_allreduce_sum's Bucket, a flat
    c_reduce_scatter_owned's SectionsBucket, a c_allgather_flat's GatherBuffer) the bucket its
    `for_op` makes, and the last writer of each of its inputs (a single-variable output slot)
    that input's view as its `out=` buffer."""
    last_writer: dict[str, tuple] = {}
    reduced_into: dict[str, Bucket] = {}  # a fused all-reduce's output -> its bucket
    ordinal = 0  # buckets and gather buffers made so far

    def offer(names, make_view):
        for i, n in enumerate(names):
            writer = last_writer.get(n)
            if writer is not None:
                producer, slot = writer
                producer.ctx.outputs[slot] = make_view(i)

    for step in steps:
        _, op = step.where
        kind = _KINDS.get(op.type)
        made = kind.for_op(op, block, step.ctx, ordinal) if kind is not None else None
        if made is not None:
            ordinal += 1
            step.ctx.bucket = made
            offer(op.input("X"), made.view)
        for spend in step.spends:  # an update may write over its view (inplace.Spend)
            spend.bucket = reduced_into.get(spend.name)
        passes_through = get_op_def(op.type).passes_inputs_through
        for slot, names_, dup in step.outs:
            for n in names_:
                last_writer[n] = None if dup or len(names_) > 1 else (step, slot)
                if not passes_through:  # (a wait op's output is its input)
                    reduced_into.pop(n, None)  # written again: no longer the bucket's view
        if made is not None and made.outputs_are_views:
            reduced_into.update((n, step.ctx.bucket) for n in op.output("Out"))
