"""Collectives on arrays, knowing nothing of the IR: one interface (base.Communicator), one
module per backend (mpi, nccl, local threads), and topology detection."""
from .base import Communicator, SelfCommunicator
from .topology import Topology, detect, launched_by_mpi, select_gpu

__all__ = ["Communicator", "SelfCommunicator", "Topology", "detect", "launched_by_mpi",
           "select_gpu"]
