"""Parameters an op updates itself (its `distribute_update_vars` attribute: search_pyramid_hash's
embedding, Paddle 1.8's test_fleet_pyramid_hash.py) are distributed as fluid 1.8's transpiler
does (_get_distribute_update_vars: a (param, param) pair): with Geo-SGD each pserver block
gets its delta and its `sum` block. The expected programs are what fluid 1.8.5 builds for the
same model (its listen_and_serv attributes, block 1 and the pserver startup, read once)."""
from __future__ import annotations

import pytest

import spmd.fluid as fluid
import spmd.fluid.incubate.fleet.base.role_maker as role_maker
from spmd.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
from spmd.fluid.transpiler.distribute_transpiler import DistributeTranspilerConfig


def _pyramid_model(update_vars=("PyramidHash_emb_0",)):
    x = fluid.data(name="x", shape=[16, 10], dtype="int32", lod_level=1)
    emb = fluid.contrib.layers.search_pyramid_hash(
        input=x, num_emb=64, space_len=128 * 64, pyramid_layer=4, rand_len=16,
        drop_out_percent=0.5, is_training=True, use_filter=False, white_list_len=6400,
        black_list_len=2800, seed=3, lr=0.002,
        param_attr=fluid.ParamAttr(name="PyramidHash_emb_0", learning_rate=0),
        param_attr_wl=fluid.ParamAttr(name="Filter", learning_rate=0), param_attr_bl=None,
        distribute_update_vars=list(update_vars), name=None)
    return fluid.layers.reduce_sum(emb)


def _fleet_programs(geo: bool):
    role = role_maker.UserDefinedRoleMaker(
        current_id=0, role=role_maker.Role.SERVER, worker_num=2,
        server_endpoints=["127.0.0.1:36011", "127.0.0.1:36012"])
    fleet.init(role)
    strategy = DistributeTranspilerConfig()
    strategy.sync_mode = False
    strategy.geo_sgd_mode = geo
    strategy.geo_sgd_need_push_nums = 5
    optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy)
    optimizer.minimize(cost := _pyramid_model())
    return cost, fleet.main_program, fleet.startup_program


def _fresh():
    return fluid.program_guard(fluid.Program(), fluid.Program())


def test_geo_pserver_holds_the_self_updated_embedding_as_fluid_does():
    with _fresh(), fluid.unique_name.guard():
        _, main, startup = _fleet_programs(geo=True)
    serv = main.global_block().ops[0]
    assert [op.type for op in main.global_block().ops] == ["listen_and_serv"]
    assert serv.input("X") == []
    assert serv.attr("grad_to_block_id") == ["PyramidHash_emb_0.delta:1"]
    assert serv.attr("distributed_mode") == 3  # GEO
    body = main.block(1).ops
    assert [op.type for op in body] == ["sum"]
    assert body[0].input("X") == ["PyramidHash_emb_0", "PyramidHash_emb_0.delta"]
    assert body[0].output("Out") == ["PyramidHash_emb_0"]
    assert tuple(main.global_block().var("PyramidHash_emb_0").shape) == (128 * 64 + 16, 1)
    inits = [(op.type, op.output("Out")) for op in startup.global_block().ops]
    assert inits == [("uniform_random", ["PyramidHash_emb_0"])]


def test_outside_geo_sgd_it_is_refused_naming_the_fix():
    with _fresh(), fluid.unique_name.guard():
        with pytest.raises(ValueError, match="geo_sgd_mode = True"):
            _fleet_programs(geo=False)


def test_a_missing_distribute_update_var_is_named():
    with _fresh(), fluid.unique_name.guard():
        cost = _pyramid_model()
        fluid.optimizer.SGD(0.1).minimize(cost)
        op = fluid.default_main_program().global_block().ops[0]
        op._set_attr("distribute_update_vars", "PyramidHash_emb_0,no_such_table")
        t = fluid.DistributeTranspiler()
        with pytest.raises(ValueError, match="no_such_table"):
            t.transpile(0, pservers="127.0.0.1:36011", trainers=1)
