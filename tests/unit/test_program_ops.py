"""Programs as fluid 1.8.5 builds them (tests/oracle/make_program_ops.py stored fluid's ops,
names and values in tests/oracle/data/program_ops.json)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_program_ops import CASES, ops_of
from oracle_io import load

import spmd.fluid as fluid

FLUID = load("program_ops")


def test_square_error_cost_is_elementwise_sub_then_square_with_fluids_names_and_values():
    want = FLUID["square_error_cost"]
    got = CASES["square_error_cost"](fluid)
    assert got["name"] == want["name"] == "square_error_cost_0.tmp_1"
    assert got["ops"] == want["ops"]
    np.testing.assert_allclose(got["cost"], want["cost"], rtol=1e-6)
    np.testing.assert_allclose(got["x_grad"], want["x_grad"], rtol=1e-6)


def test_square_error_cost_gradient_matches_finite_differences():
    rng = np.random.RandomState(3)
    x0, y0 = rng.uniform(-1, 1, (3, 2)), rng.uniform(-1, 1, (3, 2))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2], "float64")
        x.stop_gradient = False
        y = fluid.data("y", [-1, 2], "float64")
        loss = fluid.layers.reduce_sum(fluid.layers.square_error_cost(x, y))
        fluid.backward.append_backward(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    g, = exe.run(main, feed={"x": x0, "y": y0}, fetch_list=["x@GRAD"])
    eps, num = 1e-6, np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        d = np.zeros_like(x0)
        d[i] = eps
        num[i] = (((x0 + d - y0) ** 2).sum() - ((x0 - d - y0) ** 2).sum()) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-6)


def test_block_create_parameter_appends_its_initializer_to_that_block_once():
    want = FLUID["create_parameter"]
    got = CASES["create_parameter"](fluid)
    assert got == want  # fill_constant in the block it was called on; none for `p`


def test_block_create_parameter_twice_initializes_once():
    # Paddle's test_initializer.py: two create_parameter calls of one name, one init op
    program = fluid.Program()
    block = program.global_block()
    for _ in range(2):
        block.create_parameter(name="param", shape=[5, 10], dtype="float32",
                               initializer=fluid.initializer.Uniform(-0.5, 0.5))
    assert [op.type for op in block.ops] == ["uniform_random"]
    assert ops_of(block)[0][2] == ["param"]


@pytest.mark.parametrize("init", [fluid.initializer.Constant(0.25),
                                  fluid.initializer.Normal(0.0, 1.0)])
def test_layer_parameters_still_initialize_only_in_the_startup_program(init):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="fc_w", initializer=init),
                        bias_attr=False)
    assert "fc_w" not in {n for op in main.global_block().ops for n in op.output_arg_names}
    assert [op.type for op in startup.global_block().ops
            if "fc_w" in op.output_arg_names] == [type(init)._op if hasattr(type(init), "_op")
                                                 else "fill_constant"]
    assert repr(main.global_block().var("fc_w").initializer) == repr(init)


def test_an_optional_input_of_another_program_is_absent_when_the_op_runs():
    # Paddle's test_rnn_memory_helper_op.py: Out@GRAD declared in another program; fluid 1.8.5
    # records the name, finds no value and gives X@GRAD = zeros like X
    program, other = fluid.Program(), fluid.Program()
    gb = program.global_block()
    ins = {n: gb.create_var(name=n, shape=[2, 3], dtype="float32") for n in ("X", "Out")}
    ins["Out@GRAD"] = other.global_block().create_var(name="Out@GRAD", shape=[2, 3],
                                                      dtype="float32")
    dx = gb.create_var(name="X@GRAD", shape=[2, 3], dtype="float32")
    op = gb.append_op(type="rnn_memory_helper_grad", inputs=ins, outputs={"X@GRAD": dx})
    assert op.input("Out@GRAD") == []
    rng = np.random.RandomState(0)
    feed = {n: rng.normal(size=(2, 3)).astype("float32") for n in ("X", "Out")}
    got, = fluid.Executor(fluid.CPUPlace()).run(program, feed=feed, fetch_list=[dx])
    np.testing.assert_array_equal(got, np.zeros((2, 3), "float32"))


def test_a_required_input_of_another_program_is_still_refused():
    program, other = fluid.Program(), fluid.Program()
    x = other.global_block().create_var(name="x", shape=[2], dtype="float32")
    with pytest.raises(Exception, match="input variable 'x' is not in the block"):
        program.global_block().append_op(type="relu", inputs={"X": x},
                                         outputs={"Out": program.global_block().create_var(
                                             name="y", shape=[2], dtype="float32")})


def _while_loss(kind, i0, x0):
    """The loop of while_loop_grads run in numpy: the loss for i0, x0."""
    i, x = i0, x0
    while i < 11:
        x = i * i if kind == "square" else x + i * i
        i += 1
    return x


@pytest.mark.parametrize("kind, i0", [("square", 1.0), ("square", 5.0), ("accumulate", 1.0),
                                      ("accumulate", 5.0)])
def test_while_loop_gradients_follow_the_loop_where_fluid_1_8_5s_do_not(kind, i0):
    """Paddle's test_while_loop_op.py:235 asserts fluid's d mean(x) / d i = 110 for x = i * i,
    which sums 2 * i over all ten steps although each step overwrites x. fluid's x gradients
    show the same fault: 1 where x is overwritten (the loss does not depend on x0) and 0 for
    x = x + i * i (it depends with slope 1). spmd's gradient w.r.t. x is the finite
    difference's; w.r.t. i it is 2 * i0 through the first step where x = x + i * i reads it
    and 0 where x = i * i (increment has no gradient, as fluid's: the counter's later values
    do not carry i0's)."""
    want = FLUID[f"while_{kind}_{int(i0)}"]
    got = CASES[f"while_{kind}_{int(i0)}"](fluid)
    np.testing.assert_allclose(got["loss"], want["loss"])  # the forward agrees
    eps = 1e-3
    fd_x = (_while_loss(kind, i0, 2.0 + eps) - _while_loss(kind, i0, 2.0 - eps)) / (2 * eps)
    np.testing.assert_allclose(got["x_grad"], [fd_x], atol=1e-6)
    assert fd_x != want["x_grad"][0]  # fluid's x gradient is not the loss's slope
    np.testing.assert_allclose(got["i_grad"], [0.0 if kind == "square" else 2 * i0])


def test_rnn_cells_and_contribs_units_name_their_parameters_as_fluid():
    # names, shapes and creation order (Paddle's test_rnn_cell_api.py sets one unit's
    # parameters from the other's by name)
    assert CASES["rnn_unit_names"](fluid) == FLUID["rnn_unit_names"]


@pytest.mark.parametrize("case", ["split_merge_level0", "split_merge_level1",
                                  "split_merge_2levels_level0"])
def test_split_and_merge_lod_tensor_of_a_lod_input_match_fluid(case):
    # one mask value per sequence of LoD level `level`: the halves keep the chosen sequences
    # with their sub-sequences, the merge and the gradient have x's LoD (fluid 1.8.5's)
    want, got = FLUID[case], CASES[case](fluid)
    for part in ("true", "false", "out", "x_grad"):
        np.testing.assert_allclose(got[part]["value"], want[part]["value"], err_msg=part)
        assert got[part]["lod"] == want[part]["lod"], part


def test_split_lod_tensor_takes_a_mask_declared_float_and_fed_bool():
    # Paddle's test_split_and_merge_lod_tensor_op.py: layers.data's default float32 mask,
    # fed bool; fluid checks no dtype when building and reads the values as bool
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1])
        y = fluid.layers.data(name="y", shape=[1])
        t, f = fluid.layers.control_flow.split_lod_tensor(input=x, mask=y)
    xv = np.arange(4, dtype="float32").reshape(4, 1)
    got_t, got_f = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": xv, "y": np.array([[1], [0], [0], [1]], bool)}, fetch_list=[t, f])
    np.testing.assert_array_equal(got_t, xv[[0, 3]])
    np.testing.assert_array_equal(got_f, xv[[1, 2]])


