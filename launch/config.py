"""LaunchConfig: everything a launch needs, resolved and validated in one place.

`resolve_config` turns the command line's values into a LaunchConfig: it reads the scheduler
(SLURM fills in nodes and processes per node), checks GPUs, picks free ports and finds the MPI.
Every mistake a person can make raises UsageError with one line that says what to change.

>>> cfg = LaunchConfig("train.py", nproc_per_node=2, log_dir="/tmp/log")
>>> cfg.world_size, cfg.endpoints
(2, ['127.0.0.1:6170', '127.0.0.1:6171'])
"""
from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import scheduler as sched
from .env import ps_server_num
from .mpi import MPIInfo, MPINotFound, find_mpi

DEFAULT_PORT = 6170  # fluid's: used across nodes, where free ports cannot be checked
DEFAULT_JOIN_TIMEOUT_S = 300.0
RENDEZVOUS = "rendezvous"  # every node runs paddle-launch; node 0 starts the job, the others join
SSH = "ssh"  # node 0 alone runs paddle-launch; MPI's process manager starts the others by ssh
BOOTSTRAPS = (RENDEZVOUS, SSH)


class UsageError(ValueError):
    """A launch the user asked for cannot work; the message is one line with the fix."""


@dataclass
class LaunchConfig:
    """A resolved launch: `world_size = len(cluster_node_ips) * nproc_per_node` workers, rank
    `node_index * nproc_per_node + local_rank`, each running `python -m spmd.run
    training_script *training_script_args`."""

    training_script: str
    training_script_args: list = field(default_factory=list)
    nproc_per_node: int = 1
    selected_gpus: list | None = None
    """GPU ids (CUDA_VISIBLE_DEVICES numbering), one per local rank; None for a CPU run."""
    cluster_node_ips: list = field(default_factory=lambda: ["127.0.0.1"])
    node_ip: str = "127.0.0.1"
    started_port: int | None = None
    ports: list = field(default_factory=list)
    """One port per local rank; empty: started_port (or DEFAULT_PORT) onwards."""
    log_dir: str = "log"
    print_config: bool = True
    collective_timeout: float | None = None
    """Seconds; None: the workers' SPMD_COLLECTIVE_TIMEOUT, or spmd's default."""
    scheduler: str = sched.LOCAL
    mpi: MPIInfo | None = None
    python: str = sys.executable
    server_num: int = 0
    """Parameter-server mode when > 0: this many pservers (launch/ps.py; under an MPI process
    manager, the first server_num ranks serve, launch/env.py)."""
    worker_num: int = 0
    """Trainers of a parameter-server job started here."""
    server_ports: list = field(default_factory=list)
    """One port per pserver (parameter-server mode on this machine)."""
    trainer_endpoints: list = field(default_factory=list)
    """Every worker's endpoint, in rank order, when the cluster gave them
    (DISTRIBUTED_TRAINER_ENDPOINTS); empty: cluster_node_ips x ports."""
    bootstrap: str = RENDEZVOUS
    """How the nodes of a job across nodes start (outside SLURM): RENDEZVOUS or SSH."""
    join_timeout: float = DEFAULT_JOIN_TIMEOUT_S
    """Seconds node 0 waits for every other node to join (and they for node 0)."""
    nodes_from: str = "--cluster_node_ips"
    """Where cluster_node_ips came from (printed with the configuration)."""

    @property
    def node_index(self) -> int:
        """This node's rank: its position in cluster_node_ips."""
        return self.cluster_node_ips.index(self.node_ip)

    @property
    def joins_by_rendezvous(self) -> bool:
        """A job across nodes where paddle-launch runs on every node (launch/multinode.py)."""
        return (len(self.cluster_node_ips) > 1 and self.scheduler == sched.LOCAL
                and self.bootstrap == RENDEZVOUS)

    @property
    def rendezvous_address(self) -> tuple[str, int]:
        """Where node 0's paddle-launch hands the other nodes their part: node 0's address at
        its first worker's port (no worker listens there: spmd's workers meet through MPI)."""
        host, port = self.endpoints[0].rsplit(":", 1)
        return self.cluster_node_ips[0], int(port)

    @property
    def pserver_endpoints(self) -> list[str]:
        """PADDLE_PSERVERS_IP_PORT_LIST of a parameter-server job started here."""
        ports = self.server_ports or [(self.started_port or DEFAULT_PORT) + i
                                      for i in range(self.server_num)]
        return [f"{self.node_ip}:{port}" for port in ports]

    def role_log(self, role: str, index: int) -> str:
        """The log of pserver `index` (serverlog.N) or trainer `index` (workerlog.N)."""
        name = "serverlog" if role == "PSERVER" else "workerlog"
        return os.path.join(self.log_dir, f"{name}.{index}")

    @property
    def world_size(self) -> int:
        return len(self.cluster_node_ips) * self.nproc_per_node

    @property
    def endpoints(self) -> list[str]:
        """PADDLE_TRAINER_ENDPOINTS, in rank order."""
        if self.trainer_endpoints:
            return list(self.trainer_endpoints)
        ports = self.ports or [(self.started_port or DEFAULT_PORT) + i
                               for i in range(self.nproc_per_node)]
        return [f"{node}:{port}" for node in self.cluster_node_ips for port in ports]

    @property
    def local_ranks(self) -> list[int]:
        """The ranks that run on this machine (node_ip)."""
        first = self.cluster_node_ips.index(self.node_ip) * self.nproc_per_node
        return list(range(first, first + self.nproc_per_node))

    def rank_log(self, rank: int) -> str:
        return os.path.join(self.log_dir, f"workerlog.{rank}")

    def rank_status(self, rank: int) -> str:
        return os.path.join(self.log_dir, f"workerstatus.{rank}")


