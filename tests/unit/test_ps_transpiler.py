"""Parameter-server transpiling beyond the fluid oracle (test_ps_transpiler_oracle.py):
fluid 1.8's block sizes, the programs with distributed ops build, clone, serialize and print,
any role may be asked for in any order, runtime_split_send_recv, DC-ASGD, and the errors."""
from __future__ import annotations

import pytest
from oracle.make_transpiler import PSERVERS, build

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from spmd.ps.slicing import HashName, RoundRobin, VarBlock, slice_variable


@pytest.mark.parametrize("shape,count,sizes", [
    ((100, 200), 2, [10000, 10000]),        # cut in two, whole rows
    ((13, 10), 2, [130]),                    # under 2 * 8192: one block
    ((2000, 16), 3, [10672, 10672, 10656]),  # 32000 // 8192 = 3 blocks, rounded to rows
    ((30000,), 4, [10000, 10000, 10000]),  # at most 30000 // 8192 = 3 blocks
])
def test_slice_variable_follows_fluid(shape, count, sizes):
    blocks = slice_variable([("w", shape)], count, 8192)
    assert [b.size for b in blocks] == sizes
    assert sum(b.size for b in blocks) == (shape[0] * (shape[1] if len(shape) > 1 else 1))
    if len(shape) > 1:
        assert all(b.shape[1:] == shape[1:] for b in blocks)


def test_dispatchers():
    blocks = [VarBlock(f"v{i}", 0, 1, (1,)) for i in range(5)]
    rr = RoundRobin(["a:1", "b:2"])
    assert rr.dispatch(blocks[:3]) == ["a:1", "b:2", "a:1"]
    assert rr.dispatch(blocks[:1]) == ["b:2"]  # continues until reset
    rr.reset()
    assert rr.dispatch(blocks[:1]) == ["a:1"]
    h = HashName(["a:1", "b:2", "c:3"])
    assert h.dispatch(blocks) == HashName(["a:1", "b:2", "c:3"]).dispatch(blocks)


def transpiled(model="big_param", **opts):
    main, startup = build(fluid, model)
    config = fluid.DistributeTranspilerConfig()
    for k, v in opts.pop("config", {}).items():
        setattr(config, k, v)
    t = fluid.DistributeTranspiler(config=config)
    opts.setdefault("pservers", PSERVERS)
    t.transpile(0, program=main, trainers=2, startup_program=startup, **opts)
    return t, main, startup


def test_programs_with_distributed_ops_clone_serialize_and_print():
    t, main, startup = transpiled()
    ps_main, ps_start = t.get_pserver_programs("127.0.0.1:6170")
    trainer = t.get_trainer_program(wait_port=False)
    for prog in (trainer, startup, ps_main, ps_start):
        for copy in (prog.clone(), fluid.Program.parse_from_string(prog.serialize_to_string())):
            assert copy.fingerprint() == prog.fingerprint()
            assert copy.num_blocks == prog.num_blocks
        assert str(prog)
    text = str(ps_main)
    assert "listen_and_serv" in text and "optimize_blocks=[1, 2, 3]" in text
    assert "split_byref" in str(trainer) and "concat" in str(trainer)


def test_roles_in_any_order_and_the_trainer_program_is_the_main_program():
    t, main, startup = transpiled()
    before = t.get_pserver_program("127.0.0.1:6171")
    trainer = t.get_trainer_program(wait_port=False)
    assert trainer is main
    after = t.get_pserver_program("127.0.0.1:6171")
    assert after.fingerprint() == before.fingerprint()
    assert not [op for op in main.global_block().ops if op.type == "sgd"]


def test_runtime_split_send_recv_sends_whole_variables():
    t, main, _ = transpiled(sync_mode=False, config={"sync_mode": False,
                                                     "runtime_split_send_recv": True})
    ops = t.get_trainer_program(wait_port=False).global_block().ops
    send = next(op for op in ops if op.type == "send" and "fc_0.w_0@GRAD" in op.input("X"))
    assert send.attr("sections") == [50, 50]
    assert send.attr("send_varnames") == ["fc_0.w_0@GRAD.block0", "fc_0.w_0@GRAD.block1"]
    recv = next(op for op in ops if op.type == "recv" and op.output("Out") == ["fc_0.w_0"])
    assert recv.attr("recv_varnames") == ["fc_0.w_0.block0", "fc_0.w_0.block1"]
    assert not [op for op in ops if op.type in ("split_byref", "concat", "send_barrier")]
    ls = t.get_pserver_program("127.0.0.1:6170").global_block().ops[0]
    assert ls.attr("distributed_mode") == 1  # fluid's ASYNC


