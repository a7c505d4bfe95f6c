"""The IR: printing, JSON round trips, fingerprints, clone(for_test), unique names, guards,
attribute validation and op roles."""
from __future__ import annotations

import numpy as np
import pytest

import spmd
from spmd.autodiff import append_backward
from spmd.core import (
    OpRole,
    Program,
    Scope,
    default_main_program,
    default_startup_program,
    program_guard,
    unique_name,
)
from spmd.errors import InvalidArgumentError, NotFoundError


def build(scale=2.0, width=4, dtype="float32", train=True) -> Program:
    """x -> mul(w) -> +b -> relu -> scale -> mean, with generated names; backward and sgd when
    `train`."""
    prog = Program()
    block = prog.global_block()
    x = block.create_var(name="x", shape=(-1, 3), dtype=dtype, is_data=True)
    w = block.create_parameter(unique_name.generate("fc.w"), (3, width), dtype)
    b = block.create_parameter(unique_name.generate("fc.b"), (width,), dtype)
    h = block.create_var(name=unique_name.generate("fc.tmp"))
    block.append_op("mul", {"X": x, "Y": w}, {"Out": h})
    h2 = block.create_var()  # a generated name
    block.append_op("elementwise_add", {"X": h, "Y": b}, {"Out": h2})
    y = block.create_var(name="y")
    block.append_op("relu", {"X": h2}, {"Out": y})
    s = block.create_var(name="s")
    block.append_op("scale", {"X": y}, {"Out": s}, {"scale": scale})
    loss = block.create_var(name="loss")
    block.append_op("mean", {"X": s}, {"Out": loss})
    if train:
        lr = block.create_var(name="lr", shape=(1,), dtype=dtype, persistable=True)
        with prog.role_guard(OpRole.OPTIMIZE):
            for p, g in append_backward(loss):
                block.append_op("sgd", {"Param": p, "Grad": g, "LearningRate": lr},
                                {"ParamOut": p})
    return prog


def build_named(**kwargs) -> Program:
    with unique_name.guard():
        return build(**kwargs)


# -- printing and serialization ----------------------------------------------------------------
def test_str_is_one_op_per_line():
    prog = build_named()
    lines = str(prog).splitlines()
    ops = prog.global_block().ops
    op_lines = [ln for ln in lines if ln.lstrip().split(":")[0].isdigit()]
    assert len(op_lines) == len(ops)
    for i, (line, op) in enumerate(zip(op_lines, ops)):
        assert line.lstrip().startswith(f"{i}: ")
        assert f"= {op.type}(" in line
        assert all(f"{slot}={names[0]}" in line for slot, names in op.inputs.items())
    assert any(ln.strip() == "var lr[1]:float32[P]" for ln in lines)
    assert "# optimize" in op_lines[-1] and "# backward" in op_lines[-3]


def test_json_round_trip_keeps_the_fingerprint():
    prog = build_named()
    prog.random_seed = 11
    again = Program.from_json(prog.to_json())
    assert again.fingerprint() == prog.fingerprint()
    assert again.to_dict() == prog.to_dict()
    assert Program.parse_from_string(prog.serialize_to_string()).fingerprint() == \
        prog.fingerprint()
    assert [op.role for op in again.global_block().ops] == \
        [op.role for op in prog.global_block().ops]
    assert again.grad_var_map == prog.grad_var_map and again.grad_var_map
    w = next(p for p in again.all_parameters() if p.name.startswith("fc.w"))
    assert isinstance(w, spmd.Parameter) and w.shape == (3, 4) and w.persistable


def test_to_json_names_an_attribute_json_cannot_hold():
    prog = build_named(train=False)
    prog.global_block().ops[3].attrs["op_namescope"] = object()  # common attrs are unchecked
    with pytest.raises(InvalidArgumentError, match=r"op #3 'scale'.*'op_namescope'"):
        prog.to_json()


def test_fingerprint_equal_for_identical_builds_under_guard():
    a, b = build_named(), build_named()
    assert a.fingerprint() == b.fingerprint()
    assert list(a.global_block().vars) == list(b.global_block().vars)
    with unique_name.guard():
        build()
        shifted = build()  # the second build in one name space gets other names
    assert shifted.fingerprint() != a.fingerprint()


@pytest.mark.parametrize("change", [{"scale": 3.0}, {"width": 5}, {"dtype": "float64"}],
                         ids=["attr", "shape", "dtype"])
def test_fingerprint_differs_when_program_differs(change):
    assert build_named(**change).fingerprint() != build_named().fingerprint()


def test_fingerprint_ignores_op_callstack():
    a, b = build_named(), build_named()
    a.global_block().ops[0].attrs["op_callstack"] = ["file.py:1"]
    assert a.fingerprint() == b.fingerprint()