def _parse_gpus(text: str) -> list[int]:
    try:
        gpus = [int(g) for g in text.split(",") if g.strip()]
    except ValueError:
        raise UsageError(
            f"--selected_gpus {text!r} is not a comma-separated list of GPU ids; "
            f"write e.g. --selected_gpus 0,1") from None
    if not gpus or len(set(gpus)) != len(gpus) or min(gpus) < 0:
        raise UsageError(f"--selected_gpus {text!r} must list distinct GPU ids >= 0, "
                         f"e.g. --selected_gpus 0,1")
    return gpus


def _resolve_gpus(selected: str | None, nproc: int | None,
                  env: Mapping[str, str]) -> tuple[list | None, int]:
    """(selected GPUs or None for a CPU run, processes per node)."""
    if nproc is not None and nproc < 1:
        raise UsageError(f"--nproc_per_node must be at least 1, got {nproc}")
    if selected is None:
        return None, nproc or 1
    gpus = _parse_gpus(selected)
    count = sched.visible_gpu_count(env)
    missing = [g for g in gpus if g >= count]
    if missing:
        visible = env.get("CUDA_VISIBLE_DEVICES")
        where = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
        raise UsageError(
            f"--selected_gpus names GPU {missing[0]}, which does not exist: {count} GPU(s) "
            f"visible{where}; choose ids below {count}"
            + ("" if count else ", or use --nproc_per_node N for a CPU run"))
    if nproc is not None and nproc != len(gpus):
        raise UsageError(
            f"--nproc_per_node {nproc} but --selected_gpus lists {len(gpus)} GPU(s): one worker "
            f"per GPU; drop --nproc_per_node or make the two agree")
    return gpus, len(gpus)


def _resolve_nodes(cluster: str | None, node_ip: str | None, env: Mapping[str, str],
                   scheduler: str) -> tuple[list[str], str]:
    if cluster is None and scheduler == sched.SLURM:
        nodes = sched.expand_hostlist(env["SLURM_JOB_NODELIST"])
        here = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
        return nodes, node_ip or (here if here in nodes else nodes[0])
    nodes = [n.strip() for n in (cluster or node_ip or "127.0.0.1").split(",") if n.strip()]
    if not nodes or len(set(nodes)) != len(nodes):
        raise UsageError(f"--cluster_node_ips {cluster!r} must list distinct node addresses, "
                         f"e.g. --cluster_node_ips 10.0.0.1,10.0.0.2")
    if node_ip is None:
        if len(nodes) == 1:
            return nodes, nodes[0]
        mine = [n for n in nodes if n in sched.local_addresses()]
        if len(mine) != 1:
            raise UsageError(
                f"--node_ip is needed: {'none' if not mine else 'several'} of "
                f"--cluster_node_ips {','.join(nodes)} are addresses of this machine; pass "
                f"--node_ip with this machine's entry")
        return nodes, mine[0]
    if node_ip not in nodes:
        raise UsageError(
            f"--node_ip {node_ip} is not in --cluster_node_ips {','.join(nodes)}; pass this "
            f"machine's entry of that list (or add {node_ip} to it)")
    return nodes, node_ip