def test_dc_asgd_compensates_on_the_pserver():
    t, _, _ = transpiled(sync_mode=False, config={"enable_dc_asgd": True})
    main, start = t.get_pserver_programs("127.0.0.1:6170")
    assert main.global_block().ops[0].attr("dc_asgd") is True
    block = main.block(main.global_block().ops[0].attr("optimize_blocks")[0])
    types = [op.type for op in block.ops]
    assert types[:5] == ["ref_by_trainer_id", "elementwise_sub", "elementwise_mul",
                         "elementwise_mul", "elementwise_add"]
    sgd = block.ops[-1]
    assert sgd.type == "sgd" and sgd.input("Grad") == block.ops[4].output("Out")
    assert [op.type for op in start.global_block().ops].count("assign") == 2 * 3


def test_errors_are_actionable():
    with pytest.raises(InvalidArgumentError, match="needs async training"):
        transpiled(config={"enable_dc_asgd": True})
    with pytest.raises(InvalidArgumentError, match="pservers must be 'ip:port"):
        transpiled(pservers="localhost")
    with pytest.raises(InvalidArgumentError, match="split_method must be"):
        fluid.DistributeTranspiler(_config(split_method=RoundRobin(["a:1"])))
    with pytest.raises(InvalidArgumentError, match="min_block_size must be >= 8192"):
        fluid.DistributeTranspiler(_config(min_block_size=100))
    t, _, _ = transpiled()
    with pytest.raises(InvalidArgumentError, match="not one of transpile"):
        t.get_pserver_program("127.0.0.1:9999")
    with pytest.raises(InvalidArgumentError, match="transpile"):
        fluid.DistributeTranspiler().get_pserver_program("127.0.0.1:6170")


def _config(**fields):
    config = fluid.DistributeTranspilerConfig()
    for k, v in fields.items():
        setattr(config, k, v)
    return config


def test_a_distributed_table_is_prefetched_from_the_pservers():
    """is_distributed=True: the table stays on the pservers, read by the remote-prefetch
    lookup and updated from sparse gradients (fluid 1.8 used split_ids / prefetch /
    merge_ids ops for it; the values are the same)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[100, 4], is_distributed=True)
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(emb))
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=PSERVERS, trainers=2, startup_program=startup)
    types = [op.type for op in t.get_trainer_program(wait_port=False).global_block().ops]
    assert "distributed_lookup_table" in types and "lookup_table" not in types
    sends = [op for op in t.get_trainer_program(wait_port=False).global_block().ops
             if op.type == "send"]
    table = main.global_block().all_parameters()[0].name
    assert any(n.startswith(table + "@GRAD") for op in sends for n in op.input_arg_names)


def test_a_sliced_parameter_needs_a_row_separable_update():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 100], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 200))
        fluid.optimizer.Lamb(0.01).minimize(loss)
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=PSERVERS, trainers=2, startup_program=startup)
    with pytest.raises(InvalidArgumentError, match="slice_var_up = False"):
        t.get_pserver_program("127.0.0.1:6170")


def test_config_sync_mode_and_runtime_split_exclude_each_other():
    """fluid 1.8's DistributeTranspilerConfig setters: neither flag may be None, and
    runtime_split_send_recv=True needs sync_mode=False first (and back)."""
    config = fluid.DistributeTranspilerConfig()
    with pytest.raises(ValueError, match="can't be None"):
        config.sync_mode = None
    with pytest.raises(ValueError, match="can't be None"):
        config.runtime_split_send_recv = None
    with pytest.raises(ValueError, match="sync_mode=False"):
        config.runtime_split_send_recv = True
    config.sync_mode = False
    config.runtime_split_send_recv = True
    assert (config.sync_mode, config.runtime_split_send_recv) == (False, True)
    with pytest.raises(ValueError, match="runtime_split_send_recv=False"):
        config.sync_mode = True