def test_split_lod_tensor_names_a_mask_of_the_wrong_length():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data(name="x", shape=[-1, 1], dtype="float32", lod_level=1)
        m = fluid.data(name="m", shape=[-1, 1], dtype="bool")
        t, _ = fluid.layers.control_flow.split_lod_tensor(input=x, mask=m)
    place = fluid.CPUPlace()
    feed = {"x": fluid.create_lod_tensor(np.zeros((5, 1), "float32"), [[2, 3]], place),
            "m": np.array([[True]])}
    with pytest.raises(Exception, match="Mask has 1 elements but LoD level 0 of the input "
                                        "has 2 sequences"):
        fluid.Executor(place).run(main, feed=feed, fetch_list=[t])


@pytest.mark.parametrize("case", sorted(FLUID["argument_checks"]))
def test_create_global_var_and_create_parameter_check_arguments_as_fluid(case):
    want = FLUID["argument_checks"][case]
    got = CASES["argument_checks"](fluid)[case]
    if "shape" in want:
        assert got == want
    elif want["type_error"]:  # spmd's ArgumentTypeError is a TypeError (and a ValueError)
        assert got["type_error"]
    else:
        assert got == {"type_error": False, "value_error": True}


@pytest.mark.parametrize("case", sorted(k for k in FLUID if k.startswith("lr_")))
def test_lr_decays_build_fluids_ops_and_give_its_float32_values(case):
    # one op per step of fluid 1.8.5's arithmetic, so a transpiled pserver's LR block has
    # fluid's ops (Paddle's test_dist_transpiler_async_decay.py) and the values are fluid's
    want, got = FLUID[case], CASES[case](fluid)
    assert got["main"] == want["main"] and got["startup"] == want["startup"]
    np.testing.assert_allclose(got["values"], want["values"], rtol=2e-7)
    if "exponential" in case:  # pow rounded as fluid's: bit for bit
        np.testing.assert_array_equal(got["values"], want["values"])


