"""nccl2 mode: DistributeTranspiler appends c_comm_init to the startup program; endpoints that
disagree with the MPI world (here a world of one) are clear errors naming both."""
from __future__ import annotations

import os

import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError


@pytest.fixture
def progs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup


def nccl2():
    config = fluid.DistributeTranspilerConfig()
    config.mode = "nccl2"
    return fluid.DistributeTranspiler(config=config)


def test_appends_comm_init_to_the_startup_program(progs):
    main, startup = progs
    before = len(startup.global_block().ops)
    t = nccl2()
    t.transpile(0, program=main, trainers="127.0.0.1:6170", startup_program=startup,
                current_endpoint="127.0.0.1:6170")
    ops = startup.global_block().ops
    assert len(ops) == before + 1 and ops[-1].type == "c_comm_init"
    assert (ops[-1].attr("nranks"), ops[-1].attr("rank")) == (1, 0)
    assert ops[-1].attr("endpoints") == ["127.0.0.1:6170"]
    assert t.get_trainer_program() is main
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)  # makes the (single) world


@pytest.mark.parametrize("kwargs, message", [
    ({"trainer_id": 0, "trainers": "h:1,h:2", "current_endpoint": "h:1"},
     r"\[rank 0/1\] transpile: 2 trainer endpoint\(s\) .* MPI world has 1 process.*mpirun -n 2"),
    ({"trainer_id": 1, "trainers": "h:1", "current_endpoint": "h:1"},
     r"trainer_id=1 but this process is MPI rank 0"),
    ({"trainer_id": 0, "trainers": "h:1", "current_endpoint": "h:9"},
     r"current_endpoint=h:9 but trainer 0's endpoint is h:1"),
    ({"trainer_id": 0, "trainers": 2, "current_endpoint": "h:1"},
     r"trainer endpoints as 'ip:port,ip:port,...', got 2"),
])
def test_endpoints_disagreeing_with_mpi(progs, kwargs, message, monkeypatch):
    # SPMD_ENV_START=0: a plain process given several trainer endpoints would otherwise
    # re-execute itself to join them (spmd.comm.join.join_for_transpile), here pytest itself
    monkeypatch.setenv("SPMD_ENV_START", "0")
    before = dict(os.environ)
    main, startup = progs
    with pytest.raises(InvalidArgumentError, match=message):
        nccl2().transpile(program=main, startup_program=startup, **kwargs)
    assert all(op.type != "c_comm_init" for op in startup.global_block().ops)
    assert dict(os.environ) == before  # no trainer variables left behind for later code


def test_workers_is_accepted_as_in_fluids_example(progs):
    main, startup = progs
    nccl2().transpile(0, program=main, workers="h:1", current_endpoint="h:1",
                      startup_program=startup)
    assert startup.global_block().ops[-1].type == "c_comm_init"


def test_pserver_mode_is_the_default_and_an_unknown_mode_is_a_clear_error(progs):
    """fluid's default mode is pserver (tests/unit/test_ps_transpiler*.py test it)."""
    main, startup = progs
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup)
    assert "send" in [op.type for op in t.get_trainer_program(wait_port=False).global_block().ops]
    config = fluid.DistributeTranspilerConfig()
    config.mode = "collective"
    with pytest.raises(InvalidArgumentError, match="mode='nccl2'"):
        fluid.DistributeTranspiler(config).transpile(0, program=main, startup_program=startup)


def test_trainer_program_before_transpile_is_an_error():
    with pytest.raises(InvalidArgumentError, match="call transpile"):
        nccl2().get_trainer_program()


def test_comm_init_for_another_world_fails_at_startup(progs):
    """A startup program transpiled for 2 trainers, run by a world of one."""
    main, startup = progs
    startup.global_block().append_op(
        "c_comm_init", attrs={"nranks": 2, "rank": 1, "endpoints": ["h:1", "h:2"],
                              "current_endpoint": "h:2"})
    with pytest.raises(Exception, match=r"transpiled for trainer 1 of 2 but this process is "
                                        r"rank 0 of 1"):
        fluid.Executor(fluid.CPUPlace()).run(startup, scope=fluid.Scope())
