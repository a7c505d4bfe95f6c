"""Activations in place (executor/inplace.py, DyingInputs): an elementwise op whose input dies
there (relu X -> Out, relu_grad Out@GRAD -> X@GRAD, tanh, sigmoid, scale, elementwise_add)
writes its output into that input's buffer, from LEND_MIN_BYTES (64 KiB) up. Training gives
bitwise the numbers of BuildStrategy.enable_inplace=False, on one thread and on the SSA
executor's two; the plan's memory report counts the loans; an input a user holds, fetches,
or a later op reads is never written over."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.executor.inplace import LEND_MIN_BYTES
from spmd.kernels.registry import lent_for

L = fluid.layers
PLACE = fluid.CPUPlace()
STEPS = 4


# activations of 64 KiB (LEND_MIN_BYTES) and more are lent: [64, 256] float32 here
def _mlp():
    x = fluid.data("x", [None, 12], "float32")
    y = fluid.data("y", [None, 1], "int64")
    h = L.fc(x, 256, act="relu")
    h = L.fc(h, 256, act="tanh")
    h = L.scale(L.fc(h, 256, act="sigmoid"), scale=2.0, bias=-1.0)
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 4), y))
    fluid.optimizer.SGD(0.1).minimize(loss)
    return loss, lambda rng: {"x": rng.standard_normal((64, 12)).astype("float32"),
                              "y": rng.integers(0, 4, (64, 1)).astype("int64")}


def _cnn():
    x = fluid.data("x", [None, 1, 28, 28], "float32")
    y = fluid.data("y", [None, 1], "int64")
    h = x
    for filters in (8, 32):  # activations [8, 8, 24, 24] and [8, 32, 8, 8]
        h = fluid.nets.simple_img_conv_pool(input=h, num_filters=filters, filter_size=5,
                                            pool_size=2, pool_stride=2, act="relu")
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 5), y))
    fluid.optimizer.Momentum(0.05, 0.9).minimize(loss)
    return loss, lambda rng: {"x": rng.standard_normal((8, 1, 28, 28)).astype("float32"),
                              "y": rng.integers(0, 5, (8, 1)).astype("int64")}


MODELS = {"mlp": _mlp, "cnn": _cnn}


def _compiled(main, inplace: bool, threads: int, loss_name=None):
    """`main` on one place with enable_inplace = `inplace` and `threads` SSA threads."""
    bs = fluid.BuildStrategy()
    bs.enable_inplace = inplace
    es = fluid.ExecutionStrategy()
    es.num_threads = threads
    return fluid.CompiledProgram(main, build_strategy=bs).with_data_parallel(
        loss_name=loss_name, exec_strategy=es, places=[PLACE])


def _train(model, inplace: bool, threads: int = 1):
    """(losses, persistables, the plan's memory report) after STEPS steps."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, feed = MODELS[model]()
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    program = _compiled(main, inplace, threads, loss.name)
    rng = np.random.default_rng(7)
    losses = []
    for _ in range(STEPS):
        data = feed(rng)
        out = exe.run(program, feed=data, fetch_list=[loss], scope=scope)
        losses.append(np.asarray(out[0]).tobytes())
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()).tobytes()
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None
             and scope.find_var(v.name).is_initialized()}
    plan = exe.plan_cache.find(program.data_parallel_program, list(data), [loss.name], 0)
    report = plan.memory_report()
    exe.close()
    return losses, state, report


