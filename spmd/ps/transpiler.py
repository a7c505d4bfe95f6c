"""fluid.DistributeTranspiler and DistributeTranspilerConfig.

pserver mode (fluid's default) splits a trained program as fluid 1.8 does: parameters and
gradients are cut into row blocks (spmd/ps/slicing.py) placed on the pservers; the trainer
program sends gradient blocks and receives parameter blocks in place of the updates
(spmd/ps/trainer_program.py); each pserver program serves its blocks and runs their updates
(spmd/ps/pserver_program.py). With config.geo_sgd_mode (Geo-SGD, spmd/ps/geo.py) the trainer
keeps its optimizer and pushes parameter deltas every geo_sgd_need_push_nums steps, which the
pservers add.

nccl2 mode appends the communicator-init op to the startup program; the trainers then run
`ParallelExecutor(num_trainers=..., trainer_id=...)` (or CompiledProgram.with_data_parallel)
across processes. Endpoints are checked against the MPI world: their count must be the number
of processes, and `trainer_id` this process's rank.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..comm.topology import detect
from ..core.program import default_main_program, default_startup_program
from ..errors import InvalidArgumentError
from ..passes.comm_init import append_comm_init
from .pserver_mode import PServerTranspile
from .slicing import HashName, PSDispatcher, RoundRobin

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "HashName", "PSDispatcher",
           "RoundRobin"]


@dataclass
class DistributeTranspilerConfig:
    """fluid's fields and defaults; `mode` is "pserver" (fluid's default) or "nccl2".

    >>> config = DistributeTranspilerConfig()
    >>> config.slice_var_up = False   # each parameter whole on one pserver
    >>> # Geo-SGD: config.sync_mode = False; config.geo_sgd_mode = True
    >>> # config.geo_sgd_need_push_nums = 5   # push the deltas every 5 local steps
    """

    slice_var_up: bool = True
    split_method: type | None = None
    min_block_size: int = 8192
    mode: str = "pserver"
    print_log: bool = False
    wait_port: bool = True
    sync_mode: bool = True
    runtime_split_send_recv: bool = False
    nccl_comm_num: int = 1
    use_hierarchical_allreduce: bool = False
    hierarchical_allreduce_inter_nranks: int = 0
    enable_dc_asgd: bool = False
    half_async: bool = False
    completely_not_async: bool = False
    geo_sgd_mode: bool = False
    geo_sgd_need_push_nums: int = 100
    collective_mode: str | None = None

    def __setattr__(self, name, value):
        # fluid 1.8's property setters: neither may be None, and they exclude each other
        # (runtime split send/recv is an async-mode feature)
        if name in ("sync_mode", "runtime_split_send_recv"):
            other = "runtime_split_send_recv" if name == "sync_mode" else "sync_mode"
            if value is None:
                raise InvalidArgumentError(
                    f"DistributeTranspilerConfig.{name} can't be None; give True or False")
            if value and getattr(self, other, False):
                raise InvalidArgumentError(
                    f"DistributeTranspilerConfig.{name}=True needs {other}=False; set "
                    f"config.{other} = False first")
        super().__setattr__(name, value)


class DistributeTranspiler:
    """Turns a trained program into distributed programs.

    >>> # pserver mode: every process transpiles the same program, then takes its role's
    >>> # t = fluid.DistributeTranspiler()
    >>> # t.transpile(trainer_id, pservers="ip0:6174,ip1:6174", trainers=2)
    >>> # pserver_prog, pserver_startup = t.get_pserver_programs("ip0:6174")   # a pserver
    >>> # trainer_prog = t.get_trainer_program()                               # a trainer
    >>> # nccl2 mode:
    >>> # config = fluid.DistributeTranspilerConfig(); config.mode = "nccl2"
    >>> # t = fluid.DistributeTranspiler(config=config)
    >>> # t.transpile(trainer_id, trainers="ip0:6170,ip1:6170", current_endpoint="ip1:6170")
    """

    def __init__(self, config: DistributeTranspilerConfig | None = None):
        self.config = config or DistributeTranspilerConfig()
        if self.config.split_method is None:
            self.config.split_method = RoundRobin
        if not (isinstance(self.config.split_method, type)
                and issubclass(self.config.split_method, PSDispatcher)):
            raise InvalidArgumentError(
                f"DistributeTranspilerConfig.split_method must be RoundRobin, HashName or "
                f"another PSDispatcher subclass (the class, not an instance), got "
                f"{self.config.split_method!r}")
        if self.config.min_block_size < 8192:
            raise InvalidArgumentError(
                f"DistributeTranspilerConfig.min_block_size must be >= 8192 (fluid's floor), "
                f"got {self.config.min_block_size}")
        self._program = None
        self._ps: PServerTranspile | None = None

    def transpile(self, trainer_id, program=None, pservers="127.0.0.1:6174", trainers=1,
                  sync_mode=True, startup_program=None, current_endpoint="127.0.0.1:6174",
                  workers=None):
        """pserver mode: `pservers` is "ip:port,ip:port", `trainers` the number of trainers;
        `program` (default main) and `startup_program` (default startup) are rewritten in
        place into the trainer's. nccl2 mode: `trainers` is the comma-separated trainer
        endpoints (fluid's documented example names it `workers`; both are accepted)."""
        self._program = program or default_main_program()
        startup = startup_program or default_startup_program()
        if self.config.mode == "pserver":
            self._ps = PServerTranspile(self.config, trainer_id, self._program, startup,
                                        pservers, trainers, sync_mode, current_endpoint)
            return
        if self.config.mode != "nccl2":
            raise InvalidArgumentError(
                f"DistributeTranspilerConfig.mode={self.config.mode!r}: spmd transpiles "
                f"mode='pserver' (parameter servers) and mode='nccl2' (collectives); for "
                f"fluid's 'collective' mode use mode='nccl2'")
        endpoints = _endpoints(workers if workers is not None else trainers)
        from ..comm.join import join_for_transpile

        join_for_transpile(trainer_id, endpoints, current_endpoint)  # no launcher: join them
        topology = detect()
        tag = topology.tag()
        if len(endpoints) != topology.size:
            raise InvalidArgumentError(
                f"{tag} transpile: {len(endpoints)} trainer endpoint(s) {endpoints} but the MPI "
                f"world has {topology.size} process(es); start one process per endpoint "
                f"(mpirun -n {len(endpoints)})")
        if trainer_id != topology.rank:
            raise InvalidArgumentError(
                f"{tag} transpile: trainer_id={trainer_id} but this process is MPI rank "
                f"{topology.rank}; pass trainer_id=<MPI rank> (PADDLE_TRAINER_ID)")
        if endpoints[trainer_id] != current_endpoint:
            raise InvalidArgumentError(
                f"{tag} transpile: current_endpoint={current_endpoint} but trainer "
                f"{trainer_id}'s endpoint is {endpoints[trainer_id]}")
        append_comm_init(startup, trainer_id, endpoints, current_endpoint)

    def _pserver(self, what: str) -> PServerTranspile:
        if self._ps is None:
            missing = ", transpile() not called" if self._program is None else ""
            raise InvalidArgumentError(
                f"{what} needs transpile() in pserver mode first (config.mode="
                f"{self.config.mode!r}{missing})")
        return self._ps

    def get_trainer_program(self, wait_port=True):
        """The trainer's program: the main program given to transpile(), its updates replaced
        by send / recv (pserver mode); nccl2 mode trains the main program as it is.
        `wait_port`: wait until every pserver accepts connections (pserver mode)."""
        if self._program is None:
            raise InvalidArgumentError("call transpile() before get_trainer_program()")
        if self._ps is None:
            return self._program
        return self._ps.trainer_program(wait_port)

    def param_blocks(self) -> dict:
        """{parameter: [(its block's variable name, first row, end row, pserver endpoint),
        ...]}: how pserver mode cut each parameter across the pservers (one entry, the whole
        rows, when it was not cut)."""
        ps = self._pserver("param_blocks")
        out = {}
        for param, blocks in ps.param_blocks.items():
            start, cut = 0, []
            for b in blocks:
                cut.append((b.name, start, start + b.rows, ps.block_endpoint[b.name]))
                start += b.rows
            out[param] = cut
        return out

    def get_pserver_program(self, endpoint):
        """The program the pserver at `endpoint` runs: its listen_and_serv op and one optimize
        block per parameter block it holds."""
        return self._pserver("get_pserver_program").pserver_program(endpoint)

    def get_pserver_programs(self, endpoint):
        """(main program, startup program) of the pserver at `endpoint`."""
        ps = self._pserver("get_pserver_programs")
        main = ps.pserver_program(endpoint)
        return main, ps.pserver_startup(endpoint, main)

    def get_startup_program(self, endpoint, pserver_program=None, startup_program=None):
        """The startup program of the pserver at `endpoint` (fluid's deprecated form of
        get_pserver_programs): the initializers of its parameter blocks and optimizer state.
        `startup_program` is fluid's deprecated argument: the one given to transpile() is
        used."""
        ps = self._pserver("get_startup_program")
        if startup_program is not None and startup_program is not ps.startup:
            raise InvalidArgumentError(
                "get_startup_program: startup_program differs from the one given to "
                "transpile(); pass the startup program to transpile(startup_program=...)")
        return ps.pserver_startup(endpoint, pserver_program)


def _endpoints(trainers) -> list[str]:
    if not isinstance(trainers, str) or not trainers.strip():
        raise InvalidArgumentError(
            f"nccl2 mode needs the trainer endpoints as 'ip:port,ip:port,...', got {trainers!r}")
    return [e.strip() for e in trainers.split(",") if e.strip()]
