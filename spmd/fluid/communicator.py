"""fluid.communicator: Communicator(program, mode, kwargs, envs), the trainer's background
sender of fluid's async / half-async / geo parameter-server modes. In spmd the transpiled
trainer program sends and receives inside each run (its send / recv ops, spmd/ps), and Geo-SGD
pushes through spmd/ps/geo_trainer.py, so there is no background thread: start / stop /
is_running record the state, and a program that is not a transpiled trainer is refused.

>>> # comm = Communicator(trainer_program, DistributedMode.ASYNC); comm.start(); ...
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .transpiler.distribute_transpiler import DistributedMode  # noqa: F401 - programs import it here

__all__ = ["Communicator"]  # fluid 1.8's (its DistributedMode is an import, as here)


class Communicator:
    def __init__(self, program, mode=None, kwargs=None, envs=None):
        ops = {op.type for op in program.global_block().ops}
        if not ops & {"send", "recv", "geo_send", "distributed_lookup_table"}:
            raise InvalidArgumentError(
                "Communicator: the program has no send/recv ops; pass the trainer program of "
                "a parameter-server transpile (DistributeTranspiler.get_trainer_program())")
        self.program, self.mode = program, mode
        self.kwargs, self.envs = dict(kwargs or {}), dict(envs or {})
        self._running = False

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        self._running = False

    def is_running(self) -> bool:
        return self._running
