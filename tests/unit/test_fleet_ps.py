"""fleet's parameter-server mode (fluid 1.6-1.8's
`fluid.incubate.fleet.parameter_server.distribute_transpiler`): the role makers, the
strategies, fleet's programs against the transpiler's, and real jobs of 2 pservers and 2
trainers (tests/unit/ps_scripts/fleet_role.py): sync mode equals one process fed the whole
batch (SGD, Adam with a decay schedule, a DistributeTranspilerConfig as the strategy, a
UserDefinedRoleMaker), async and half-async modes learn sklearn's digits, and a checkpoint
saved by fleet.save_persistables restores the pservers through fleet.init_server. The SGD
runs also equal fluid 1.8.5's own fleet run of the same script."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from oracle_io import DATA_DIR, load
from ps_jobs import PARAMS, assemble, check_against_fluid, check_equals_one_process, run_job

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, PreconditionError
from spmd.fleet.parameter_server import DistributedTranspiler
from spmd.fleet.ps_strategy import training_mode, transpiler_config
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.collective import fleet as collective_fleet
from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler import (
    StrategyFactory,
)

SERVERS = ["127.0.0.1:6170", "127.0.0.1:6171"]
PS_ENV = ("TRAINING_ROLE", "PADDLE_TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST",
          "PADDLE_PSERVER_IPS", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ID", "POD_IP",
          "PADDLE_PORT", "PADDLE_CURRENT_ENDPOINT", "PADDLE_TRAINER_ENDPOINTS")


@pytest.fixture
def ps_env(monkeypatch):
    """Sets fluid's parameter-server variables (none of the caller's leak in)."""
    for name in PS_ENV:
        monkeypatch.delenv(name, raising=False)

    def put(**values):
        for name, value in values.items():
            monkeypatch.setenv(name, value)
    return put


# -- role makers ----------------------------------------------------------------------------
def test_paddle_cloud_role_maker_reads_the_pserver_roles(ps_env):
    ps_env(TRAINING_ROLE="PSERVER", PADDLE_PSERVERS_IP_PORT_LIST=",".join(SERVERS),
           PADDLE_TRAINERS_NUM="3", POD_IP="127.0.0.1", PADDLE_PORT="6171")
    role = role_maker.PaddleCloudRoleMaker()
    role.generate_role()
    assert (role.is_server(), role.is_worker(), role.server_index(), role.worker_num()) == \
        (True, False, 1, 3)
    assert role.get_pserver_endpoints() == SERVERS
    assert not role.is_first_worker()

    ps_env(TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID="0")
    role = role_maker.PaddleCloudRoleMaker()
    assert (role.is_worker(), role.worker_index(), role.is_first_worker()) == (True, 0, True)


def test_paddle_cloud_role_maker_says_what_is_missing(ps_env):
    with pytest.raises(InvalidArgumentError, match="TRAINING_ROLE .* is not set.*paddle-launch "
                                                   "--server_num"):
        role_maker.PaddleCloudRoleMaker().generate_role()
    ps_env(TRAINING_ROLE="PSERVER", PADDLE_PSERVERS_IP_PORT_LIST=",".join(SERVERS),
           POD_IP="10.0.0.9", PADDLE_PORT="6170")
    with pytest.raises(InvalidArgumentError, match="10.0.0.9:6170.* is not in the pservers"):
        role_maker.PaddleCloudRoleMaker().generate_role()


def test_user_defined_role_maker_checks_its_arguments():
    role = role_maker.UserDefinedRoleMaker(1, role_maker.Role.WORKER, 2, SERVERS)
    assert (role.is_worker(), role.worker_index(), role.worker_num()) == (True, 1, 2)
    assert role.get_pserver_endpoints() == SERVERS
    for args, message in [
        ((0, role_maker.Role.WORKER, 2, "a:1"), "must be a list"),
        ((0, role_maker.Role.WORKER, 2, ["a:1", "a:1"]), "duplicates"),
        ((0, 7, 2, SERVERS), "Role.WORKER"),
        ((2, role_maker.Role.SERVER, 2, SERVERS), r"current_id=2 must be in \[0, 1\]"),
        ((0, role_maker.Role.WORKER, 0, SERVERS), "worker_num must be at least 1"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            role_maker.UserDefinedRoleMaker(*args)


def test_each_fleet_refuses_the_other_modes_role():
    with pytest.raises(InvalidArgumentError, match="parameter_server.distribute_transpiler"):
        collective_fleet.init(role_maker.UserDefinedRoleMaker(0, role_maker.Role.WORKER, 1,
                                                              SERVERS))
    with pytest.raises(InvalidArgumentError, match="role without pservers"):
        DistributedTranspiler().init(role_maker.UserDefinedCollectiveRoleMaker(0, ["a:1"]))


# -- strategies -----------------------------------------------------------------------------
def test_strategies_pick_the_training_mode():
    assert training_mode(StrategyFactory.create_sync_strategy()) == "sync"
    assert training_mode(StrategyFactory.create_async_strategy()) == "async"
    assert training_mode(StrategyFactory.create_half_async_strategy()) == "half_async"
    config = fluid.DistributeTranspilerConfig()
    assert training_mode(config) == "sync"
    config.sync_mode = False  # fluid 1.8: no runtime split either -> half async
    assert training_mode(config) == "half_async"
    config.runtime_split_send_recv = True
    assert training_mode(config) == "async"
    assert training_mode(StrategyFactory.create_geo_strategy(10)) == "geo"  # test_ps_geo.py
    # what the transpiler runs: fluid's mode flags resolved, the user's slicing kept
    strategy = StrategyFactory.create_sync_strategy()
    strategy.set_program_config({"slice_var_up": False, "sync_mode": False})
    run = transpiler_config(strategy)
    assert (run.sync_mode, run.runtime_split_send_recv, run.half_async,
            run.slice_var_up) == (True, False, False, False)
    assert strategy.get_program_config().completely_not_async  # the strategy's flags stay


def test_strategy_setters_refuse_unknown_fields():
    strategy = StrategyFactory.create_async_strategy()
    with pytest.raises(InvalidArgumentError, match="no field 'no_such'"):
        strategy.set_program_config({"no_such": 1})
    with pytest.raises(InvalidArgumentError, match="no flag"):
        strategy.set_trainer_runtime_config({"communicator_nope": "1"})
    strategy.set_trainer_runtime_config({"communicator_send_queue_size": "4"})
    flags = strategy.get_trainer_runtime_config().get_communicator_flags()
    assert flags["communicator_send_queue_size"] == "4"


def test_strategies_set_fluids_runtime_flags(monkeypatch):
    """fluid 1.8: every strategy's BuildStrategy has async_mode=True; the communicator flags
    are picked by mode, and sync / half async force the send queue to CPU_NUM (read then)."""
    from spmd.fluid.transpiler.distribute_transpiler import ServerRuntimeConfig

    monkeypatch.setenv("CPU_NUM", "2")
    sync = StrategyFactory.create_sync_strategy()
    assert sync.get_build_strategy().async_mode and sync.get_execute_strategy().use_thread_barrier
    sync.get_trainer_runtime_config().runtime_configs["communicator_send_queue_size"] = "50"
    with pytest.warns(UserWarning, match="forced to 2"):
        flags = sync.get_trainer_runtime_config().get_communicator_flags()
    assert flags["communicator_send_queue_size"] == "2"
    assert "communicator_independent_recv_thread" not in flags
    asyn = StrategyFactory.create_async_strategy()
    assert asyn.get_build_strategy().async_mode
    assert "communicator_independent_recv_thread" in \
        asyn.get_trainer_runtime_config().get_communicator_flags()
    geo = StrategyFactory.create_geo_strategy(5)
    geo.set_build_strategy(fluid.BuildStrategy())  # a new BuildStrategy gets async_mode too
    assert geo.get_build_strategy().async_mode
    assert sorted(geo.get_trainer_runtime_config().get_communicator_flags()) == [
        "communicator_send_wait_times", "communicator_thread_pool_size"]
    server = ServerRuntimeConfig()  # the transpiler's class is the one the strategies take
    server._rpc_send_thread_num = 24
    geo.set_server_runtime_config(server)
    assert geo.get_server_runtime_config()._rpc_send_thread_num == 24


# -- fleet's programs -----------------------------------------------------------------------
def _mixed_net():
    ids = fluid.data("ids", [None, 1], "int64")
    x = fluid.data("x", [None, 100], "float32")
    y = fluid.data("y", [None, 1], "float32")
    emb = fluid.layers.embedding(ids, size=[2048, 16], is_sparse=True)
    h = fluid.layers.fc(fluid.layers.concat([x, emb], axis=1), 200, act="tanh")
    return fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))


def _built(minimize):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _mixed_net()
        minimize(loss)
    return main, startup


def _fingerprints(*programs):
    return [p.fingerprint() for p in programs]


@pytest.mark.parametrize("mode", ["sync", "async", "half_async"])
@pytest.mark.parametrize("role", [role_maker.Role.WORKER, role_maker.Role.SERVER])
def test_fleet_programs_are_the_transpilers(mode, role):
    f = DistributedTranspiler()
    f.init(role_maker.UserDefinedRoleMaker(1, role, 2, SERVERS))
    strategy = getattr(StrategyFactory, f"create_{mode}_strategy")()
    strategy.set_program_config({"wait_port": False})  # no pserver runs here
    _, startup = _built(lambda loss: f.distributed_optimizer(
        fluid.optimizer.Adam(0.01), strategy).minimize(loss))

    config = fluid.DistributeTranspilerConfig()
    config.sync_mode = mode == "sync"
    config.runtime_split_send_recv = mode == "async"
    t = fluid.DistributeTranspiler(config)
    servers = ",".join(SERVERS)

    def transpile(loss):  # within the model's name scope, as fleet's minimize transpiles
        fluid.optimizer.Adam(0.01).minimize(loss)
        main2, startup2 = loss.block.program, fluid.default_startup_program()
        if role == role_maker.Role.WORKER:
            t.transpile(1, program=main2, pservers=servers, trainers=2,
                        sync_mode=config.sync_mode, startup_program=startup2)
            want.extend(_fingerprints(t.get_trainer_program(wait_port=False), startup2))
        else:
            t.transpile(0, program=main2, pservers=servers, trainers=2,
                        sync_mode=config.sync_mode, startup_program=startup2,
                        current_endpoint=SERVERS[1])
            want.extend(_fingerprints(*t.get_pserver_programs(SERVERS[1])))

    want = []
    _built(transpile)
    if role == role_maker.Role.WORKER:
        assert f.startup_program is startup
        ops = [op.type for op in f.main_program.global_block().ops]
        assert "send" in ops and "recv" in ops and "adam" not in ops
    else:
        assert f.main_program.global_block().ops[0].type == "listen_and_serv"
    assert f.training_mode == mode
    assert _fingerprints(f.main_program, f.startup_program) == want


def test_fleet_calls_out_of_place_are_refused():
    f = DistributedTranspiler()
    with pytest.raises(PreconditionError, match="fleet.init"):
        f.distributed_optimizer(fluid.optimizer.SGD(0.1))
    f.init(role_maker.UserDefinedRoleMaker(0, role_maker.Role.WORKER, 2, SERVERS))
    with pytest.raises(PreconditionError, match="minimize"):
        f.init_worker()
    with pytest.raises(InvalidArgumentError, match="StrategyFactory"):
        f.distributed_optimizer(fluid.optimizer.SGD(0.1), "sync")
    strategy = StrategyFactory.create_sync_strategy()
    strategy.set_program_config({"wait_port": False})
    _built(lambda loss: f.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy).minimize(loss))
    f.init_worker()
    with pytest.raises(PreconditionError, match="only a server"):
        f.init_server()
    with pytest.raises(PreconditionError, match="only a server"):
        f.run_server()


# -- jobs -----------------------------------------------------------------------------------
@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", [
    ["--mode", "sync", "--opt", "sgd", "--steps", "3"],
    ["--mode", "sync", "--opt", "adam", "--decay", "--steps", "4", "--user-defined"],
    ["--mode", "config-sync", "--opt", "sgd", "--steps", "3"],
], ids=["sgd", "adam-decay-user-defined", "config-sgd"])
def test_sync_fleet_equals_one_process(tmp_path, case):
    pytest.importorskip("grpc")
    model = ["--opt", case[case.index("--opt") + 1], "--steps", case[case.index("--steps") + 1]]
    model += ["--decay"] if "--decay" in case else []
    out = run_job(tmp_path, case + ["--init-seed", "3"], script="fleet_role.py")
    check_equals_one_process(tmp_path, out, model)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["async", "half_async"])
def test_async_fleet_learns_digits(tmp_path, mode):
    pytest.importorskip("grpc")
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    out = run_job(tmp_path, ["--model", "digits", "--mode", mode, "--steps", "80"],
                  script="fleet_role.py")
    final = assemble(out["ps0"], out["ps1"])
    digits = load_digits()
    hidden = np.maximum(digits.data / 16.0 @ final["fc_0.w_0"] + final["fc_0.b_0"], 0)
    accuracy = ((hidden @ final["fc_1.w_0"] + final["fc_1.b_0"]).argmax(1)
                == digits.target).mean()
    assert accuracy > 0.8, accuracy
    for t in ("t0", "t1"):
        losses = out[t]["losses"]
        assert losses[-10:].mean() < 0.5 * losses[:3].mean(), losses


@pytest.mark.timeout(240)
def test_save_persistables_then_init_server_restores(tmp_path):
    """Trainer 0's fleet.save_persistables: whole parameters in the directory, each
    pserver's slice with its Adam moments in pserver_<i>/. fleet.init_server(dir) restores
    every value of that slice; from a directory of whole parameters only, it cuts its
    blocks out of them."""
    pytest.importorskip("grpc")
    saved = tmp_path / "model"
    first = tmp_path / "first"
    first.mkdir()
    out = run_job(first, ["--mode", "sync", "--opt", "adam", "--steps", "3", "--init-seed", "4",
                          "--save", str(saved)], script="fleet_role.py")
    final = assemble(out["ps0"], out["ps1"])
    # the whole parameters, read back with fluid.io into the model built in one process
    main, startup = _built(lambda loss: fluid.optimizer.Adam(0.01).minimize(loss))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        fluid.io.load_params(exe, str(saved), main)
        loaded = {n: np.asarray(scope.find_var(n).get_tensor()) for n in PARAMS}
    for name in PARAMS:
        np.testing.assert_allclose(loaded[name], final[name], rtol=1e-6, err_msg=name)

    again = tmp_path / "again"
    again.mkdir()
    back = run_job(again, ["--mode", "sync", "--opt", "adam", "--steps", "0",
                           "--restore", str(saved)], script="fleet_role.py")
    for i in (0, 1):
        moments = [n for n in out[f"ps{i}"] if "moment" in n]
        assert moments, sorted(out[f"ps{i}"])
        for name, value in out[f"ps{i}"].items():
            np.testing.assert_array_equal(back[f"ps{i}.init"][name], value, err_msg=name)

    whole_only = tmp_path / "whole"
    shutil.copytree(saved, whole_only, ignore=shutil.ignore_patterns("pserver_*"))
    third = tmp_path / "third"
    third.mkdir()
    cut = run_job(third, ["--mode", "sync", "--opt", "adam", "--steps", "0",
                          "--restore", str(whole_only)], script="fleet_role.py")
    restored = assemble(cut["ps0.init"], cut["ps1.init"])
    for name in PARAMS:
        np.testing.assert_array_equal(restored[name], final[name], err_msg=name)
    assert not os.path.exists(whole_only / "pserver_0")


FLUID = load("fleet_pserver")  # fluid 1.8.5's own fleet run (tests/oracle/make_fleet_pserver.py)
with open(os.path.join(DATA_DIR, "fleet_pserver.json")) as _f:
    FLUID_META = json.load(_f)["meta"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", ["sync-sgd", "config-sync-sgd"])
def test_sync_fleet_equals_fluids_fleet_run(tmp_path, case):
    """The same fleet script in fluid 1.8.5 (2 pservers, 2 trainers, from seeded_init(1)):
    each trainer's losses and the dense parameters they end with. fluid's fleet with a
    decay schedule is not compared: its sync strategy freezes the schedule's step counter
    (each trainer sends its never-incremented counter and the pserver sums them, so every
    step runs at global step = the number of trainers; make_fleet_pserver.py shows it), where
    spmd's equals one process (test_sync_fleet_equals_one_process)."""
    pytest.importorskip("grpc")
    fluid_run = FLUID[case]
    out = run_job(tmp_path, list(fluid_run["args"]) + ["--init-seed", str(FLUID_META["seed"])],
                  script="fleet_role.py")
    check_against_fluid(out, fluid_run, FLUID_META, "fluid 1.8.5's fleet run")