@dataclass
class _Cloud:
    """A cluster as PaddleCloud (and paddle-operator's Kubernetes pods) describes it."""

    nodes: list
    node_ip: str
    started_port: int | None
    endpoints: list
    nproc: int | None


def _int_var(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise UsageError(f"{name}={raw!r} is not a number; PaddleCloud sets it to an integer")
    return int(raw)


def paddlecloud_cluster(env: Mapping[str, str], nproc: int | None) -> _Cloud | None:
    """fluid's PaddleCloud variables, when set: PADDLE_TRAINERS (the node ips, in node order),
    POD_IP (this node), PADDLE_TRAINER_ID (this node's rank), PADDLE_PORT (the first port),
    TRAINER_PORTS_NUM (ports per node) and DISTRIBUTED_TRAINER_ENDPOINTS (every worker's
    endpoint, node by node). None when PADDLE_TRAINERS or POD_IP is missing."""
    trainers, pod_ip = env.get("PADDLE_TRAINERS", ""), env.get("POD_IP", "").strip()
    if not trainers.strip() or not pod_ip:
        return None
    nodes = [n.strip() for n in trainers.split(",") if n.strip()]
    if len(set(nodes)) != len(nodes) or pod_ip not in nodes:
        raise UsageError(f"PADDLE_TRAINERS={trainers!r} must list distinct node ips, this "
                         f"node's POD_IP={pod_ip} among them")
    node_rank = _int_var(env, "PADDLE_TRAINER_ID")
    if node_rank is not None and node_rank != nodes.index(pod_ip):
        raise UsageError(f"PADDLE_TRAINER_ID={node_rank} (this node's rank) but POD_IP={pod_ip} "
                         f"is entry {nodes.index(pod_ip)} of PADDLE_TRAINERS={trainers}; make "
                         f"them agree")
    ports_num = _int_var(env, "TRAINER_PORTS_NUM")
    listed = [e.strip() for e in env.get("DISTRIBUTED_TRAINER_ENDPOINTS", "").split(",")
              if e.strip()]
    endpoints: list = []
    if listed:
        per_node = ports_num or len(listed) // len(nodes)
        if per_node < 1 or per_node * len(nodes) != len(listed):
            raise UsageError(
                f"DISTRIBUTED_TRAINER_ENDPOINTS lists {len(listed)} endpoint(s) for "
                f"{len(nodes)} node(s) and TRAINER_PORTS_NUM={ports_num}: it must list "
                f"TRAINER_PORTS_NUM endpoints per node, node by node")
        nproc = nproc or per_node
        if nproc > per_node:
            raise UsageError(f"{nproc} workers per node but DISTRIBUTED_TRAINER_ENDPOINTS "
                             f"gives each node {per_node} port(s)")
        endpoints = [e for i in range(len(nodes))
                     for e in listed[i * per_node:i * per_node + nproc]]
    return _Cloud(nodes, pod_ip, _int_var(env, "PADDLE_PORT"), endpoints, nproc)


def resolve_config(training_script: str | None, training_script_args: list | None = None, *,
                   nproc_per_node: int | None = None, selected_gpus: str | None = None,
                   cluster_node_ips: str | None = None, node_ip: str | None = None,
                   started_port: int | None = None, log_dir: str = "log",
                   print_config: bool = True, collective_timeout: float | None = None,
                   env: Mapping[str, str] | None = None, find_mpi_fn=find_mpi,
                   server_num: int | None = None, worker_num: int | None = None,
                   bootstrap: str = RENDEZVOUS,
                   join_timeout: float | None = None) -> LaunchConfig:
    """Validate the command line's values and resolve the launch; raises UsageError."""
    env = os.environ if env is None else env
    if server_num is not None or worker_num is not None:
        collective = {"--nproc_per_node": nproc_per_node, "--selected_gpus": selected_gpus,
                      "--cluster_node_ips": cluster_node_ips, "--node_ip": node_ip,
                      "--collective_timeout": collective_timeout}
        given = [flag for flag, value in collective.items() if value is not None]
        if given:  # they shape a collective job; a pserver job would silently drop them
            raise UsageError(
                f"{', '.join(given)} shape{'s' if len(given) == 1 else ''} a collective job "
                f"and cannot be combined with --server_num / --worker_num (parameter-server "
                f"mode: --worker_num trainers and --server_num pservers on this machine, or "
                f"under mpiexec/srun the first --server_num ranks serve); drop "
                f"{'it' if len(given) == 1 else 'them'}")
        return _resolve_ps(training_script, training_script_args, server_num, worker_num,
                           started_port, log_dir, print_config, env)
    if not training_script:
        raise UsageError("no training script given: paddle-launch [options] train.py [args]")
    if not os.path.isfile(training_script):
        raise UsageError(f"training script {training_script!r} not found (working directory "
                         f"{os.getcwd()}); pass the path of a Python file")
    if collective_timeout is not None and not collective_timeout > 0:
        raise UsageError(f"--collective_timeout must be a positive number of seconds, "
                         f"got {collective_timeout:g}")
    if started_port is not None and not 1 <= started_port <= 65535:
        raise UsageError(f"--started_port must be a TCP port (1-65535), got {started_port}")
    if bootstrap not in BOOTSTRAPS:
        raise UsageError(f"--bootstrap {bootstrap!r}: expected one of {', '.join(BOOTSTRAPS)}")
    if join_timeout is None and env.get("SPMD_JOIN_TIMEOUT"):
        # spmd.flags' variable, read here: importing spmd under an MPI process manager would
        # arm its guard in the launcher
        try:
            join_timeout = float(env["SPMD_JOIN_TIMEOUT"])
        except ValueError:
            raise UsageError(f"SPMD_JOIN_TIMEOUT={env['SPMD_JOIN_TIMEOUT']!r} is not a number "
                             f"of seconds; set it to e.g. 300") from None
    if join_timeout is not None and not join_timeout > 0:
        raise UsageError(f"--join_timeout must be a positive number of seconds, "
                         f"got {join_timeout:g}")
    scheduler = sched.detect_scheduler(env)
    cloud = None
    if cluster_node_ips is None and scheduler == sched.LOCAL:
        cloud = paddlecloud_cluster(env, nproc_per_node if selected_gpus is None else None)
    if cloud is not None:
        cluster_node_ips, node_ip = ",".join(cloud.nodes), cloud.node_ip
        started_port = started_port if started_port is not None else cloud.started_port
        if nproc_per_node is None and selected_gpus is None:
            nproc_per_node = cloud.nproc
    if nproc_per_node is None and selected_gpus is None and scheduler == sched.SLURM:
        nproc_per_node = sched.slurm_tasks_per_node(env)
    if nproc_per_node is None and selected_gpus is None and sched.visible_gpu_count(env):
        selected_gpus = ",".join(map(str, range(sched.visible_gpu_count(env))))
    gpus, nproc = _resolve_gpus(selected_gpus, nproc_per_node, env)
    nodes, here = _resolve_nodes(cluster_node_ips, node_ip, env, scheduler)
    ports: list[int] = []
    if started_port is None and len(nodes) == 1 and scheduler != sched.MPI:
        ports = sched.free_ports(nproc)
    mpi = None
    if scheduler != sched.MPI:  # under an MPI process manager the launcher becomes a worker
        try:
            mpi = find_mpi_fn()
        except MPINotFound as e:
            raise UsageError(str(e)) from None
    if (len(nodes) > 1 and scheduler == sched.LOCAL and bootstrap == RENDEZVOUS and mpi
            and mpi.flavor != "hydra"):
        raise UsageError(
            f"paddle-launch on every node needs MPICH's process manager (Hydra's manual "
            f"bootstrap), but mpi4py uses {mpi.describe()}; run paddle-launch on node 0 only "
            f"with --bootstrap ssh (MPI then starts the other nodes through ssh), or use MPICH")
    endpoints = cloud.endpoints if cloud is not None else []
    if endpoints and len(endpoints) != len(nodes) * nproc:
        raise UsageError(f"DISTRIBUTED_TRAINER_ENDPOINTS gives {len(endpoints)} endpoint(s) "
                         f"for {len(nodes)} node(s) x {nproc} worker(s)")
    nodes_from = ("PaddleCloud's PADDLE_TRAINERS and POD_IP" if cloud is not None else
                  "the SLURM allocation" if scheduler == sched.SLURM and cluster_node_ips is None
                  else "--cluster_node_ips")
    return LaunchConfig(
        training_script=training_script, training_script_args=list(training_script_args or []),
        nproc_per_node=nproc, selected_gpus=gpus, cluster_node_ips=nodes, node_ip=here,
        started_port=started_port, ports=ports, log_dir=os.path.abspath(log_dir),
        print_config=print_config, collective_timeout=collective_timeout, scheduler=scheduler,
        mpi=mpi, python=sys.executable, trainer_endpoints=endpoints, bootstrap=bootstrap,
        join_timeout=DEFAULT_JOIN_TIMEOUT_S if join_timeout is None else join_timeout,
        nodes_from=nodes_from)


def _resolve_ps(training_script, training_script_args, server_num, worker_num, started_port,
                log_dir, print_config, env) -> LaunchConfig:
    """A parameter-server launch: --server_num pservers and --worker_num trainers on this
    machine, or, under an MPI process manager, its ranks mapped to roles."""
    if not training_script or not os.path.isfile(training_script):
        raise UsageError(f"training script {training_script!r} not found (working directory "
                         f"{os.getcwd()}); pass the path of a Python file")
    scheduler = sched.detect_scheduler(env)
    if scheduler == sched.SLURM and sched.in_srun_step(env):
        scheduler = sched.MPI  # `srun paddle-launch --server_num N`: each task is a rank
    if scheduler == sched.MPI:
        server_num = ps_server_num(server_num, env)
        if server_num < 1:
            raise UsageError("--server_num must be at least 1 (the first N ranks serve)")
        worker_num = 0  # the process manager's other ranks
    else:
        server_num = 1 if server_num is None else server_num
        worker_num = 1 if worker_num is None else worker_num
        if server_num < 1 or worker_num < 1:
            raise UsageError(f"a parameter-server job needs --server_num >= 1 and "
                             f"--worker_num >= 1, got {server_num} and {worker_num}")
    if started_port is not None and not 1 <= started_port <= 65535:
        raise UsageError(f"--started_port must be a TCP port (1-65535), got {started_port}")
    ports = (sched.free_ports(server_num, "127.0.0.1")
             if started_port is None and scheduler != sched.MPI else [])
    return LaunchConfig(
        training_script=training_script, training_script_args=list(training_script_args or []),
        nproc_per_node=max(1, worker_num), started_port=started_port,
        log_dir=os.path.abspath(log_dir), print_config=print_config, scheduler=scheduler,
        python=sys.executable, server_num=server_num, worker_num=worker_num,
        server_ports=ports)


def _bootstrap_text(config: LaunchConfig) -> str:
    if config.scheduler == sched.SLURM:
        return "the SLURM allocation (MPI starts each node's part through srun)"
    if config.bootstrap == SSH:
        return "ssh (this paddle-launch alone starts every node's workers)"
    host, port = config.rendezvous_address
    return (f"rendezvous at {host}:{port} (paddle-launch on every node; node 0 starts the "
            f"job, the others join within {config.join_timeout:g} s)")


def format_config(config: LaunchConfig) -> str:
    """The resolved configuration, printed once at the start of a launch."""
    gpus = ",".join(map(str, config.selected_gpus)) if config.selected_gpus else "none (CPU)"
    timeout = (f"{config.collective_timeout:g} s (--collective_timeout)"
               if config.collective_timeout is not None
               else "SPMD_COLLECTIVE_TIMEOUT, else 1800 s")
    rows = [
        ("training script", " ".join([config.training_script, *config.training_script_args])),
        ("workers", f"{config.world_size} = {len(config.cluster_node_ips)} node(s) x "
                    f"{config.nproc_per_node} (nproc_per_node)"),
        ("selected_gpus", gpus),
        ("cluster_node_ips", ",".join(config.cluster_node_ips)),
        ("node_ip", f"{config.node_ip} (node {config.node_index} of "
                    f"{len(config.cluster_node_ips)}; nodes from {config.nodes_from})"),
        ("endpoints", ",".join(config.endpoints)),
        ("log_dir", f"{config.log_dir} (workerlog.N; rank 0 also on this console)"),
        ("collective_timeout", timeout),
        ("scheduler", config.scheduler),
        *([("bootstrap", _bootstrap_text(config))] if len(config.cluster_node_ips) > 1 else []),
        ("mpi", config.mpi.describe() if config.mpi else "the process manager that started "
                                                          "this process"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(["paddle-launch configuration:"]
                     + [f"  {k:<{width}} : {v}" for k, v in rows])