@pytest.mark.parametrize("model", sorted(MODELS))
def test_training_is_bitwise_alike_with_loans_on_and_off(model):
    losses, state, report = _train(model, True)
    off_losses, off_state, off_report = _train(model, False)
    assert losses == off_losses
    assert state == off_state
    # mlp: relu, tanh, sigmoid forward, relu_grad, tanh_grad and the scale of scale's gradient
    # (whose input, a reshaped matrix product, is a view: never lent); cnn: relu, relu_grad.
    # Then each layer's bias add over the mul's (conv's) output, which dies there since its
    # gradient ops read it only for its shape (no-need-buffer): lent in the 3 [64, 256] fc
    # layers and the 2 convolutions ([8, 8, 24, 24], [8, 32, 8, 8]), not in the last fc (its
    # [64, 4] / [8, 5] output is under LEND_MIN_BYTES: batch -1 at compile time, so the op has
    # the wrapper, which declines at run time)
    assert report.reuse_ops == (6 + 4 if model == "mlp" else 4 + 3)
    assert report.reused_last_run == (5 + 3 if model == "mlp" else 4 + 2)
    assert report.reused_total == STEPS * report.reused_last_run
    assert (off_report.reuse_ops, off_report.reused_total) == (0, 0)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_two_threads_train_bitwise_as_one_with_loans(model):
    losses, state, report = _train(model, True)
    got_losses, got_state, got_report = _train(model, True, threads=2)
    assert got_losses == losses
    assert got_state == state
    assert got_report.reused_last_run > 0


# ---- one-op programs: when a loan is refused ----------------------------------------------

def _run(build, feed, fetch, inplace=True, threads=1, runs=1, **kw):
    """(fetched of the last run, memory report) of a program built by `build` (returning the
    variables to fetch by index `fetch`)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        outs = build()
    fetch_list = [outs[i] for i in fetch]
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    program = _compiled(main, inplace, threads)
    for _ in range(runs):
        got = exe.run(program, feed=feed, fetch_list=fetch_list, scope=scope, **kw)
    plan = exe.plan_cache.find(program.data_parallel_program, list(feed),
                               [v.name for v in fetch_list], 0)
    report = plan.memory_report()
    exe.close()
    return got, report


X = np.random.default_rng(1).standard_normal((128, 128)).astype("float32")  # 64 KiB


def _chain():
    """x -> scale -> relu -> tanh -> sigmoid -> scale: each op's input dies at it, but x."""
    x = fluid.data("x", [None, 128], "float32")
    a = L.scale(x, scale=1.5, bias=0.25)
    b = L.relu(a)
    c = L.tanh(b)
    d = L.sigmoid(c)
    e = L.scale(d, scale=3.0, bias=-1.0, bias_after_scale=False)
    return x, a, b, c, d, e


def _chain_numpy():
    a = X * np.float32(1.5) + np.float32(0.25)
    b = np.maximum(a, 0)
    c = np.tanh(b)
    d = 1 / (1 + np.exp(-c))
    return a, b, c, d, (d + np.float32(-1.0)) * np.float32(3.0)


def test_an_inference_chain_reuses_every_dying_input():
    (got,), report = _run(_chain, {"x": X}, [5])
    (off,), _ = _run(_chain, {"x": X}, [5], inplace=False)
    assert got.tobytes() == off.tobytes()
    np.testing.assert_allclose(got, _chain_numpy()[-1], rtol=1e-6, atol=1e-6)
    # the feed x is never lent: scale, relu, tanh, sigmoid after it are
    assert (report.reuse_ops, report.reused_last_run) == (4, 4)


def test_a_fetched_intermediate_is_not_written_over():
    (a, b, e), report = _run(_chain, {"x": X}, [1, 2, 5])
    want = _chain_numpy()
    np.testing.assert_allclose(a, want[0], rtol=1e-6)  # relu did not write over it
    assert (a < 0).any()
    np.testing.assert_allclose(b, want[1], rtol=1e-6)
    assert report.reuse_ops == 2  # only tanh's and sigmoid's inputs still die


def test_a_fetch_kept_as_a_tensor_keeps_its_values():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        _, a, _, _, _, e = _chain()
    exe = fluid.Executor(PLACE)
    kept = exe.run(main, feed={"x": X}, fetch_list=[a, e], return_numpy=False)[0]
    snapshot = np.array(kept)
    for k in range(3):  # the later runs' relu never writes over the array handed out
        exe.run(main, feed={"x": X + k}, fetch_list=[a, e], return_numpy=False)
    np.testing.assert_array_equal(np.array(kept), snapshot)


