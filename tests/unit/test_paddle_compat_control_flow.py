"""What Paddle 1.8's own control-flow and LoD unit tests rely on, each checked against what
fluid 1.8.5 does (the values below are fluid 1.8.5's, run on the same programs):
`Variable == value` building an `equal` op, type errors that are TypeErrors, the gradients of
variables a program opens with `stop_gradient = False`, and batch_norm on one value per channel."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.variable import Variable
from spmd.errors import InvalidArgumentError

L = fluid.layers


def _run(main, feed=None, fetch=()):
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed=feed or {}, fetch_list=list(fetch), scope=fluid.Scope())


# -- Variable == value -----------------------------------------------------------------------

def test_eq_and_ne_build_compare_ops_that_drive_cond():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = fluid.data("i", [1], "int32")
        even = (i % 2) == 0
        odd = i != (i // 2) * 2
        out = L.cond(even, lambda: L.fill_constant([1], "float32", 1.0),
                     lambda: L.fill_constant([1], "float32", -1.0))
    assert isinstance(even, Variable) and even.dtype == "bool" and odd.dtype == "bool"
    types = [op.type for op in main.global_block().ops]
    assert "equal" in types and "not_equal" in types
    for k in range(4):
        e, o, v = _run(main, {"i": np.array([k], "int32")}, [even, odd, out])
        assert bool(e[0]) is (k % 2 == 0) and bool(o[0]) is (k % 2 == 1)
        assert v[0] == (1.0 if k % 2 == 0 else -1.0)


def test_eq_with_a_bool_a_reversed_number_and_a_non_number():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        flag = L.fill_constant([1], "bool", True)
        x = L.fill_constant([1], "int64", 3)
        t, r = flag == True, 3 == x  # noqa: E712 - fluid builds an equal op for both
        # not a number: Python's identity answer (fluid 1.8.5 fails in float() there)
        assert (x == None) is False and (x != "x") is True  # noqa: E711
        assert x in {x: 0} and len({x, flag, x}) == 2  # hashing stays by identity
    got = _run(main, fetch=[t, r])
    assert [bool(g[0]) for g in got] == [True, True]


# -- type errors -----------------------------------------------------------------------------

def test_a_list_where_a_variable_goes_is_a_type_error():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        for build in (lambda: L.increment([1, 2, 3]),
                      lambda: L.cond(True, lambda: None),
                      lambda: L.square_error_cost([256, 3], L.data("y", [3]))):
            with pytest.raises(TypeError) as caught:
                build()
            assert isinstance(caught.value, InvalidArgumentError)  # still spmd's error type


# -- gradients of opened variables -----------------------------------------------------------

def test_gradient_of_constants_opened_to_gradients_through_cond():
    # fluid 1.8.5: out = a * b (a = 1.23 >= b = 1.22), a@GRAD = b, b@GRAD = a
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = L.fill_constant([1], "float32", 1.23)
        b = L.fill_constant([1], "float32", 1.22)
        a.stop_gradient = b.stop_gradient = False
        out = L.cond(a < b, lambda: a + b, lambda: a * b)
        fluid.backward.append_backward(out)
    assert a.grad_name == a.name + "@GRAD"
    v, ga, gb = _run(main, fetch=[out, a.grad_name, b.grad_name])
    np.testing.assert_allclose([v[0], ga[0], gb[0]], [1.23 * 1.22, 1.22, 1.23], rtol=1e-6)


def test_gradient_of_an_intermediate_not_leading_to_a_parameter():
    # fluid 1.8.5 (test_cond's nested cond): a = 2 * i, out = a * a for 5 <= i < 8, a@GRAD = 2a
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = fluid.data("i", [1], "float32")
        a = 2.0 * i
        out = L.cond(i < 5.0, lambda: a + a, lambda: a * a)
        fluid.backward.append_backward(L.mean(out))
    for k, (want, want_grad) in {3: (12.0, 2.0), 6: (144.0, 24.0)}.items():
        v, g = _run(main, {"i": np.full([1], k, "float32")}, [out, a.grad_name])
        assert (v[0], g[0]) == (want, want_grad)


# -- batch_norm on a batch of one ------------------------------------------------------------

def test_batch_norm_on_one_value_per_channel_passes_it_and_its_gradient_through():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], "float32")
        x.stop_gradient = False
        y = L.batch_norm(x, param_attr=fluid.ParamAttr(name="s"),
                         bias_attr=fluid.ParamAttr(name="b"))
        w = L.assign(np.array([1, 2, 3, 4], "float32"))
        fluid.backward.append_backward(L.reduce_sum(y * w))
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = np.array([[0.5, 1.0, -2.0, 3.0]], "float32")
    got = exe.run(main, feed={"x": feed}, fetch_list=[y, x.grad_name, "s@GRAD", "b@GRAD"],
                  scope=scope)
    # fluid 1.8.5: Y = X, dX = dY, Scale and Bias gradients zero
    for g, want in zip(got, [feed, [[1, 2, 3, 4]], np.zeros(4), np.zeros(4)]):
        np.testing.assert_array_equal(g, np.asarray(want, "float32"))


# -- select_input / select_output, split / merge --------------------------------------------

def test_select_output_then_select_input_routes_a_value_and_its_gradient():
    # fluid 1.8.5's test_select_input_output_op: y = x whichever branch, x@GRAD = 1 / numel
    from spmd.layers.branches import select_input, select_output

    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [1, 2], "float32")
        x.stop_gradient = False
        mask = fluid.data("mask", [1], "int32")
        outs = [main.current_block().create_var(name=f"branch{k}", dtype="float32")
                for k in range(3)]
        select_output(x, outs, mask)
        y = select_input(outs, mask)
        fluid.backward.append_backward(L.mean(y))
        with pytest.raises(TypeError):
            select_input(x, mask)
        with pytest.raises(TypeError):
            select_output(x, outs[0], mask)
        with pytest.raises(TypeError):
            select_output(x, outs, L.cast(mask, "float32"))
    feed_x = np.array([[1.3, -1.4]], "float32")
    for k in range(3):
        got_y, got_g = _run(main, {"x": feed_x, "mask": np.array([k], "int32")},
                            [y, x.grad_name])
        np.testing.assert_array_equal(got_y, feed_x)
        np.testing.assert_array_equal(got_g, [[0.5, 0.5]])


def test_split_and_merge_lod_tensor_rows():
    from spmd.layers.branches import merge_lod_tensor, split_lod_tensor

    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 1], "float32")
        m = fluid.data("m", [None, 1], "bool")
        yes, no = split_lod_tensor(x, m)
        back = merge_lod_tensor(yes, no, x, m)
        with pytest.raises(TypeError):
            split_lod_tensor(set(), m)
    rows = np.arange(10, dtype="float32").reshape(10, 1)
    mask = np.array([0, 0, 1, 1, 1, 1, 0, 0, 0, 0], bool).reshape(10, 1)
    got = _run(main, {"x": rows, "m": mask}, [yes, no, back])
    np.testing.assert_array_equal(got[0].ravel(), [2, 3, 4, 5])
    np.testing.assert_array_equal(got[1].ravel(), [0, 1, 6, 7, 8, 9])
    np.testing.assert_array_equal(got[2], rows)


def test_reorder_lod_tensor_by_rank_reads_the_lod_fed_to_a_variable_declared_without():
    cf = fluid.layers.control_flow
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = L.data("x", [1])  # lod_level 0, as fluid 1.8.5's test_reorder_lod_tensor
        out = L.reorder_lod_tensor_by_rank(x, cf.lod_rank_table(x))
    fed = fluid.create_lod_tensor(np.arange(6, dtype="float32").reshape(6, 1), [[1, 3, 2]],
                                  fluid.CPUPlace())
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": fed}, fetch_list=[out],
                                                return_numpy=False, scope=fluid.Scope())
    # longest first: the 3-row sequence, then 2, then 1 (fluid 1.8.5's order and LoD)
    np.testing.assert_array_equal(np.array(got).ravel(), [1, 2, 3, 4, 5, 0])
    assert got.recursive_sequence_lengths() == [[3, 2, 1]]


# -- while_loop over lists and dicts; rnn_memory_helper_grad; RNN cells' type errors ---------

def test_while_loop_body_rebinding_dict_and_list_items_in_place():
    # fluid 1.8.5's test_while_loop_op.test_var_dict: 10, [[10], [10]], 10 after the loop
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = L.zeros([1], "int64")
        ten = L.fill_constant([1], "int64", 10)
        state = {"key": L.fill_constant([1], "int64", 0)}
        rows = [L.fill_constant([1, 2], "int64", 0)]

        def body(i, ten, state, rows):
            state["key"] = i
            state["key"] += 1
            rows[0] = L.reshape(rows[0], [2, -1]) + 1
            return [L.increment(i), ten, state, rows]

        i, ten, state, rows = L.while_loop(lambda i, *_: L.less_than(i, ten), body,
                                           [i, ten, state, rows])
        with pytest.raises(ValueError, match="same structure"):  # a key the loop did not have
            L.while_loop(lambda i, d: L.less_than(i, ten),
                         lambda i, d: [L.increment(i), {**d, "extra": i}],
                         [L.zeros([1], "int64"), {"k": L.zeros([1], "int64")}])
    key, got_rows = _run(main, fetch=[state["key"], rows[0]])
    np.testing.assert_array_equal(key, [10])
    np.testing.assert_array_equal(got_rows, [[10], [10]])


def test_rnn_memory_helper_grad_reads_x_out_and_their_gradient():
    # fluid 1.8.5: X@GRAD = Out@GRAD, or zeros like X when no gradient reached Out
    for with_grad in (True, False):
        main = fluid.Program()
        block = main.global_block()
        names = ["X", "Out"] + (["Out@GRAD"] if with_grad else [])
        ins = {n: block.create_var(name=n, shape=[2, 3], dtype="float32") for n in names}
        dx = block.create_var(name="X@GRAD", shape=[2, 3], dtype="float32")
        block.append_op("rnn_memory_helper_grad", ins, {"X@GRAD": dx})
        feed = {n: np.random.RandomState(1).normal(size=(2, 3)).astype("float32")
                for n in names}
        got, = _run(main, feed, [dx])
        np.testing.assert_array_equal(got, feed["Out@GRAD"] if with_grad else np.zeros((2, 3)))


def test_rnn_cells_type_errors_are_type_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        h = fluid.data("h", [None, 4], "float32")
        for build in (lambda: L.GRUCell(4, dtype="int32"),
                      lambda: L.LSTMCell(4)(np.ones((2, 4), "float32"), [h, h]),
                      lambda: L.rnn(L.GRUCell(4), fluid.data("x", [None, 3, 4], "float32"),
                                    sequence_length=np.ones(2, "float32"))):
            with pytest.raises(TypeError):
                build()
