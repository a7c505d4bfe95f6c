"""examples/pserver/train_fleet.py (train.py's CTR job written with fluid 1.8's fleet API in
parameter-server mode, roles from PaddleCloudRoleMaker) run every way a job is started:

- `paddle-launch --server_num 2 --worker_num 2` in sync, async, half_async and geo mode: exits 0
  within its deadline, every role logs, each pserver serves in that mode and ends, and each
  trainer's loss falls (mean of the last steps below the mean of the first);
- `mpiexec -n 4 paddle-launch --server_num 2` (ranks 0-1 serve, ranks 2-3 train);
- `srun -n 4 paddle-launch --server_num 2` in a real one-node SLURM cluster started on this
  machine (tests/launch/slurm_cluster.py; skipped where SLURM is not installed or not root);
- `--save DIR`: trainer 0's fleet.save_persistables writes the whole parameters into DIR and
  each pserver's slice (parameters and optimizer state) into DIR/pserver_<i>; the whole
  parameters load into a one-process program built by train.ctr_net().

The `token` fixture checks that no process outlives a test.
"""
from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from launch_helpers import MPIEXEC, PYTHON, ROOT, launcher, run

from launch.scheduler import free_ports

pytest.importorskip("grpc")

EXAMPLE = ROOT / "examples" / "pserver"
SCRIPT = str(EXAMPLE / "train_fleet.py")
DEADLINE_S = 120
STEPS = ["--steps", "60"]
PS_ENV = {"SPMD_PS_RPC_DEADLINE": "30", "SPMD_PS_IDLE_TIMEOUT": "45"}
SUMMARY = re.compile(r"trainer (\d+): mean loss of the first \d+ steps ([\d.]+), "
                     r"of the last \d+ ([\d.]+)")
SERVING = re.compile(r"pserver (\S+): serving \((\w+) mode, (\d+) trainers\)")
DONE = re.compile(r"pserver (\S+): done")


def check_trainers_trained(text: str, what: str, trainers=(0, 1)) -> None:
    """Every trainer printed its summary once, and its loss fell."""
    found = {}
    for tid, first, last in SUMMARY.findall(text):
        assert int(tid) not in found, f"{what}: trainer {tid} summarized twice:\n{text[-3000:]}"
        found[int(tid)] = (float(first), float(last))
    assert sorted(found) == list(trainers), f"{what}: summaries {found}\n{text[-3000:]}"
    for tid, (first, last) in found.items():
        assert last < first, f"{what}: trainer {tid}'s loss {first} -> {last}\n{text[-3000:]}"


def check_servers(text: str, mode: str, what: str) -> None:
    """Both pservers served in `mode` for 2 trainers and ended once both trainers stopped."""
    serving = SERVING.findall(text)
    assert len(serving) == 2 and all(s[1:] == (mode, "2") for s in serving), \
        f"{what}: {serving}\n{text[-3000:]}"
    assert sorted(DONE.findall(text)) == sorted(s[0] for s in serving), f"{what}:\n{text[-3000:]}"


def endpoints() -> str:
    return ",".join(f"127.0.0.1:{p}" for p in free_ports(2))


@pytest.mark.timeout(2 * DEADLINE_S)
@pytest.mark.parametrize("mode", ["sync", "async", "half_async", "geo"])
def test_fleet_example_trains_under_paddle_launch(tmp_path, token, mode):
    log = tmp_path / "log"
    res = run(launcher("--server_num", "2", "--worker_num", "2", "--log_dir", str(log),
                       SCRIPT, *STEPS, "--mode", mode), token, timeout=DEADLINE_S, **PS_ENV)
    assert res.returncode == 0, res.output[-4000:]
    assert sorted(p.name for p in log.iterdir()) == ["serverlog.0", "serverlog.1",
                                                     "workerlog.0", "workerlog.1"]
    for i in (0, 1):
        server = (log / f"serverlog.{i}").read_text()
        check_servers(server + (log / f"serverlog.{1 - i}").read_text(), mode, f"serverlog.{i}")
        assert len(SERVING.findall(server)) == 1 and len(DONE.findall(server)) == 1, server
        check_trainers_trained((log / f"workerlog.{i}").read_text(), f"{mode} workerlog.{i}",
                               trainers=(i,))
    # trainer 0 is also on the launcher's console
    check_trainers_trained(res.stdout, f"{mode} console", trainers=(0,))


@pytest.mark.timeout(2 * DEADLINE_S)
def test_fleet_example_under_mpiexec(token):
    res = run([MPIEXEC, "-n", "4", PYTHON, "-m", "launch", "--server_num", "2", SCRIPT, *STEPS],
              token, timeout=DEADLINE_S, PADDLE_PSERVERS_IP_PORT_LIST=endpoints(), **PS_ENV)
    assert res.returncode == 0, res.output[-4000:]
    assert "ranks 0-1 pservers, ranks 2-3 trainers" in res.stdout, res.stdout[-2000:]
    check_servers(res.stdout, "sync", "mpiexec")
    check_trainers_trained(res.stdout, "mpiexec")


@pytest.mark.timeout(240)
def test_fleet_example_in_slurm(token, tmp_path_factory):
    from slurm_cluster import skip_reason, slurm_cluster, tail

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        # srun allocates 4 tasks on the one node; each runs paddle-launch, which gives ranks
        # 0-1 the pservers and ranks 2-3 the trainers (PMI2 says the rank)
        res = run(["srun", "-K", "--mpi=pmi2", "-n", "4", "--overcommit", PYTHON, "-m", "launch",
                   "--server_num", "2", SCRIPT, "--steps", "40"], token, timeout=150,
                  PADDLE_PSERVERS_IP_PORT_LIST=endpoints(), **PS_ENV, **cluster.env)
        assert res.returncode == 0, f"{res.output[-4000:]}\n{tail(cluster.dir / 'slurmd.log')}"
    assert res.stdout.count("ranks 0-1 pservers, ranks 2-3 trainers") == 1, res.stdout[-3000:]
    check_servers(res.stdout, "sync", "srun")
    check_trainers_trained(res.stdout, "srun")