# -- clone -------------------------------------------------------------------------------------
def test_clone_for_test_keeps_forward_ops_only():
    prog = build_named()
    test = prog.clone(for_test=True)
    ops = test.global_block().ops
    assert [op.type for op in ops] == ["mul", "elementwise_add", "relu", "scale", "mean"]
    assert all(op.role is OpRole.FORWARD for op in ops)
    assert not any("@GRAD" in n for n in test.global_block().vars)
    assert test.grad_var_map == {} and test.is_test
    assert {p.name for p in test.all_parameters()} == {p.name for p in prog.all_parameters()}
    assert len(prog.global_block().ops) > len(ops)  # the original is untouched
    assert any(op.role is OpRole.BACKWARD for op in prog.global_block().ops)


def test_clone_for_test_sets_is_test():
    prog = Program()
    block = prog.global_block()
    block.create_var(name="x", shape=(-1, 4), dtype="float32", is_data=True)
    block.append_op("dropout", {"X": "x"}, {"Out": "d", "Mask": "m"},
                    {"dropout_prob": 0.5})
    test = prog.clone(for_test=True)
    assert test.global_block().ops[0].attr("is_test") is True
    assert prog.global_block().ops[0].attr("is_test") is False


def test_clone_shares_parameters_by_name():
    prog = build_named(train=True)
    test = prog.clone(for_test=True)
    w_name = next(p.name for p in prog.all_parameters() if p.name.startswith("fc.w"))
    b_name = next(p.name for p in prog.all_parameters() if p.name.startswith("fc.b"))
    rng = np.random.default_rng(1)
    scope = Scope()
    for name, shape in ((w_name, (3, 4)), (b_name, (4,))):
        scope.var(name).get_tensor().set(rng.standard_normal(shape).astype("float32"))
    scope.var("lr").get_tensor().set(np.array([0.1], "float32"))
    exe = spmd.Executor()
    x = rng.standard_normal((5, 3)).astype("float32")
    w0 = np.array(scope.find_var(w_name).get_tensor())
    exe.run(prog, feed={"x": x}, fetch_list=["loss"], scope=scope)
    w1 = np.array(scope.find_var(w_name).get_tensor())
    b1 = np.array(scope.find_var(b_name).get_tensor())
    assert not np.array_equal(w0, w1)  # training moved the parameter
    (y,) = exe.run(test, feed={"x": x}, fetch_list=["s"], scope=scope)
    np.testing.assert_allclose(y, 2.0 * np.maximum(x @ w1 + b1, 0), rtol=1e-6)
    np.testing.assert_array_equal(np.array(scope.find_var(w_name).get_tensor()), w1)


def test_plain_clone_is_independent():
    prog = build_named(train=False)
    copy = prog.clone()
    assert copy.fingerprint() == prog.fingerprint() and len(copy.global_block().ops) == 5
    copy.global_block().append_op("relu", {"X": "loss"}, {"Out": "r"})
    assert len(prog.global_block().ops) == 5 and not prog.global_block().has_var("r")


# -- names and guards --------------------------------------------------------------------------
def test_unique_name_guard():
    with unique_name.guard():
        assert unique_name.generate("fc") == "fc_0"
        assert unique_name.generate("fc") == "fc_1"
        with unique_name.guard("inner_"):
            assert unique_name.generate("fc") == "inner_fc_0"
        assert unique_name.generate("fc") == "fc_2"  # the outer name space is back
        assert unique_name.generate("conv") == "conv_0"


def test_program_guard_switches_and_restores():
    main, startup = Program(), Program()
    old_main, old_startup = default_main_program(), default_startup_program()
    with program_guard(main, startup):
        assert default_main_program() is main and default_startup_program() is startup
    assert default_main_program() is old_main and default_startup_program() is old_startup
    with pytest.raises(RuntimeError, match="boom"):
        with program_guard(main):
            assert default_startup_program() is old_startup
            raise RuntimeError("boom")
    assert default_main_program() is old_main
    with pytest.raises(InvalidArgumentError, match="main_program.*str"):
        with program_guard("main"):
            pass
    with pytest.raises(InvalidArgumentError, match="startup_program.*int"):
        with program_guard(main, 3):
            pass
    assert default_main_program() is old_main


# -- validation --------------------------------------------------------------------------------
def _block_with_x():
    prog = Program()
    block = prog.global_block()
    block.create_var(name="x", shape=(2, 3), dtype="float32", is_data=True)
    return prog, block


def test_unknown_attribute_names_op_and_attribute():
    _, block = _block_with_x()
    with pytest.raises(InvalidArgumentError) as e:
        block.append_op("scale", {"X": "x"}, {"Out": "o"}, {"scale": 2.0, "scael_bias": 1.0})
    msg = str(e.value)
    assert "'scale'" in msg and "scael_bias" in msg and "bias_after_scale" in msg


