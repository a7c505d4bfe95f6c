"""Collectives on arrays, knowing nothing of the IR: one contract (base.Communicator: blocking
and async forms, Handles), one progress engine and watchdog per communicator (progress.py;
nccl.py's stream engine), a backend factory (factory.py), one module per backend (mpi, nccl,
local threads, staged through the host), and topology detection."""
from .base import Communicator, SelfCommunicator
from .handles import Handle
from .topology import Topology, detect, launched_by_mpi, select_gpu

__all__ = ["Communicator", "Handle", "SelfCommunicator", "Topology", "detect", "launched_by_mpi",
           "select_gpu"]