def test_a_value_a_later_op_reads_is_not_written_over():
    def build():
        x = fluid.data("x", [None, 128], "float32")
        a = L.scale(x, scale=2.0)
        b = L.relu(a)  # a is read again below: relu gets a fresh buffer
        return x, L.elementwise_add(b, a)

    (got,), report = _run(build, {"x": X}, [1])
    a = X * np.float32(2.0)
    np.testing.assert_array_equal(got, np.maximum(a, 0) + a)
    assert report.reuse_ops == 1  # elementwise_add over relu's output, which dies there


def test_an_array_a_python_op_keeps_is_not_written_over():
    kept = []

    def produce(x):
        out = np.asarray(x) - 1.0
        kept.append(out)  # the user's function holds its result
        return out

    def build():
        x = fluid.data("x", [None, 128], "float32")
        h = fluid.default_main_program().global_block().create_var(
            name="h", shape=[-1, 128], dtype="float32")
        L.py_func(produce, x, h)
        return x, L.relu(h)

    (got,), report = _run(build, {"x": X}, [1], runs=2)
    assert report.reuse_ops == 1 and report.reused_last_run == 0  # the count refused it
    for out in kept:
        np.testing.assert_array_equal(out, X - 1.0)
    np.testing.assert_array_equal(got, np.maximum(X - 1.0, 0))


def test_a_reader_not_waited_for_blocks_the_loan_on_threads():
    def build():
        x = fluid.data("x", [None, 128], "float32")
        a = L.scale(x, scale=2.0)
        s = L.scale(a, scale=0.5)  # reads a too, beside relu: nothing orders the two
        b = L.relu(a)  # a dies here in program order
        return x, s, b

    (s1, b1), one = _run(build, {"x": X}, [1, 2])
    (s2, b2), two = _run(build, {"x": X}, [1, 2], threads=2)
    assert one.reuse_ops == 1 and two.reuse_ops == 0  # relu over a: on one thread only
    assert s1.tobytes() == s2.tobytes() and b1.tobytes() == b2.tobytes()
    np.testing.assert_array_equal(s1, X * np.float32(2.0) * np.float32(0.5))


def test_an_output_wider_than_the_dying_input_gets_a_fresh_array():
    def build():
        x = fluid.data("x", [None, 1], "float32")
        y = fluid.data("y", [None, 4], "float32")
        return x, y, L.elementwise_add(L.scale(x, scale=1.0, bias=1.0), y)

    xs = np.arange(1 << 14, dtype="float32").reshape(-1, 1)
    ys = np.ones((1 << 14, 4), dtype="float32")
    (wide,), report = _run(build, {"x": xs, "y": ys}, [2])
    assert report.reuse_ops == 1 and report.reused_last_run == 0  # [n, 1] cannot hold [n, 4]
    np.testing.assert_array_equal(wide, xs + 1.0 + ys)


def test_a_kernel_takes_the_lent_buffer_only_for_its_exact_shape_and_dtype():
    a = np.zeros((3, 1), dtype="float32")
    assert lent_for({"Out": a}, "Out", a, np.float32(2.0)) is a
    assert lent_for({"Out": a}, "Out", a, 2.0) is a  # a Python float keeps float32
    assert lent_for({"Out": a}, "Out", a, np.ones((3, 4), "float32")) is None  # wider
    assert lent_for({"Out": a}, "Out", a, np.ones((3, 1), "float64")) is None  # promoted
    assert lent_for(None, "Out", a) is None and lent_for({}, "Out", a) is None


def test_small_activations_are_not_lent():
    small = X[:4, :8].copy()
    assert small.nbytes < LEND_MIN_BYTES <= X.nbytes

    def build():
        x = fluid.data("x", [None, 8], "float32")
        return x, L.tanh(L.relu(L.scale(x, scale=3.0)))

    (got,), report = _run(build, {"x": small}, [1])
    assert report.reuse_ops == 2 and report.reused_last_run == 0
    np.testing.assert_allclose(got, np.tanh(np.maximum(small * np.float32(3.0), 0)),
                               rtol=1e-6)
