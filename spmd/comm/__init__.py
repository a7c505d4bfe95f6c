"""Collectives on arrays, knowing nothing of the IR: one contract (base.Communicator: blocking
and async forms, Handles), one progress engine and one watchdog per communicator (progress.py,
nccl.py's stream engine; watchdog.py, which every wait registers with), a backend factory
(factory.py), one module per backend (mpi, nccl, local threads, staged through the host), and
topology detection."""
from .. import lazy as _lazy
from .topology import Topology, detect, launched_by_mpi, select_gpu

# the communicators (and their progress engine) are imported at their first use: `import spmd`
# reads the launcher's rank variables through topology alone
__getattr__, __dir__ = _lazy.attach(__name__, {
    "Communicator": ".base:Communicator",
    "SelfCommunicator": ".base:SelfCommunicator",
    "Handle": ".handles:Handle",
}, submodules=True)

__all__ = ["Communicator", "Handle", "SelfCommunicator", "Topology", "detect", "launched_by_mpi",
           "select_gpu"]
