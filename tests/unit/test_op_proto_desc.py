"""The descriptor handles Paddle's tests drive (core.ProgramDesc, block.desc.append_op,
core.get_grad_op_desc): they build real spmd ops, whose results are checked against numpy."""
import numpy as np

import spmd.fluid as fluid
from spmd.fluid import core


def test_program_desc_infers_shapes_of_an_op_filled_in_by_hand():
    prog = core.ProgramDesc()
    block = prog.block(0)
    for name, shape in ((b"x", [10, 20]), (b"y", [20, 30])):
        var = block.var(name)
        var.set_type(core.VarDesc.VarType.LOD_TENSOR)
        var.set_shape(shape)
    out = block.var(b"out")
    op = block.append_op()
    op.set_type("mul")
    op.set_input("X", ["x"])
    op.set_input("Y", ["y"])
    op.set_output("Out", ["out"])
    op._set_attr("x_num_col_dims", 1)
    op.check_attrs()
    assert op.attr("y_num_col_dims") == 1  # the default, filled in
    op.infer_shape(block)
    assert out.shape() == [10, 30]
    assert block.find_var(b"nope") is None


def test_grad_op_desc_runs_and_gives_the_gradient():
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (2, 3)).astype("float32")
    y = rng.uniform(-1, 1, (3,)).astype("float32")
    dout = rng.uniform(-1, 1, (2, 3)).astype("float32")
    program = fluid.Program()
    block = program.global_block()
    for name, value in (("x", x), ("y", y), ("out", x), ("out@GRAD", dout)):
        block.create_var(name=name, dtype="float32", shape=value.shape)
    op = block.append_op(type="elementwise_mul", inputs={"X": ["x"], "Y": ["y"]},
                         outputs={"Out": ["out"]}, attrs={"axis": -1})
    descs, grad_to_var = core.get_grad_op_desc(op.desc, set(), [])
    assert [d.type() for d in descs] == ["elementwise_mul_grad"]
    assert grad_to_var["x@GRAD"] == "x" and grad_to_var["y@GRAD"] == "y"
    new = block.desc.append_op()
    new.copy_from(descs[0])
    for name in descs[0].output_arg_names():
        block.desc.var(name.encode())
    descs[0].infer_shape(block.desc)
    program._sync_with_cpp()
    assert [o.type for o in block.ops] == ["elementwise_mul", "elementwise_mul_grad"]
    exe = fluid.Executor(fluid.CPUPlace())
    gx, gy = exe.run(program, feed={"x": x, "y": y, "out@GRAD": dout},
                     fetch_list=["x@GRAD", "y@GRAD"])
    np.testing.assert_allclose(gx, dout * y, rtol=1e-5)
    np.testing.assert_allclose(gy, (dout * x).sum(0), rtol=1e-5)


def test_no_grad_set_drops_that_gradient_and_role_helpers():
    program = fluid.Program()
    block = program.global_block()
    for name in ("x", "y"):
        block.create_var(name=name, dtype="float32", shape=(2, 3))
    op = block.append_op(type="elementwise_add", inputs={"X": ["x"], "Y": ["y"]},
                         outputs={"Out": ["out"]})
    descs, _ = core.get_grad_op_desc(op.desc, {"y"}, [])
    assert descs[0].output_arg_names() == ["x@GRAD"]
    assert core.has_grad_op_maker("elementwise_add")
    assert "elementwise_add_grad" in core._get_all_register_op_kernels()
    maker = core.op_proto_and_checker_maker
    assert maker.kOpRoleAttrName() == "op_role" and int(maker.OpRole.Backward) == 1
