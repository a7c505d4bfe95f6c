"""The communicators of a data-parallel job's places: one per place (in-process group,
hierarchical across processes), the one Reduce-mode state is assembled on, and their end."""
from __future__ import annotations

from ..comm.factory import create_communicator, node_world_communicator, world_communicator
from ..comm.local import LocalGroup


def place_communicators(topology, places, strategy) -> tuple:
    """(the in-process group of places or None, one communicator per place, the allreduce
    layout). Across processes: the world communicator, or with use_hierarchical_allreduce
    the one whose allreduce goes by nodes (comm/hierarchy.py; the layout says how)."""
    nplaces, place = len(places), places[0]
    device = place.device_id if place.is_gpu else None
    # the cross-process communicator is made here, on the main thread, once
    outer = None
    if topology.size > 1:
        outer = (node_world_communicator(strategy.hierarchical_allreduce_inter_nranks, device)
                 if strategy.use_hierarchical_allreduce else world_communicator(device))
    layout = getattr(outer, "layout", None)
    if nplaces == 1:
        return None, [outer if outer is not None else create_communicator("self")], layout
    group = LocalGroup(nplaces)
    comms = [create_communicator("local", group=group, index=i) for i in range(nplaces)]
    if outer is not None:
        comms = [create_communicator("hierarchical", local=c, outer=outer) for c in comms]
    return group, comms, layout


def state_communicator(topology):
    """A communicator of its own for assembling Reduce-mode state (made now: duplicating one
    is collective), so its broadcasts never pair with a training step's collectives."""
    if topology.size == 1:
        return None
    from ..comm.mpi import MPICommunicator, world

    return MPICommunicator(world().Dup())


def shut_down(pool, comms) -> None:
    """The end of a job: its place threads and the communicators it made."""
    if pool is not None:
        pool.shutdown(wait=False)
    for comm in comms:
        comm.close()
