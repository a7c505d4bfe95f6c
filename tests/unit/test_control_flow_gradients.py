"""Gradients through control flow in float64 against central finite differences, for what the
first control-flow tests left out: tensor arrays written before a While (or cond) and read in
it, values a later op overwrites (a loop counter an array was written at, a tensor a loop then
updates), a body that reads what it wrote to an outside variable, sequence ops on a LoD input
inside a While body and inside cond, dropout inside a While body (the recomputation draws the
same mask), and a loop that runs zero times leaving a variable without a value."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError

L = fluid.layers
R = np.random.RandomState(11)
X = R.uniform(-1, 1, (2, 3))
Y = R.uniform(-1, 1, (2, 3))
SEQ = R.uniform(-1, 1, (5, 3))  # two sequences, of 2 and 3 rows
LENGTHS = [[2, 3]]
PLACE = fluid.CPUPlace()


def _data(name, shape, lod_level=0):
    v = fluid.data(name, shape, "float64", lod_level=lod_level)
    v.stop_gradient = False
    return v


def _counter(n):
    i = L.fill_constant([1], "int64", 0)
    limit = L.fill_constant([1], "int64", n)
    return i, limit, L.less_than(i, limit)


def _step(i, limit, cond):
    L.increment(i, 1, in_place=True)
    L.less_than(i, limit, cond=cond)


def _zeros(shape):
    acc = L.fill_constant(shape, "float64", 0.0)
    acc.stop_gradient = False
    return acc


def _feed(feed):
    """Arrays given as (array, lengths) become LoD tensors."""
    return {k: fluid.create_lod_tensor(v[0], v[1], PLACE) if isinstance(v, tuple) else v
            for k, v in feed.items()}


def _check(make, feed, wrt, seed=None):
    """make() -> loss over the variables fed; the gradients w.r.t. `wrt` against central
    finite differences of the same program (with `seed`, every run on a new executor, whose
    generator starts from the program's seed, so random ops draw the same numbers). Returns
    the loss and the gradients."""
    main, startup = fluid.Program(), fluid.Program()
    if seed is not None:
        main.random_seed = startup.random_seed = seed
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        loss = make()
        block = main.global_block()
        grads = fluid.gradients([loss], [block.var(n) for n in wrt])
    assert all(g is not None for g in grads), grads
    exe = fluid.Executor(PLACE)

    def run(f, fetch):
        runner = exe if seed is None else fluid.Executor(PLACE)
        runner.run(startup)
        return runner.run(main, feed=_feed(f), fetch_list=fetch)

    got = run(feed, [loss, *grads])
    for name, g in zip(wrt, got[1:]):
        value = feed[name]
        arr = value[0] if isinstance(value, tuple) else value
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            f = []
            for d in (1e-6, -1e-6):
                moved = arr.copy()
                moved[idx] += d
                moved = (moved, value[1]) if isinstance(value, tuple) else moved
                f.append(float(run({**feed, name: moved}, [loss])[0].sum()))
            num[idx] = (f[0] - f[1]) / 2e-6
        np.testing.assert_allclose(np.asarray(g), num, rtol=1e-6, atol=1e-8, err_msg=name)
    return got


# -- 1. values written or computed before a loop, read inside it -------------------------------

def _array_before_loop(n):
    def make():
        x = _data("x", [2, 3])
        i, limit, cond = _counter(n)
        zero = L.fill_constant([1], "int64", 0)
        acc = _zeros([2, 3])
        arr = L.array_write(x, i)  # at the loop counter, which the loop then advances
        loop = L.While(cond)
        with loop.block():
            L.assign(acc + L.array_read(arr, zero), acc)
            _step(i, limit, cond)
        return L.reduce_sum(acc)
    return make


@pytest.mark.parametrize("n", [1, 3])
def test_array_written_before_a_while_passes_the_gradient_of_every_read(n):
    got = _check(_array_before_loop(n), {"x": X}, ["x"])
    np.testing.assert_allclose(got[1], np.full_like(X, n))  # one per iteration


def test_arrays_carried_through_a_while_as_dynamic_decode_keeps_them():
    """fluid 1.8's dynamic_decode: the state array written at step 0 before the loop, read at
    step t and written at step t + 1 inside it, the last state read after it; the outputs
    gathered in another array."""
    def make():
        x, y = _data("x", [2, 3]), _data("y", [2, 3])
        i, limit, cond = _counter(3)
        states = L.array_write(x, i)
        outs = L.create_array("float64")
        loop = L.While(cond)
        with loop.block():
            h = L.array_read(states, i)
            new = L.tanh(h * y + 0.3)
            L.array_write(new * 2.0, i, array=outs)
            L.increment(i, 1, in_place=True)
            L.array_write(new, i, array=states)
            L.less_than(i, limit, cond=cond)
        last = L.array_read(states, i)
        stacked = L.tensor_array_to_tensor(outs, axis=0, use_stack=True)[0]
        return L.reduce_sum(last * last) + L.reduce_sum(stacked * stacked)
    _check(make, {"x": X, "y": Y}, ["x", "y"])


def test_array_read_in_a_cond_inside_a_while():
    def make():
        x = _data("x", [2, 3])
        i, limit, cond = _counter(3)
        one = L.fill_constant([1], "int64", 1)
        arr = L.array_write(x, i)
        arr = L.array_write(x * x, one, array=arr)
        acc = _zeros([2, 3])
        loop = L.While(cond)
        with loop.block():
            odd = L.equal(L.elementwise_mod(i, L.fill_constant([1], "int64", 2)), one)
            picked = L.cond(odd, lambda: L.array_read(arr, one) * 3.0,
                            lambda: L.array_read(arr, L.zeros_like(one)) - 1.0)
            L.assign(acc * 0.5 + picked, acc)
            _step(i, limit, cond)
        return L.reduce_sum(acc * acc)
    _check(make, {"x": X}, ["x"])


@pytest.mark.parametrize("pred", [True, False])
def test_array_read_in_cond_when_its_index_is_overwritten_after(pred):
    def make():
        x = _data("x", [2, 3])
        p = fluid.data("p", [1], "bool")
        i = L.fill_constant([1], "int64", 0)
        arr = L.array_write(x, i)
        arr = L.array_write(x * 3.0, L.increment(i, 1, in_place=True), array=arr)
        out = L.cond(p, lambda: L.array_read(arr, i) * 2.0,
                     lambda: L.array_read(arr, L.zeros_like(i)) - 1.0)
        L.increment(i, 1, in_place=True)  # after the cond: its gradient reads the old index
        return L.reduce_sum(out * out)
    _check(make, {"x": X, "p": np.array([pred])}, ["x"])


def test_tensor_computed_before_a_while_and_read_in_its_body():
    def make():
        x = _data("x", [2, 3])
        i, limit, cond = _counter(3)
        y = L.tanh(x) * 2.0
        acc = _zeros([2, 3])
        loop = L.While(cond)
        with loop.block():
            L.assign(acc + y * y, acc)
            _step(i, limit, cond)
        return L.reduce_sum(acc)
    _check(make, {"x": X}, ["x"])


def test_tensor_a_while_then_updates_in_place():
    """tanh's gradient reads its output, which the loop overwrites: it must see the value
    tanh computed."""
    def make():
        x = _data("x", [2, 3])
        i, limit, cond = _counter(3)
        h = L.tanh(x)
        loop = L.While(cond)
        with loop.block():
            L.assign(h * h + 0.5, h)
            _step(i, limit, cond)
        return L.reduce_sum(h)
    _check(make, {"x": X}, ["x"])


def test_body_reads_what_it_wrote_to_an_outside_variable():
    """y is written, then read, in every iteration: its gradient there is the one flowing in
    from after the loop plus the one from the body's own read."""
    def make():
        x = _data("x", [2, 3])
        i, limit, cond = _counter(2)
        y = fluid.default_main_program().global_block().create_var(
            name="y", dtype="float64", shape=[2, 3])
        acc = L.fill_constant([2, 3], "float64", 1.0)
        acc.stop_gradient = False
        loop = L.While(cond)
        with loop.block():
            L.assign(acc * x, y)
            L.assign(y + 1.0, acc)
            _step(i, limit, cond)
        return L.reduce_sum(y * y)
    got = _check(make, {"x": X}, ["x"])
    # y = x, then (x + 1) x
    np.testing.assert_allclose(got[1], 2 * (X * X + X) * (2 * X + 1), rtol=1e-10)


def test_gradients_of_targets_that_depend_on_each_other_add_up():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = _data("x", [2, 3])
        a = x * 3.0
        b = a * a
        g, = fluid.gradients([a, b], [x])
    exe = fluid.Executor(PLACE)
    got, = exe.run(main, feed={"x": X}, fetch_list=[g])
    np.testing.assert_allclose(got, 3.0 + 18.0 * X, rtol=1e-12)  # d(sum(a) + sum(b))/dx


def test_dynamic_decode_keeps_steps_in_tensor_arrays_when_training():
    """fluid 1.8's structure: the decoder's initial inputs and states are written to arrays
    before the loop and read from them in its body."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        emb = fluid.data("emb", [None, 5, 4], "float32")
        cell = L.GRUCell(hidden_size=4)
        helper = L.TrainingHelper(emb, L.fill_constant([2], "int64", 5))
        decoder = L.BasicDecoder(cell, helper, output_fn=None)
        L.dynamic_decode(decoder, inits=cell.get_initial_states(emb), max_step_num=4)
    ops = main.global_block().ops
    loop = next(op for op in ops if op.type == "while")
    body = main.block(loop.attr("sub_block"))
    assert "write_to_array" in [op.type for op in ops[:ops.index(loop)]]
    assert "read_from_array" in [op.type for op in body.ops]


# -- 2. sequence ops on a LoD variable from outside, inside a While body and inside cond -------

def test_sequence_pool_inside_a_while_body():
    def make():
        x = _data("x", [None, 3], lod_level=1)
        i, limit, cond = _counter(2)
        acc = _zeros([2, 3])
        loop = L.While(cond)
        with loop.block():
            pooled = L.sequence_pool(x * x, "sum") + L.sequence_pool(x, "max")
            L.assign(acc * 0.5 + pooled, acc)
            _step(i, limit, cond)
        return L.reduce_sum(acc * acc)
    got = _check(make, {"x": (SEQ, LENGTHS)}, ["x"])
    per_step = np.stack([(SEQ[:2] ** 2).sum(0) + SEQ[:2].max(0),
                         (SEQ[2:] ** 2).sum(0) + SEQ[2:].max(0)])
    np.testing.assert_allclose(got[0], [((per_step * 1.5) ** 2).sum()], rtol=1e-12)


def test_sequence_expand_inside_a_while_body():
    def make():
        x, y = _data("x", [None, 3], lod_level=1), _data("y", [2, 3])
        i, limit, cond = _counter(2)
        acc = _zeros([5, 3])
        loop = L.While(cond)
        with loop.block():
            L.assign(acc + L.sequence_expand(y, x) * x, acc)
            _step(i, limit, cond)
        return L.reduce_sum(acc * acc)
    got = _check(make, {"x": (SEQ, LENGTHS), "y": Y}, ["x", "y"])
    expanded = np.repeat(Y, [2, 3], axis=0)
    np.testing.assert_allclose(got[0], [((2 * expanded * SEQ) ** 2).sum()], rtol=1e-12)


@pytest.mark.parametrize("pred", [True, False])
def test_sequence_pool_and_expand_inside_cond(pred):
    def make():
        x, y = _data("x", [None, 3], lod_level=1), _data("y", [2, 3])
        p = fluid.data("p", [1], "bool")
        out = L.cond(p, lambda: L.sequence_pool(x * x, "sum") + y,
                     lambda: L.sequence_pool(x * L.sequence_expand(y, x), "max"))
        return L.reduce_sum(out * out)
    got = _check(make, {"x": (SEQ, LENGTHS), "y": Y, "p": np.array([pred])}, ["x", "y"])
    if pred:
        ref = np.stack([(SEQ[:2] ** 2).sum(0), (SEQ[2:] ** 2).sum(0)]) + Y
    else:
        prod = SEQ * np.repeat(Y, [2, 3], axis=0)
        ref = np.stack([prod[:2].max(0), prod[2:].max(0)])
    np.testing.assert_allclose(got[0], [(ref ** 2).sum()], rtol=1e-12)


@pytest.mark.parametrize("pred", [True, False])
def test_a_lod_tensor_a_cond_returns_keeps_its_lod(pred):
    def make():
        x = _data("x", [None, 3], lod_level=1)
        p = fluid.data("p", [1], "bool")
        out = L.cond(p, lambda: x * 2.0, lambda: L.tanh(x))
        return L.reduce_sum(L.sequence_pool(out, "sum") ** 2)
    _check(make, {"x": (SEQ, LENGTHS), "p": np.array([pred])}, ["x"])
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float64", lod_level=1)
        p = fluid.data("p", [1], "bool")
        out = L.cond(p, lambda: x * 2.0, lambda: L.tanh(x))
    got, = fluid.Executor(PLACE).run(main, feed=_feed({"x": (SEQ, LENGTHS),
                                                       "p": np.array([pred])}),
                                     fetch_list=[out], return_numpy=False)
    assert got.recursive_sequence_lengths() == LENGTHS


# -- 3. a loop that runs zero times ---------------------------------------------------------------

def _written_only_in_the_body(n):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float64")
        i, limit, cond = _counter(n)
        y = main.global_block().create_var(name="y", dtype="float64", shape=[2, 3])
        loop = L.While(cond)
        with loop.block():
            L.assign(x * 2.0, y)
            _step(i, limit, cond)
        out = y + 1.0
    return main, out


def test_a_variable_only_the_loop_writes_has_its_last_value_after_it():
    main, out = _written_only_in_the_body(2)
    got, = fluid.Executor(PLACE).run(main, feed={"x": X}, fetch_list=[out])
    np.testing.assert_allclose(got, 2 * X + 1)


def test_a_loop_that_runs_zero_times_leaves_it_without_a_value():
    """As in fluid 1.8.5 ("The Tensor in the scale Op's Input Variable X(y) is not
    initialized"): reading it fails, naming the op that reads it and the variable."""
    main, out = _written_only_in_the_body(0)
    with pytest.raises(ExecutionError, match=r"(?s)'scale' failed.*'y' holds no value.*"
                                              r"fill_constant.*X=y"):
        fluid.Executor(PLACE).run(main, feed={"x": X}, fetch_list=[out])


# -- 4. random ops inside a While body -----------------------------------------------------------

def test_dropout_inside_a_while_body_recomputes_the_same_mask():
    """The gradient equals finite differences of the forward with the same seed: the gradient
    block's recomputation of each iteration draws that iteration's mask again."""
    def make():
        x = _data("x", [4, 5])
        i, limit, cond = _counter(3)
        h = L.assign(x)
        loop = L.While(cond)
        with loop.block():
            dropped = L.dropout(h, 0.5, dropout_implementation="upscale_in_train")
            L.assign(L.tanh(dropped) + h * 0.5, h)
            _step(i, limit, cond)
        return L.reduce_sum(h * h)
    x = R.uniform(-1, 1, (4, 5))
    got = _check(make, {"x": x}, ["x"], seed=7)
    assert (got[1] != 0).any()


@pytest.mark.parametrize("pred", [True, False])
def test_dropout_inside_cond_recomputes_the_same_mask(pred):
    def make():
        x = _data("x", [4, 5])
        p = fluid.data("p", [1], "bool")
        out = L.cond(p, lambda: L.dropout(L.tanh(x), 0.5,
                                          dropout_implementation="upscale_in_train") * 2.0,
                     lambda: L.dropout(x * x, 0.3, dropout_implementation="upscale_in_train"))
        return L.reduce_sum(out * out)
    _check(make, {"x": R.uniform(-1, 1, (4, 5)), "p": np.array([pred])}, ["x"], seed=5)