def test_wrong_attribute_type_names_op_and_attribute():
    _, block = _block_with_x()
    with pytest.raises(InvalidArgumentError, match=r"op #0 'scale'.*'scale' expects float.*'2'"):
        block.append_op("scale", {"X": "x"}, {"Out": "o"}, {"scale": "2"})
    op = block.append_op("scale", {"X": "x"}, {"Out": "o"}, {"scale": 2})
    assert op.attr("scale") == 2.0 and isinstance(op.attr("scale"), float)  # coerced
    with pytest.raises(InvalidArgumentError, match=r"'scale'.*'bias_after_scale' expects bool"):
        op.set_attr("bias_after_scale", "yes")
    with pytest.raises(NotFoundError, match=r"op 'scale' has no attribute 'axis'"):
        op.attr("axis")


def test_bad_slots_and_shapes_are_named():
    _, block = _block_with_x()
    with pytest.raises(InvalidArgumentError, match=r"'mul'.*input 'Y' is required"):
        block.append_op("mul", {"X": "x"}, {"Out": "o"})
    with pytest.raises(InvalidArgumentError, match=r"'relu'.*input variable 'nope'"):
        block.append_op("relu", {"X": "nope"}, {"Out": "o"})
    with pytest.raises(InvalidArgumentError, match=r"variable 'v'.*shape"):
        block.create_var(name="v", shape=3)
    with pytest.raises(InvalidArgumentError, match=r"variable 'v'.*'a'"):
        block.create_var(name="v", shape=[2, "a"])
    with pytest.raises(NotFoundError, match=r"no op named 'rleu'.*'relu'"):
        block.append_op("rleu", {"X": "x"}, {"Out": "o"})


def test_redeclaring_a_variable_invalidates_compiled_plans():
    prog, block = _block_with_x()
    version = prog.version
    block.create_var(name="x", shape=(2, 3), dtype="float32")
    assert prog.version == version  # nothing changed
    block.create_var(name="x", persistable=True)
    assert prog.version > version and block.var("x").persistable


# -- roles -------------------------------------------------------------------------------------
def test_op_roles():
    prog = build_named()
    roles = {op.type: op.role for op in prog.global_block().ops}
    assert roles["mul"] is OpRole.FORWARD and roles["mean"] is OpRole.FORWARD
    assert roles["fill_constant"] is OpRole.LOSS  # the seed of loss@GRAD
    assert roles["mul_grad"] is OpRole.BACKWARD and roles["mean_grad"] is OpRole.BACKWARD
    assert roles["sgd"] is OpRole.OPTIMIZE
    assert prog.current_role is OpRole.FORWARD  # role_guard restored it
    assert prog.global_block().var("loss").grad_name == "loss@GRAD"
    again = Program.from_json(prog.to_json())
    assert {op.type: op.role for op in again.global_block().ops} == roles


def test_to_string_with_details_lists_each_variables_details():
    """fluid 1.8's Program.to_string(with_details=True) adds each variable's stop_gradient and
    a parameter's trainable / optimize_attr / regularizer, so it is longer than without."""
    import spmd.fluid as fluid_api

    prog, startup = fluid_api.Program(), fluid_api.Program()
    with fluid_api.program_guard(prog, startup), fluid_api.unique_name.guard():
        x = fluid_api.layers.data(name="X", shape=[2, 3], dtype="float32",
                                  append_batch_size=False)
        fluid_api.layers.fc(x, size=3, param_attr=fluid_api.ParamAttr(learning_rate=0.5))
    plain = prog.to_string(throw_on_error=True, with_details=False)
    detailed = prog.to_string(throw_on_error=False, with_details=True)
    assert plain == str(prog) and len(detailed) > len(plain)
    weight = next(line for line in detailed.splitlines() if "fc_0.w_0" in line and "var " in line)
    assert "trainable=True" in weight and "'learning_rate': 0.5" in weight
    data = next(line for line in detailed.splitlines() if "var Variable(X" in line)
    assert "stop_gradient=True" in data and "trainable" not in data


def test_create_parameter_refuses_what_fluid_refuses():
    """fluid 1.8's Parameter: a shape and a dtype given, one dimension at least, none unknown;
    each a ValueError, and nothing is created."""
    import spmd.fluid as fluid_api

    block = fluid_api.Program().global_block()
    for shape, dtype, says in ((None, "float32", "shape must be given"),
                               ([1], None, "dtype must be given"),
                               ([], "float32", "one dimension at least"),
                               ([-1], "float32", "fully known shape")):
        with pytest.raises(ValueError, match=says):
            block.create_parameter(name="test", shape=shape, dtype=dtype, initializer=None)
        assert not block.has_var("test")
