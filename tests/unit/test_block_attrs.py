"""Block attributes as fluid 1.8.5 has them: an op's `sub_block` (and a pserver's
`optimize_blocks`) may be given as a Block, its desc or an index; `op.attr` hands back the
block's desc (`.id` its index), `op.all_attrs()` the Block itself, `op._block_attr_id` the
index; `Program.block` takes any of them. (Checked on fluid 1.8.5: `type(op.attr('sub_block'))`
is `core.BlockDesc`, `all_attrs()['sub_block']` a `framework.Block`, `attr_type` BLOCK.)"""
from __future__ import annotations

import numpy as np

import spmd.fluid as fluid
from spmd.fluid.framework import OpProtoHolder


def cond_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 1], "float32")
        one = fluid.layers.fill_constant([1], "float32", 1.0)
        pred = fluid.layers.less_than(fluid.layers.reduce_sum(x), one)
        out = fluid.layers.cond(pred, lambda: x * 2, lambda: x * 3)
    return main, startup, out


def test_an_ops_sub_block_reads_back_as_fluids_block_desc_and_block():
    main, _, _ = cond_program()
    op = next(o for o in main.global_block().ops if o.type == "conditional_block")
    desc = op.attr("sub_block")
    assert desc.id == op._block_attr_id("sub_block") and desc.id >= 1
    assert desc.op_size() == len(main.block(desc.id).ops)
    block = op.all_attrs()["sub_block"]
    assert block is main.block(desc.id) and op._block_attr("sub_block") is block
    assert main.block(block) is block and main.block(desc) is block


def test_a_hand_built_conditional_block_takes_a_block_and_infers_shapes_again():
    # Paddle's test_conditional_block.py::TestConditionalBlockOpInferShape
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        gb = main.global_block()
        sub = main._create_block()
        main._rollback()
        scope = gb.create_var(type=fluid.core.VarDesc.VarType.STEP_SCOPES)
        cond = fluid.layers.fill_constant(shape=[1], dtype="bool", value=False)
        op = gb.append_op(type="conditional_block", inputs={"Cond": [cond], "Input": []},
                          outputs={"Out": [], "Scope": [scope]},
                          attrs={"sub_block": sub, "is_scalar_condition": True})
        op.desc.infer_shape(gb.desc)
    assert op.attr("sub_block").id == sub.idx
    assert op.attrs["sub_block"] == sub.idx  # the IR keeps the index
    # given as its desc, the same block
    op.desc.set_block_attr("sub_block", sub.desc)
    assert op._block_attr_id("sub_block") == sub.idx


def test_a_program_with_block_attributes_clones_and_runs():
    main, startup, out = cond_program()
    test = main.clone(for_test=True)
    op = next(o for o in test.global_block().ops if o.type == "conditional_block")
    assert op.all_attrs()["sub_block"].program is test
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    x = np.array([[0.25], [0.5]], "float32")  # sum 0.75 < 1: the true branch, x * 2
    got, = exe.run(test, feed={"x": x}, fetch_list=[out.name])
    np.testing.assert_allclose(got, x * 2)


def test_block_attributes_are_fluids_block_kind_in_the_op_proto():
    from spmd.ops.proto import AttrType

    proto = OpProtoHolder.instance().get_op_proto("conditional_block")
    kinds = {a.name: a.type for a in proto.attrs}
    assert kinds["sub_block"] == AttrType.BLOCK
    proto = OpProtoHolder.instance().get_op_proto("listen_and_serv")
    assert {a.name: a.type for a in proto.attrs}["optimize_blocks"] == AttrType.BLOCKS


def test_a_pservers_optimize_blocks_read_back_as_blocks():
    main = fluid.Program()
    gb = main.global_block()
    b1 = main._create_block()
    main._rollback()
    b2 = main._create_block()
    main._rollback()
    op = gb.append_op(type="listen_and_serv", inputs={"X": []},
                      attrs={"optimize_blocks": [b1, b2.idx], "endpoint": "127.0.0.1:0"})
    assert op.attrs["optimize_blocks"] == [1, 2]
    assert [b.idx for b in op.all_attrs()["optimize_blocks"]] == [1, 2]
    assert [d.id for d in op.attr("optimize_blocks")] == [1, 2]
