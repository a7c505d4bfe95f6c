"""Hierarchical allreduce over MPI (fluid's BuildStrategy.use_hierarchical_allreduce): the
processes are grouped into nodes, and an allreduce reduces within each node into the node's
leader (its first process), allreduces across the node leaders, and broadcasts within each
node. Every other collective is the flat one, on a communicator of its own.

Which processes share a node (`node_size_for`), first that applies:

1. BuildStrategy.hierarchical_allreduce_inter_nranks = k > 1: k processes per node,
   consecutive ranks (fluid's meaning: "inter" is within a node; fluid groups ranks so, and
   paddle-launch numbers them so: rank = node index * nproc_per_node + local rank);
2. SPMD_NODE_SIZE = k: the same, from the environment (to simulate nodes on one machine:
   `SPMD_NODE_SIZE=2 mpiexec -n 4` is 2 nodes of 2);
3. otherwise MPI's own shared-memory nodes (MPI_COMM_TYPE_SHARED): the real node locality,
   whatever order the launcher placed the ranks in, nodes of unequal sizes included.

The two sub-communicators (within the node; across the leaders) are split once, when the
communicator is made, never per step. Async allreduces run on this communicator's progress
engine (a thread, progress.py) as the flat ones do, so the three stages overlap the rest of
the backward pass where the flat allreduce does; the watchdog (which watches every stage's
waits) and the arrival board (which ranks never came) are the flat communicator's.

Summation order: each node's sum first (MPI_Reduce's order), then across the nodes
(MPI_Allreduce's order), where the flat allreduce sums in its own algorithm's order. Integer
sums, max, min and sums of exactly representable values are bitwise the flat ones; a float
sum may differ in its last bits (about log2(size) ulps of the largest partial sum). With two
processes per node and two nodes the result is bitwise (x0 + x1) + (x2 + x3), whatever the
message size (a sum of two values does not depend on their order).

>>> node_size_for(2, size=4)
(2, 'BuildStrategy.hierarchical_allreduce_inter_nranks=2')
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from .base import Communicator, check_reduction, register_backend
from .mpi import MPICommunicator, _check_contiguous, world
from .mpi_persistent import PersistentMPICommunicator

FIELD = "BuildStrategy.hierarchical_allreduce_inter_nranks"
SHARED = "MPI's shared-memory nodes (MPI_COMM_TYPE_SHARED)"


@dataclass(frozen=True)
class NodeLayout:
    """Where this process sits among the nodes of a hierarchical allreduce.

    >>> layout = NodeLayout(rank=2, size=4, node=1, nodes=2, local_rank=0, node_size=2,
    ...                     largest=2, source="SPMD_NODE_SIZE=2")
    >>> layout.hierarchical, layout.leader
    (True, True)
    """

    rank: int
    size: int
    node: int  # this process's node, 0 .. nodes - 1 (in the order of the nodes' first ranks)
    nodes: int
    local_rank: int  # within its node; 0 is the node's leader
    node_size: int  # processes on this process's node
    largest: int  # processes on the largest node
    source: str  # where the node size came from

    @property
    def hierarchical(self) -> bool:
        """Whether an allreduce takes the three stages: several nodes, and a node of several
        processes (otherwise the hierarchy is the flat allreduce, which runs instead)."""
        return self.nodes > 1 and self.largest > 1

    @property
    def leader(self) -> bool:
        return self.local_rank == 0

    def describe(self) -> str:
        """One line: the nodes, where they came from, and the path an allreduce takes."""
        equal = self.nodes * self.largest == self.size
        shape = (f"{self.nodes} node(s) of {self.largest}" if equal
                 else f"{self.nodes} nodes of up to {self.largest}")
        if self.hierarchical:
            path = ("hierarchical allreduce (reduce within each node, allreduce across the "
                    "node leaders, broadcast within each node)")
        else:
            why = "one node" if self.nodes == 1 else "one process per node"
            path = f"flat allreduce ({why}: the hierarchy would be the flat allreduce)"
        return f"{self.size} processes as {shape}, from {self.source}: {path}"


def _divisors(size: int) -> list[int]:
    return [d for d in range(2, size + 1) if size % d == 0]


def node_size_for(inter_nranks, size: int, rank: int = 0, env_node_size: int = 0
                  ) -> tuple[int, str]:
    """(processes per node, where that comes from) for a hierarchical allreduce over `size`
    processes: `inter_nranks` (BuildStrategy.hierarchical_allreduce_inter_nranks) when > 0,
    else `env_node_size` (SPMD_NODE_SIZE) when > 0, else 0: MPI's shared-memory nodes. A
    value that cannot describe the job is an InvalidArgumentError saying what to set.

    >>> node_size_for(0, size=4, env_node_size=2)
    (2, 'SPMD_NODE_SIZE=2')
    >>> node_size_for(0, size=4)[0]
    0
    """
    tag = f"[rank {rank}/{size}]"
    divisors = _divisors(size)
    if isinstance(inter_nranks, bool) or not isinstance(inter_nranks, (int, np.integer)) \
            or inter_nranks < 0:
        raise InvalidArgumentError(
            f"{tag} {FIELD}={inter_nranks!r}: expected the number of processes per node, an "
            f"integer > 1 dividing the {size} processes ({divisors}), or 0 to find the nodes "
            f"(SPMD_NODE_SIZE, else MPI's shared-memory nodes); got {inter_nranks!r}")
    if inter_nranks == 1:
        raise InvalidArgumentError(
            f"{tag} {FIELD}=1: expected more than 1 process per node (as fluid requires): it "
            f"counts the processes within one node (fluid's 'inter'), not the nodes. With one "
            f"process per node the hierarchical allreduce is the flat one: set "
            f"use_hierarchical_allreduce=False, or set {FIELD} to the processes per node "
            f"({divisors}), or 0 to find the nodes")
    if inter_nranks > 1:
        _check_divides(inter_nranks, size, divisors, f"{tag} {FIELD}={inter_nranks}",
                       f"set {FIELD} to one of those")
        return int(inter_nranks), f"{FIELD}={inter_nranks}"
    if env_node_size > 0:
        _check_divides(env_node_size, size, divisors, f"{tag} SPMD_NODE_SIZE={env_node_size}",
                       "set SPMD_NODE_SIZE to one of those (or unset it: MPI's shared-memory "
                       "nodes)")
        return int(env_node_size), f"SPMD_NODE_SIZE={env_node_size}"
    return 0, SHARED


def _check_divides(node_size: int, size: int, divisors: list[int], what: str, fix: str):
    if size % node_size == 0:
        return
    more = " (more than the job has)" if node_size > size else ""
    raise InvalidArgumentError(
        f"{what}: {node_size} processes per node{more} do not divide the {size} processes of "
        f"the job into equal nodes (fluid: the number of trainers must be divisible by it): "
        f"expected one of {divisors}, got {node_size}; launch a multiple of {node_size} "
        f"processes or {fix}")


class _Stage:
    """A sub-communicator of the hierarchy: its errors name the process's world rank and the
    stage, not its rank within the sub-communicator."""

    label = ""
    whole = None  # the flat communicator, whose arrival board counts the whole allreduce

    def describe(self) -> str:
        return self.label

    def missing(self) -> str:
        return self.whole.missing() if self.whole is not None else ""

    def _enter(self, op: str) -> None:
        """Nothing: the whole allreduce counts once, on the flat communicator (its arrival
        board, spmd.guard's count of collectives), and alike on every rank, though a leader
        runs one stage more than the others."""


class _StageMPI(_Stage, MPICommunicator):
    pass


class _StagePersistentMPI(_Stage, PersistentMPICommunicator):
    pass


_FLAT = {"mpi": MPICommunicator, "mpi_persistent": PersistentMPICommunicator}
_STAGE = {"mpi": _StageMPI, "mpi_persistent": _StagePersistentMPI}


@register_backend("node_hierarchical")
class NodeHierarchicalCommunicator(Communicator):
    """Every process of `comm` (a duplicate of COMM_WORLD by default), with a hierarchical
    allreduce over nodes of `node_size` consecutive ranks (0: MPI's shared-memory nodes).
    Making it is collective: every process makes it, together, with the same node size.

    `layout` says where this process sits and whether an allreduce takes the three stages
    (`layout.hierarchical`); `hierarchical_allreduces` counts the allreduces that did.

    >>> # comm = create_communicator("node_hierarchical", node_size=2)   # under mpiexec -n 4
    >>> # comm.layout.hierarchical, comm.allreduce(np.ones(3))            # (True, [4. 4. 4.])
    """

    def __init__(self, node_size: int = 0, source: str = "", comm=None,
                 timeout_s: float | None = None, kind: str | None = None):
        """`kind`: the MPI backend of every part, "mpi" or "mpi_persistent" (default:
        SPMD_HOST_COMM's)."""
        from ..flags import flags

        kind = kind or flags().host_comm
        if comm is None:
            comm = world().Dup()  # a context of its own: its messages never cross another's
        self.flat = _FLAT[kind](comm, timeout_s, track_arrivals=True)
        self.rank, self.size = self.flat.rank, self.flat.size
        source = source or (SHARED if not node_size else f"{node_size} processes per node")
        self._agree(node_size, source)
        intra, self.layout = _split(comm, node_size, source)
        layout, tag = self.layout, self.describe()
        self.intra = _STAGE[kind](intra)
        self.intra.watch_with(self.flat.watchdog)  # one watchdog: the whole communicator's
        self.intra.whole = self.flat
        self.intra.label = (f"{tag} (within node {layout.node}: its process "
                            f"{layout.local_rank}/{layout.node_size})")
        from mpi4py import MPI

        inter = comm.Split(0 if layout.leader else MPI.UNDEFINED, key=self.rank)
        self.inter = None
        if inter != MPI.COMM_NULL:
            self.inter = _STAGE[kind](inter)
            self.inter.watch_with(self.flat.watchdog)
            self.inter.whole = self.flat
            self.inter.label = f"{tag} (across the node leaders: leader of node {layout.node})"
        self.hierarchical_allreduces = 0

    def _agree(self, node_size: int, source: str) -> None:
        """Every process asks for the same node size (SPMD_NODE_SIZE may differ between
        processes): one answer for the job, every process raising alike if not. Under the
        collective timeout, so a process that never makes this communicator fails the others
        instead of leaving them in the splits that follow."""
        seen = np.array([node_size, -node_size], dtype=np.int64)
        self.flat.allreduce(seen, "max")
        if seen[0] != -seen[1]:
            raise InvalidArgumentError(
                f"{self.describe()} the processes ask for different node sizes for the "
                f"hierarchical allreduce: from {-seen[1]} to {seen[0]} processes per node (0: "
                f"MPI's shared-memory nodes); here {node_size}, from {source}. Set "
                f"SPMD_NODE_SIZE alike on every process, or set {FIELD}")

    # -- the allreduce -----------------------------------------------------------------------
    def _three_stages(self, reduce, across, broadcast, array, reduction: str = "sum"):
        _check_contiguous(array, "allreduce")
        check_reduction(reduction)
        self.flat.arrive("allreduce")
        if self.intra.size > 1:
            reduce(array, 0, reduction)
        if across is not None:
            across(array, reduction)
        if self.intra.size > 1:
            broadcast(array, 0)
        self.hierarchical_allreduces += 1
        return array

    def allreduce(self, array, reduction: str = "sum"):
        if not self.layout.hierarchical:
            return self.flat.allreduce(array, reduction)
        across = self.inter.allreduce if self.inter is not None else None
        return self._three_stages(self.intra.reduce, across, self.intra.broadcast, array,
                                  reduction)

    def untimed(self, op: str):
        """The progress engine's calls: the three stages with each part's fastest blocking
        calls for an allreduce, the flat communicator's for the rest."""
        if op != "allreduce" or not self.layout.hierarchical:
            return self.flat.untimed(op)
        across = self.inter.untimed("allreduce") if self.inter is not None else None
        return functools.partial(self._three_stages, self.intra.untimed("reduce"), across,
                                 self.intra.untimed("broadcast"))

    # -- every other collective: the flat one ------------------------------------------------
    def reduce(self, array, root: int, reduction: str = "sum"):
        return self.flat.reduce(array, root, reduction)

    def broadcast(self, array, root: int):
        return self.flat.broadcast(array, root)

    def allgather(self, array, out=None):
        return self.flat.allgather(array, out)

    def reduce_scatter(self, array):
        return self.flat.reduce_scatter(array)

    def barrier(self):
        self.flat.barrier()

    def missing(self) -> str:
        return self.flat.missing()

    def make_watchdog(self):
        """The flat communicator's: it watches every stage's waits, and the engine's."""
        return self.flat.watchdog


def _split(comm, node_size: int, source: str):
    """(the mpi4py communicator of this process's node, its NodeLayout): nodes of `node_size`
    consecutive ranks, or MPI's shared-memory nodes for 0. Collective over `comm`."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    if node_size:
        node, local = divmod(rank, node_size)
        intra = comm.Split(node, key=rank)
        return intra, NodeLayout(rank, size, node, size // node_size, local, node_size,
                                 node_size, source)
    intra = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    local, local_size = intra.Get_rank(), intra.Get_size()
    leaders = np.empty(size, dtype=np.int64)  # 1 where a rank leads its node
    comm.Allgather(np.array([int(local == 0)], dtype=np.int64), leaders)
    first = np.array([rank], dtype=np.int64)
    intra.Bcast(first, root=0)  # the world rank of this node's leader
    largest = np.array([local_size], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, largest, op=MPI.MAX)
    node = int(leaders[:int(first[0])].sum())
    return intra, NodeLayout(rank, size, node, int(leaders.sum()), local, local_size,
                             int(largest[0]), source)
