"""fluid.transpiler.ps_dispatcher: PSDispatcher and its two policies, RoundRobin and HashName
(which pserver holds each parameter block)."""
from ...ps.slicing import HashName, PSDispatcher, RoundRobin

__all__ = ["HashName", "PSDispatcher", "RoundRobin"]
