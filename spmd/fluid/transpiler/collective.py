"""fluid.transpiler.collective: fluid 1.8's collective transpilers, which rewrite a program for
data parallelism with explicit communication ops instead of CompiledProgram:

- GradAllReduce: every parameter's gradient is summed over the trainers (c_allreduce_sum)
  before the optimizer runs, the loss gradient scaled by 1 / trainers;
- LocalSGD: every trainer steps on its own gradients, then the parameters are averaged over
  the trainers (through a snapshot of the parameters before the step).

Both init the communicator in the startup program (c_comm_init, as the nccl2 transpiler does)
and broadcast trainer 0's initial parameters. The ops run on spmd's communicator (MPI, or NCCL
on GPUs).

>>> # t = GradAllReduce(); t.transpile(startup, main, rank=0, endpoints="ip0:6170,ip1:6170",
>>> #                                  current_endpoint="ip0:6170", wait_port=False)
"""
from __future__ import annotations

import abc

from ...core.operator import OpRole
from ...errors import InvalidArgumentError
from ...passes.comm_init import append_comm_init

__all__ = ["Collective", "GradAllReduce", "LocalSGD"]


class Collective(abc.ABC):
    """The shared part: endpoints, the communicator's init and the parameters' broadcast."""

    def __init__(self, nrings: int = 1):
        self.nrings = nrings
        self.endpoints: list[str] = []
        self.current_endpoint = None
        self.nranks = 0
        self.rank = 0
        self.startup_program = None
        self.main_program = None

    def transpile(self, startup_program, main_program, rank, endpoints, current_endpoint,
                  wait_port=True):
        if isinstance(endpoints, str):
            endpoints = [e for e in endpoints.split(",") if e]
        if current_endpoint not in endpoints:
            raise InvalidArgumentError(f"{type(self).__name__}.transpile: current_endpoint "
                                       f"{current_endpoint!r} is not among {endpoints}")
        if not 0 <= rank < len(endpoints):
            raise InvalidArgumentError(f"{type(self).__name__}.transpile: rank {rank} is not in "
                                       f"[0, {len(endpoints)})")
        self.startup_program, self.main_program = startup_program, main_program
        self.endpoints, self.current_endpoint = list(endpoints), current_endpoint
        self.nranks, self.rank = len(endpoints), rank
        main_program._trainers_endpoints = list(endpoints)
        self._transpile_startup_program()
        self._transpile_main_program()

    def _params(self, program):
        return [p for p in program.global_block().all_parameters()
                if not getattr(p, "is_distributed", False)]

    def _transpile_startup_program(self):
        startup = self.startup_program
        append_comm_init(startup, self.rank, self.endpoints, self.current_endpoint)
        block = startup.global_block()
        params = self._params(startup)
        if params:
            with startup.role_guard(OpRole.COMMUNICATE):
                block.append_op("c_broadcast", {"X": params}, {"Out": params},
                                {"root": 0, "ring_id": 0, "use_calc_stream": True})

    @abc.abstractmethod
    def _transpile_main_program(self):
        """The mode's communication in the main program."""

    def _first_optimizer_op(self, block) -> int:
        return next((i for i, op in enumerate(block.ops) if op.role is OpRole.OPTIMIZE),
                    len(block.ops))


class GradAllReduce(Collective):
    """Sum the gradients over the trainers before the optimizer (loss gradient / trainers)."""

    mode = "grad_allreduce"

    def _transpile_main_program(self):
        program = self.main_program
        block = program.global_block()
        grads = [program.grad_var_map[p.name] for p in self._params(program)
                 if p.name in program.grad_var_map]
        if not grads:
            raise InvalidArgumentError("GradAllReduce.transpile: the main program has no "
                                       "parameter gradients; call optimizer.minimize first")
        loss_grad = next((i for i, op in enumerate(block.ops) if op.role is OpRole.LOSS),
                         None)  # the op that seeds the loss gradient (fill_constant 1)
        if loss_grad is not None and self.nranks > 1:
            out = block.ops[loss_grad].output_arg_names[0]
            block._insert_op(loss_grad + 1, "scale", {"X": [out]}, {"Out": [out]},
                             {"scale": 1.0 / self.nranks}, role=OpRole.BACKWARD)
        at = self._first_optimizer_op(block)
        block._insert_op(at, "c_allreduce_sum", {"X": grads}, {"Out": grads},
                         {"ring_id": 0, "use_calc_stream": True}, role=OpRole.COMMUNICATE)


class LocalSGD(Collective):
    """Each trainer steps alone, then the parameters are averaged over the trainers."""

    mode = "local_sgd"

    def _snapshot(self, name: str) -> str:
        return name + "@SNAPSHOT"

    def _transpile_startup_program(self):
        super()._transpile_startup_program()
        block = self.startup_program.global_block()
        for p in self._params(self.startup_program):
            snap = block.create_var(name=self._snapshot(p.name), shape=p.shape, dtype=p.dtype,
                                    persistable=True)
            block.append_op("assign", {"X": [p]}, {"Out": [snap]}, {})

    def _transpile_main_program(self):
        program = self.main_program
        block = program.global_block()
        with program.role_guard(OpRole.OPTIMIZE):
            for p in self._params(program):
                snap = block.create_var(name=self._snapshot(p.name), shape=p.shape,
                                        dtype=p.dtype, persistable=True)
                delta = block.create_var(name=p.name + "@DELTA", shape=p.shape, dtype=p.dtype)
                block.append_op("elementwise_sub", {"X": [snap], "Y": [p]}, {"Out": [delta]},
                                {})
                block.append_op("c_allreduce_sum", {"X": [delta]}, {"Out": [delta]},
                                {"ring_id": 0, "use_calc_stream": True}, role=OpRole.COMMUNICATE)
                block.append_op("scale", {"X": [delta]}, {"Out": [delta]},
                                {"scale": 1.0 / self.nranks})
                block.append_op("elementwise_sub", {"X": [snap], "Y": [delta]}, {"Out": [p]},
                                {})
                block.append_op("assign", {"X": [p]}, {"Out": [snap]}, {})