# -- --save DIR -----------------------------------------------------------------------------

def _ctr_parameters():
    """train.ctr_net() built in a program of its own: (name -> shape of its parameters,
    main program, startup program, loss, the train module)."""
    import spmd.fluid as fluid

    spec = importlib.util.spec_from_file_location("pserver_example_train", EXAMPLE / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = train.ctr_net()
    params = {p.name: tuple(p.shape) for p in main.global_block().all_parameters()}
    return params, main, startup, loss, train


def _save_job(tmp_path, token):
    """The sync job with --save; returns the model directory."""
    model = tmp_path / "model"
    res = run(launcher("--server_num", "2", "--worker_num", "2", "--log_dir",
                       str(tmp_path / "log"), SCRIPT, *STEPS, "--save", str(model)), token,
              timeout=DEADLINE_S, **PS_ENV)
    assert res.returncode == 0, res.output[-4000:]
    check_trainers_trained(res.stdout, "--save console", trainers=(0,))
    return model


def _pserver_slices(model) -> tuple[dict, dict]:
    """pserver index -> {parameter name: {block index (-1: whole): array}} of the parameters
    each pserver saved (its gradient buffers, optimizer state and learning rate aside), and
    pserver index -> names of all the files it saved."""
    params, files = {}, {}
    for i in (0, 1):
        d = model / f"pserver_{i}"
        assert d.is_dir(), f"{d} missing: {sorted(p.name for p in model.iterdir())}"
        files[i] = sorted(p.name for p in d.glob("*.npy"))
        params[i] = {}
        for name in files[i]:
            stem = name[:-len(".npy")]
            if "@GRAD" in stem or "_moment_" in stem or stem.startswith("learning_rate"):
                continue
            m = re.fullmatch(r"(.*)\.block(\d+)", stem)
            base, block = (m.group(1), int(m.group(2))) if m else (stem, -1)
            params[i].setdefault(base, {})[block] = np.load(d / name)
    return params, files


def _assemble(slices: dict) -> dict:
    """Whole parameters from the pservers' slices (blocks joined in order along rows)."""
    joined: dict = {}
    for held in slices.values():
        for name, blocks in held.items():
            assert not set(blocks) & set(joined.get(name, {})), f"{name}: a block saved twice"
            joined.setdefault(name, {}).update(blocks)
    return {n: b[-1] if -1 in b else np.concatenate([b[k] for k in sorted(b)])
            for n, b in joined.items()}


@pytest.mark.timeout(2 * DEADLINE_S)
def test_fleet_example_saves_whole_parameters_and_pserver_slices(tmp_path, token):
    import spmd.fluid as fluid

    model = _save_job(tmp_path, token)
    params, main, startup, loss, train = _ctr_parameters()
    assert set(params) == {"ctr_embedding", "fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0",
                           "fc_2.w_0", "fc_2.b_0"}
    # the whole parameters, as the program declares them
    whole = {}
    for name, shape in params.items():
        path = model / f"{name}.npy"
        assert path.is_file(), f"{path} missing: {sorted(p.name for p in model.iterdir())}"
        whole[name] = np.load(path)
        assert whole[name].shape == shape and whole[name].dtype == np.float32, (name, shape)

    # each pserver's slice: every parameter on exactly one pserver, or split in blocks
    # across them, with the optimizer's state (Adagrad's moment) for what it holds
    slices, files = _pserver_slices(model)
    for i in (0, 1):
        assert slices[i], f"pserver_{i} holds no parameter: {files[i]}"
        for name in slices[i]:
            assert f"{name}_moment_0.npy" in files[i], f"pserver_{i}: no moment of {name}"
    assert "ctr_embedding" in slices[0] and "ctr_embedding" in slices[1], \
        "the 10000-row embedding is split across both pservers"
    assembled = _assemble(slices)
    assert set(assembled) == set(params), sorted(assembled)
    for name, shape in params.items():
        assert assembled[name].shape == shape, (name, assembled[name].shape, shape)
    # sync mode: after the last step trainer 0 received the dense parameters the pservers
    # hold; the job trained them (they are not the startup's values everywhere)
    for name in params:
        if name != "ctr_embedding":
            np.testing.assert_array_equal(whole[name], assembled[name], err_msg=name)
    assert np.abs(assembled["ctr_embedding"]).max() > 0

    # the whole parameters load into a one-process program built by train.ctr_net()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        fluid.io.load_persistables(exe, str(model), main)
        for name in params:
            np.testing.assert_array_equal(np.asarray(scope.find_var(name).get_tensor()),
                                          whole[name], err_msg=name)
        (value,) = exe.run(main, feed=next(train.reader(64, 0, 1, seed=99)), fetch_list=[loss])
        assert np.isfinite(np.asarray(value)).all()


def test_fleet_example_saved_embedding_is_the_trained_table(tmp_path, token):
    model = _save_job(tmp_path, token)
    slices, _ = _pserver_slices(model)
    trained = _assemble(slices)["ctr_embedding"]
    np.testing.assert_array_equal(np.load(model / "ctr_embedding.npy"), trained,
                                  err_msg="DIR/ctr_embedding.npy vs the pservers' blocks")
