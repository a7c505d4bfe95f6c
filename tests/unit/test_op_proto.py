"""OpProtoHolder (fluid.framework) and fluid.op.Operator's proto queries: the protos come from
spmd's op definitions, and a program built from a proto the way Paddle's op_test.py builds it
runs on spmd's kernels."""
import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.framework import OpProtoHolder
from spmd.fluid.op import Operator
from spmd.ops.proto import AttrType


def test_proto_slots_and_attrs_follow_the_op_definition():
    proto = OpProtoHolder.instance().get_op_proto("layer_norm")
    assert proto.type == "layer_norm"
    ins = {v.name: v for v in proto.inputs}
    assert set(ins) == {"X", "Scale", "Bias"}
    assert not ins["X"].dispensable and ins["Scale"].dispensable
    outs = {v.name: v for v in proto.outputs}
    # Mean/Variance are kept for the gradient: fluid's intermediate outputs
    assert outs["Mean"].intermediate and not outs["Y"].intermediate
    attrs = {a.name: a for a in proto.attrs}
    assert attrs["epsilon"].type == AttrType.FLOAT and not attrs["epsilon"].generated
    assert attrs["begin_norm_axis"].type == AttrType.INT
    assert attrs["op_role"].generated
    assert OpProtoHolder.generated_op_attr_names() >= {"op_role", "op_namescope"}


def test_duplicable_slot_and_unknown_op():
    proto = OpProtoHolder.instance().get_op_proto("sum")
    assert proto.inputs[0].name == "X" and proto.inputs[0].duplicable
    assert Operator.get_op_inputs("sum") == [("X", True)]
    assert ("Out", False) in Operator.get_op_outputs("sum")
    assert "axis" in Operator.get_op_attr_names("elementwise_add")
    with pytest.raises(ValueError, match="not been registered"):
        OpProtoHolder.instance().get_op_proto("no_such_op_anywhere")


def test_program_built_from_the_proto_runs():
    """op_test.py's path: a var per proto slot, block.append_op, Executor.run."""
    x = np.random.RandomState(0).uniform(-1, 1, (3, 4)).astype("float32")
    y = np.random.RandomState(1).uniform(-1, 1, (3, 4)).astype("float32")
    values = {"X": x, "Y": y}
    proto = OpProtoHolder.instance().get_op_proto("elementwise_mul")
    prog = fluid.Program()
    block = prog.global_block()
    inputs = {v.name: block.create_var(name=v.name, shape=list(values[v.name].shape),
                                       dtype="float32") for v in proto.inputs}
    outputs = {v.name: block.create_var(name=v.name, dtype="float32") for v in proto.outputs}
    block.append_op(type="elementwise_mul", inputs=inputs, outputs=outputs, attrs={})
    exe = fluid.Executor(fluid.CPUPlace())
    (out,) = exe.run(prog, feed=values, fetch_list=["Out"])
    np.testing.assert_allclose(out, x * y, rtol=1e-6)