def test_float32_elementwise_pow_is_fluids_bit_for_bit():
    # fluid's kernel is glibc's powf; numpy 2's float32 power is 1 ulp off in ~1 pair of 5
    np.testing.assert_array_equal(CASES["elementwise_pow"](fluid)["out"],
                                  FLUID["elementwise_pow"]["out"])


def test_create_parameter_takes_fluids_optimize_attr():
    # Paddle's test_optimizer.py builds parameters with optimize_attr={'learning_rate': r}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        w = main.global_block().create_parameter(
            name="w", shape=[3, 1], dtype="float32", optimize_attr={"learning_rate": 2.0})
        startup.global_block().create_parameter(
            name="w", shape=[3, 1], dtype="float32",
            initializer=fluid.initializer.Constant(1.0))
        x = fluid.data("x", [-1, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.mul(x, w))
        fluid.optimizer.SGD(0.1).minimize(loss)
    assert w.optimize_attr == {"learning_rate": 2.0}
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], "float32")
    exe.run(main, feed={"x": xv}, fetch_list=[loss])
    got = np.array(fluid.global_scope().find_var("w").get_tensor())
    # d mean(x w) / d w = mean of x's rows; the step is 0.1 * 2.0 times it
    np.testing.assert_allclose(got, 1.0 - 0.2 * xv.mean(0, keepdims=True).T, rtol=1e-6)


def test_program_methods_check_their_arguments_as_fluid():
    # Paddle's test_program.py (fluid 1.8.5): a ValueError for a seed that is no int and for
    # feed names that are not str; a TypeError for copying info from a non-Program
    program = fluid.Program()
    with pytest.raises(ValueError, match="random_seed must be an int"):
        program.random_seed = "seed"
    program.random_seed = np.int64(7)
    assert program.random_seed == 7 and type(program.random_seed) is int
    with pytest.raises(ValueError, match="feeded_var_names must be str"):
        program._prune_with_input([2, 3, 4], [])
    with pytest.raises(TypeError, match="expects a Program"):
        program._copy_param_info_from("program")
    with pytest.raises(TypeError, match="expects a Program"):
        program._copy_dist_param_info_from("program")
    assert program.clone().random_seed == 7


def test_variable_grad_name_and_a_redeclared_shape_as_fluid():
    # Paddle's test_variable.py (fluid 1.8.5): grad_name is <name>@GRAD before any backward
    # pass; create_var of an existing name returns it, and with another shape is a ValueError
    b = fluid.Program().current_block()
    w = b.create_var(dtype="float64", shape=[784, 100], lod_level=0, name="fc.w")
    assert w.grad_name == "fc.w@GRAD"
    assert b.create_var(name="fc.w") is w and tuple(w.shape) == (784, 100)
    assert b.create_var(name="fc.w", shape=[784, 100]) is w
    with pytest.raises(ValueError, match="created before with shape"):
        b.create_var(name="fc.w", shape=(24, 100))


def test_grad_name_follows_a_renamed_gradient():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 2], "float32")
        x.stop_gradient = False
        y = fluid.layers.reduce_sum(x * x)
        fluid.gradients(y, x)
        fluid.gradients(y * 2.0, x)  # the second pass's x gradient is renamed
    assert main.global_block().has_var(x.grad_name)


def test_fluids_backward_helpers_find_fluids_op_path_and_no_grad_vars():
    # fluid.backward._get_stop_gradients_ / _find_op_path_ / _find_no_grad_vars, as Paddle's
    # test_backward.py drives them after append_backward (gradient variables are not listed
    # as stop_gradient, as in fluid)
    assert CASES["backward_helpers"](fluid) == FLUID["backward_helpers"]
