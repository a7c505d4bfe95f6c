"""Control flow on sub-blocks in float64: forward values against numpy, gradients (through
While, while_loop, nested loops, cond, case, switch_case, IfElse, StaticRNN, tensor arrays)
against central finite differences; what a loop keeps; the errors a user can act on."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError

L = fluid.layers
R = np.random.RandomState(3)
X = R.uniform(-1, 1, (2, 3))
W = R.uniform(-0.8, 0.8, (3, 3))
SEQ = R.uniform(-1, 1, (3, 2, 3))


def _build(make, shape):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", list(shape), "float64")
        x.stop_gradient = False
        w = fluid.data("w", [3, 3], "float64")  # fed: differentiated like a parameter
        w.stop_gradient = False
        loss, extra = make(x, w)
        grads = fluid.gradients(loss, [x, w])
    return main, startup, loss, grads, extra


def _check(make, feed_x=X, extra_feed=None, ref=None):
    """Gradients of make's loss w.r.t. x and w against finite differences; its value against
    `ref(x, w)` when given."""
    main, startup, loss, grads, _ = _build(make, feed_x.shape)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": feed_x, "w": W, **(extra_feed or {})}

    def value(x, w):
        return float(exe.run(main, feed={**feed, "x": x, "w": w}, fetch_list=[loss],
                             scope=scope)[0].reshape(-1)[0])

    got = exe.run(main, feed=feed, fetch_list=[loss, *grads], scope=scope)
    if ref is not None:
        np.testing.assert_allclose(got[0].reshape(-1)[0], ref(feed_x, W), rtol=1e-10)
    for k, (arg, g) in enumerate(zip((feed_x, W), got[1:])):
        num = np.zeros_like(arg)
        for idx in np.ndindex(arg.shape):
            p, m = arg.copy(), arg.copy()
            p[idx] += 1e-6
            m[idx] -= 1e-6
            args_p = (p, W) if k == 0 else (feed_x, p)
            args_m = (m, W) if k == 0 else (feed_x, m)
            num[idx] = (value(*args_p) - value(*args_m)) / 2e-6
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def _counter(n):
    i = L.fill_constant([1], "int64", 0)
    limit = L.fill_constant([1], "int64", n)
    return i, limit


def test_while_with_a_tensor_array():
    def make(x, w):
        i, n = _counter(3)
        c = L.less_than(i, n)
        h, arr = L.assign(x), L.create_array("float64")
        loop = L.While(c)
        with loop.block():
            new = L.tanh(L.matmul(h, w))
            L.assign(new, h)
            L.array_write(new, i, array=arr)
            L.increment(i, 1, in_place=True)
            L.less_than(i, n, cond=c)
        stacked, _ = L.tensor_array_to_tensor(arr, axis=0, use_stack=True)
        return L.reduce_sum(h) + L.reduce_mean(stacked * stacked), None

    def ref(x, w):
        hs, h = [], x
        for _ in range(3):
            h = np.tanh(h @ w)
            hs.append(h)
        return h.sum() + np.mean(np.stack(hs) ** 2)

    _check(make, ref=ref)


def test_while_loop_from_a_computed_initial_value_and_nested_loops():
    def make(x, w):
        i, n = _counter(2)

        def body(i, h):
            j, m = _counter(2)
            j, h = L.while_loop(lambda j, h: L.less_than(j, m),
                                lambda j, h: [j + 1, L.sin(L.matmul(h, w)) + h], [j, h])
            return [i + 1, h * 0.5]

        i, h = L.while_loop(lambda i, h: L.less_than(i, n), body, [i, L.scale(x, 2.0)])
        return L.reduce_sum(h * h), None

    def ref(x, w):
        h = 2 * x
        for _ in range(2):
            for _ in range(2):
                h = np.sin(h @ w) + h
            h = h * 0.5
        return (h * h).sum()

    _check(make, ref=ref)


@pytest.mark.parametrize("a", [-1.0, 1.0])
def test_cond_case_switch_case(a):
    def make(x, w):
        av = fluid.data("a", [1], "float64")
        zero = L.fill_constant([1], "float64", 0.0)
        pred = L.less_than(av, zero)
        y = L.cond(pred, lambda: L.matmul(x, w), lambda: L.tanh(x) * 3.0)
        k = L.cast(pred, "int64")
        z = L.switch_case(k, {0: lambda: L.exp(x), 1: lambda: x * x})
        c = L.case([(L.logical_not(pred), lambda: L.matmul(x, w) * 2.0)], default=lambda: x)
        return L.reduce_sum(y * z) + L.reduce_mean(c), None

    def ref(x, w):
        if a < 0:
            return ((x @ w) * (x * x)).sum() + np.mean(x)
        return (np.tanh(x) * 3 * np.exp(x)).sum() + np.mean(x @ w * 2)

    _check(make, extra_feed={"a": np.array([a])}, ref=ref)


def test_ifelse_rows():
    rows = R.uniform(-1, 1, (5, 3))

    def make(x, w):
        first = L.slice(x, axes=[1], starts=[0], ends=[1])
        ie = L.IfElse(L.greater_than(first, L.fill_constant([5, 1], "float64", 0.0)))
        with ie.true_block():
            ie.output(L.matmul(ie.input(x), w))
        with ie.false_block():
            ie.output(L.exp(ie.input(x)))
        out, = ie()
        return L.reduce_sum(out * out), None

    def ref(x, w):
        out = np.where(x[:, :1] > 0, x @ w, np.exp(x))
        return (out * out).sum()

    _check(make, feed_x=rows, ref=ref)


def test_static_rnn_with_a_given_initial_memory():
    def make(x, w):
        seq = fluid.data("seq", list(SEQ.shape), "float64")
        rnn = L.StaticRNN()
        with rnn.step():
            word = rnn.step_input(seq)
            prev = rnn.memory(init=x)
            hidden = L.tanh(L.matmul(word, w) + L.matmul(prev, w))
            rnn.update_memory(prev, hidden)
            rnn.step_output(hidden * 2.0)
        return L.reduce_sum(rnn() ** 2), None

    def ref(x, w):
        h, total = x, 0.0
        for t in range(SEQ.shape[0]):
            h = np.tanh(SEQ[t] @ w + h @ w)
            total += ((2 * h) ** 2).sum()
        return total

    _check(make, extra_feed={"seq": SEQ}, ref=ref)


def test_a_loop_keeps_its_iterations_only_for_a_backward_pass():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        i, n = _counter(3)
        i, h = L.while_loop(lambda i, h: L.less_than(i, n), lambda i, h: [i + 1, h * 2.0],
                            [i, x])
        loop = next(op for op in main.global_block().ops if op.type == "while")
        assert not loop.output("StepScopes")  # forward only: nothing is kept
        (gx,) = fluid.gradients(L.reduce_sum(h), [x])
        assert loop.output("StepScopes")
    exe = fluid.Executor(fluid.CPUPlace())
    out, g = exe.run(main, feed={"x": X}, fetch_list=[h, gx])
    np.testing.assert_allclose(out, X * 8)
    np.testing.assert_allclose(g, np.full_like(X, 8.0))


def test_a_loop_that_never_runs_passes_its_values_through():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        i, n = _counter(0)
        i, h = L.while_loop(lambda i, h: L.less_than(i, n), lambda i, h: [i + 1, h * 2.0],
                            [i, x])
    out, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": X}, fetch_list=[h])
    np.testing.assert_allclose(out, X)


def test_is_empty_and_array_length():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        arr = L.array_write(x, L.fill_constant([1], "int64", 2))
        n, e = L.array_length(arr), L.is_empty(x)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": X}, fetch_list=[n, e])
    assert got[0].tolist() == [3] and got[1].tolist() == [False]


def test_errors_name_the_problem():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        i, n = _counter(3)
        c = L.less_than(i, n)
        loop = L.While(c)
        with pytest.raises(InvalidArgumentError, match="never updates its condition"):
            with loop.block():
                L.increment(i, 1, in_place=True)
        with pytest.raises(TypeError, match="bool"):
            L.While(i)
        with pytest.raises(ValueError, match="same structure"):
            L.while_loop(lambda i: L.less_than(i, n), lambda i: [i + 1, i], [i])
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        arr = L.array_write(x, L.fill_constant([1], "int64", 0))
        y = L.array_read(arr, L.fill_constant([1], "int64", 4))
    with pytest.raises(ExecutionError, match="index 4 of a tensor array of length 1"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": X}, fetch_list=[y])
