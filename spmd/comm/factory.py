"""Making communicators: `create_communicator(kind, ...)` for any registered backend, and
`world_communicator(device_id)`, the process's one communicator over every process of the job
(the nccl2-mode world), made on first use and shared by every program of the process; and
`node_world_communicator(inter_nranks)`, the same world with a hierarchical allreduce.

>>> create_communicator("self").size
1
"""
from __future__ import annotations

import threading
from importlib import import_module

from ..flags import flags
from .base import BACKENDS, Communicator, SelfCommunicator

# backend -> the module that registers it, imported at the first communicator of that kind
# (a single-process or MPI-only job loads neither NCCL's module nor the thread backends);
# tests/unit/test_imports.py checks the table against the registrations
BACKEND_MODULES = {
    "mpi": ".mpi", "mpi_persistent": ".mpi_persistent", "nccl": ".nccl", "local": ".local",
    "hierarchical": ".local", "node_hierarchical": ".hierarchy", "staged": ".staged",
}


def create_communicator(kind: str, **options) -> Communicator:
    """A communicator of backend `kind` ("self", "mpi", "nccl", "local", "hierarchical",
    "node_hierarchical", "staged", or one registered since); `options` are that backend's
    constructor's."""
    cls = BACKENDS.get(kind)
    if cls is None:
        for module in ([BACKEND_MODULES[kind]] if kind in BACKEND_MODULES else
                       sorted(set(BACKEND_MODULES.values()))):  # all: the error lists them
            import_module(module, __package__)
        cls = BACKENDS.get(kind)
    if cls is None:
        from ..errors import NotFoundError

        raise NotFoundError(
            f"no communicator backend '{kind}'; registered: {sorted(BACKENDS)}")
    return cls(**options)


_world: dict = {}
_world_lock = threading.Lock()


def world_communicator(device_id: int | None = None) -> Communicator:
    """The communicator over all processes for host arrays (device_id None: MPI) or for GPU
    `device_id` (NCCL; MPI staged through the host when ranks share a GPU); a world of one
    when the process was not launched by MPI."""
    key = "cpu" if device_id is None else device_id
    # made once even when several place threads reach it together: making an MPI
    # communicator is itself a collective, and two at once would cross their messages
    with _world_lock:
        comm = _world.get(key)
        if comm is None:
            comm = _world[key] = _make_world(device_id)
    return comm


def node_world_communicator(inter_nranks: int = 0, device_id: int | None = None
                            ) -> Communicator:
    """The world communicator whose allreduce is hierarchical (BuildStrategy.
    use_hierarchical_allreduce): `inter_nranks` processes per node, or 0 for SPMD_NODE_SIZE,
    else MPI's shared-memory nodes (hierarchy.node_size_for checks them). Made once per node
    layout, on first use (splitting it is collective), and shared like world_communicator;
    its `layout` says whether an allreduce takes the three stages.

    GPU arrays (`device_id`) are refused where the layout is hierarchical: the hierarchical
    allreduce is MPI's, on host arrays, and NCCL's own allreduce already works by levels
    (within a node over NVLink/PCIe, then across nodes); the flat world communicator serves
    a layout that is not.
    """
    from .hierarchy import node_size_for
    from .topology import detect

    topology = detect()
    if topology.size == 1:
        return world_communicator(device_id)
    node_size, source = node_size_for(inter_nranks, topology.size, topology.rank,
                                      flags().node_size)
    key = ("nodes", node_size, source)
    with _world_lock:
        comm = _world.get(key)
        if comm is None:
            comm = _world[key] = create_communicator("node_hierarchical", node_size=node_size,
                                                     source=source)
    if device_id is None:
        return comm
    if comm.layout.hierarchical:  # the same answer on every rank: each raises alike
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"{topology.tag()} BuildStrategy.use_hierarchical_allreduce on GPU ("
            f"{comm.layout.describe()}): spmd's hierarchical allreduce runs over MPI on host "
            f"arrays only; GPU gradients go through NCCL, whose own allreduce already works "
            f"by levels (rings and trees within a node over NVLink/PCIe, then across nodes). "
            f"Set use_hierarchical_allreduce=False for GPU places (the numbers are the same)")
    return world_communicator(device_id)


def is_world_communicator(comm) -> bool:
    """Whether `comm` is one of the process's shared world communicators (nobody closes
    them: other programs' steps may be using them)."""
    return any(comm is world for world in _world.values())


def _make_world(device_id: int | None) -> Communicator:
    from .topology import detect

    if detect().size == 1:
        return SelfCommunicator()
    if device_id is None:
        world = create_communicator(flags().host_comm)
        world.track_arrivals()
        return world
    world = create_communicator("mpi")
    if _gpus_shared(device_id, world):
        world.track_arrivals()
        return create_communicator("staged", mpi=world)
    return create_communicator("nccl", device_id=device_id, mpi_comm=world)


def _gpus_shared(device_id: int, world) -> bool:
    """NCCL needs one rank per GPU: when two ranks of a node use the same device (by PCI bus
    id, so per-rank CUDA_VISIBLE_DEVICES count right), or SPMD_GPU_COMM=mpi, GPU arrays go
    through MPI, staged in host memory. Decided for the whole job at once."""
    import cupy

    from .topology import same_key_on_a_node

    # the flag goes into the collective too: every rank takes the same path whatever it sees
    return same_key_on_a_node(world.comm, cupy.cuda.runtime.deviceGetPCIBusId(device_id),
                              force=flags().gpu_comm == "mpi")
