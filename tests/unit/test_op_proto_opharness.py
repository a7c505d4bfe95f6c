"""What Paddle's op test harness (op_test.py / testsuite.py) does with one op, on spmd: scope
variables made by `scope.var` before they hold a value, element-wise edits for the numeric
gradient, an op run alone on LoD inputs, and fluid's role attributes on appended ops."""
import numpy as np

import spmd.fluid as fluid
from spmd.fluid import core
from spmd.fluid.op import Operator


def test_scope_var_exists_before_it_holds_a_value():
    scope = core.Scope()
    assert scope.find_var("w") is None
    scope.var("w")
    found = scope.find_var("w")
    assert found is not None and not found.is_initialized()
    kid = scope.new_scope()
    assert kid.find_var("w") is not None  # an ancestor's variable


def test_tensor_dims_and_elements():
    scope = core.Scope()
    t = scope.var("x").get_tensor()
    t._set_dims([2, 3])
    t.set(np.arange(6, dtype="float32").reshape(2, 3), fluid.CPUPlace())
    assert t._dtype() == core.VarDesc.VarType.FP32
    assert t._get_float_element(4) == 4.0
    t._set_float_element(4, -1.5)
    assert np.array(t)[1, 1] == -1.5


def test_numeric_gradient_with_an_op_run_alone_matches_the_kernels_gradient():
    """testsuite.create_op (op_role among the attributes) and get_numeric_gradient's loop."""
    scope, place = core.Scope(), fluid.CPUPlace()
    x = np.random.RandomState(0).uniform(-1, 1, (3, 4))
    op = Operator("tanh", X="x", Out="out", op_role=0)
    scope.var("x").get_tensor().set(x, place)
    t = scope.find_var("x").get_tensor()
    delta, grads = 1e-5, np.zeros(x.size)
    for i in range(x.size):
        orig = t._get_double_element(i)
        t._set_double_element(i, orig + delta)
        op.run(scope, place)
        pos = np.array(scope.find_var("out").get_tensor()).mean()
        t._set_double_element(i, orig - delta)
        op.run(scope, place)
        neg = np.array(scope.find_var("out").get_tensor()).mean()
        t._set_double_element(i, orig)
        grads[i] = (pos - neg) / delta / 2
    np.testing.assert_allclose(grads.reshape(x.shape), (1 - np.tanh(x) ** 2) / x.size,
                               rtol=1e-6)


def test_op_run_alone_reads_and_passes_on_lod():
    scope, place = core.Scope(), fluid.CPUPlace()
    x = np.arange(10, dtype="float32").reshape(5, 2)
    t = scope.var("x").get_tensor()
    t.set_recursive_sequence_lengths([[2, 3]])
    t.set(x, place)
    Operator("sequence_pool", X="x", Out="out", MaxIndex="idx", pooltype="SUM").run(scope, place)
    np.testing.assert_allclose(np.array(scope.find_var("out").get_tensor()),
                               [x[:2].sum(0), x[2:].sum(0)])
    Operator("scale", X="x", Out="y", scale=2.0).run(scope, place)
    assert scope.find_var("y").get_tensor().recursive_sequence_lengths() == [[2, 3]]


def test_appended_op_accepts_fluids_role_attributes():
    prog = fluid.Program()
    block = prog.global_block()
    block.create_var(name="a", shape=[2], dtype="float32")
    op = block.append_op(type="scale", inputs={"X": ["a"]}, outputs={"Out": ["b"]},
                         attrs={"scale": 3.0, "op_role": 0, "op_role_var": []})
    assert not op.has_attr("op_role")  # the role is the op's field
    (out,) = fluid.Executor(fluid.CPUPlace()).run(
        prog, feed={"a": np.array([1.0, 2.0], "float32")}, fetch_list=["b"])
    np.testing.assert_allclose(out, [3.0, 6.0])


def test_print_refuses_a_non_variable_and_float16_with_type_error():
    """Paddle's test_print_op: TypeError, as fluid's check_variable_and_dtype."""
    import pytest

    with fluid.program_guard(fluid.Program(), fluid.Program()):
        lod = fluid.create_lod_tensor(np.array([[-1.0]]), [[1]], fluid.CPUPlace())
        with pytest.raises(TypeError):
            fluid.layers.Print(lod)
        half = fluid.layers.data(name="h", shape=[4], dtype="float16")
        with pytest.raises(TypeError):
            fluid.layers.Print(half)


def test_unittest_exception_carries_fluids_message():
    import pytest

    with pytest.raises(core.EnforceNotMet, match="test exception"):
        core.__unittest_throw_exception__()


def test_tensor_copy_keeps_data_and_lod_on_the_place():
    t = core.LoDTensor()
    t.set(np.arange(6, dtype="float32").reshape(3, 2), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[1, 2]])
    place = core.Place()
    place.set_place(fluid.CPUPlace())
    copy = t._copy(place)
    t.set(np.zeros((3, 2), "float32"), fluid.CPUPlace())  # the copy is its own
    np.testing.assert_array_equal(np.array(copy), np.arange(6).reshape(3, 2))
    assert copy.recursive_sequence_lengths() == [[1, 2]]


def test_globals_report_mkldnn_off_and_refuse_turning_it_on():
    import pytest

    assert core.globals()["FLAGS_use_mkldnn"] is False
    core.globals()["FLAGS_use_mkldnn"] = False
    with pytest.raises(ValueError, match="no MKL-DNN kernels"):
        core.globals()["FLAGS_use_mkldnn"] = True


def test_logsumexp_of_none_is_an_assertion_error_as_in_fluid():
    """Paddle's test_logsumexp: fluid 1.8 asserts x is not None."""
    import pytest

    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(AssertionError, match="x is None"):
            fluid.layers.logsumexp(None)
        with pytest.raises(TypeError):
            fluid.layers.logsumexp(fluid.layers.data(name="u", shape=[4], dtype="uint8"))


def test_a_var_made_with_lod_level_none_has_level_0():
    """op_test's append_input_output makes outputs with lod_level=None (fluid's default)."""
    prog = fluid.Program()
    block = prog.global_block()
    block.create_var(name="a", shape=[2, 3], dtype="float32")
    out = block.create_var(name="out", dtype="float32", shape=None, lod_level=None)
    assert out.lod_level == 0
    block.append_op(type="relu", inputs={"X": ["a"]}, outputs={"Out": [out]})
    (got,) = fluid.Executor(fluid.CPUPlace()).run(
        prog, feed={"a": -np.ones((2, 3), "float32")}, fetch_list=[out])
    np.testing.assert_array_equal(got, np.zeros((2, 3)))
