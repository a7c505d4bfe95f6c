"""The SSA thread-pool executor (ExecutionStrategy.num_threads > 1, spmd/executor/ssa.py): over
several training steps it gives bitwise the losses and parameters of one thread, for an MLP, a
two-tower model, a CNN with batch_norm, dropout in both towers (the generator's draws keep
their order), an LSTM over LoD sequences and a program with a While loop; ops really run at
once (Plan.schedule_report); an op failing in one branch fails the run naming it, the threads
do not hang and the next run works; one and zero threads keep the flat loop."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError

L = fluid.layers
STEPS = 4
pytestmark = pytest.mark.timeout(180)


def _program(body, seed=7):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = body()
    return main, startup, loss


def mlp():
    x, y = fluid.data("x", [None, 16], "float32"), fluid.data("y", [None, 1], "int64")
    h = L.fc(L.fc(x, 32, act="relu"), 24, act="tanh")
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 4), y))
    fluid.optimizer.Adam(0.01).minimize(loss)
    return loss


def two_tower(dropout=False):
    x, y = fluid.data("x", [None, 16], "float32"), fluid.data("y", [None, 1], "int64")
    towers = []
    for width in (32, 24):
        h = L.fc(x, width, act="relu")
        if dropout:
            h = L.dropout(h, 0.3)
        towers.append(L.fc(h, 8, act="tanh"))
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(L.concat(towers, 1), 4), y))
    fluid.optimizer.Momentum(0.05, 0.9).minimize(loss)
    return loss


def cnn():
    x, y = fluid.data("x", [None, 16], "float32"), fluid.data("y", [None, 1], "int64")
    img = L.reshape(x, [-1, 1, 4, 4])
    a = L.batch_norm(L.conv2d(img, 4, 3, padding=1), act="relu")
    b = L.batch_norm(L.conv2d(img, 3, 1), act="relu")
    h = L.pool2d(L.concat([a, b], 1), 2, "max", 2)
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 4), y))
    fluid.optimizer.SGD(0.1).minimize(loss)
    return loss


def lstm():
    words = fluid.data("words", [None, 1], "int64", lod_level=1)
    y = fluid.data("y", [None, 1], "int64")
    emb = L.embedding(words, size=[20, 8])
    fwd, _ = L.dynamic_lstm(L.fc(emb, 4 * 6), 4 * 6)
    back, _ = L.dynamic_lstm(L.fc(emb, 4 * 5), 4 * 5, is_reverse=True)
    pooled = L.concat([L.sequence_pool(fwd, "max"), L.sequence_pool(back, "average")], 1)
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(pooled, 4), y))
    fluid.optimizer.Adam(0.02).minimize(loss)
    return loss


def with_while():
    x, y = fluid.data("x", [None, 16], "float32"), fluid.data("y", [None, 1], "int64")
    h = L.fc(x, 8, act="tanh")
    side = L.fc(x, 8, act="relu")
    i = L.fill_constant([1], "int64", 0)
    limit = L.fill_constant([1], "int64", 3)
    cond = L.less_than(i, limit)
    acc = L.fill_constant([1], "float32", 0.0)
    acc.stop_gradient = False
    loop = L.While(cond)
    with loop.block():
        L.assign(acc + L.reduce_mean(h * h), acc)
        L.increment(i, 1, in_place=True)
        L.less_than(i, limit, cond=cond)
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(side, 4), y)) + acc * 0.1
    fluid.optimizer.SGD(0.1).minimize(loss)
    return loss


def dense_feeds(rows=12):
    rng = np.random.default_rng(3)
    return [{"x": rng.standard_normal((rows, 16)).astype("float32"),
             "y": rng.integers(0, 4, (rows, 1)).astype("int64")} for _ in range(STEPS)]


def lod_feeds():
    rng = np.random.default_rng(5)
    out = []
    for _ in range(STEPS):
        lengths = rng.integers(1, 6, size=5).tolist()
        words = rng.integers(0, 20, size=(sum(lengths), 1)).astype("int64")
        out.append({"words": fluid.create_lod_tensor(words, [lengths], fluid.CPUPlace()),
                    "y": rng.integers(0, 4, (5, 1)).astype("int64")})
    return out


def compiled(main, loss, threads, places=1, sequential=False):
    es, bs = fluid.ExecutionStrategy(), fluid.BuildStrategy()
    es.num_threads = threads
    bs.enable_sequential_execution = sequential
    return fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=bs, exec_strategy=es,
        places=[fluid.CPUPlace()] * places)


def train(model, feeds, threads, places=1, sequential=False):
    """(losses as bytes, parameters and optimizer state as bytes, the plan's schedule)."""
    main, startup, loss = _program(model)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = compiled(main, loss, threads, places, sequential)
    losses = [np.asarray(exe.run(program, feed=f, fetch_list=[loss], scope=scope)[0]).tobytes()
              for f in feeds]
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()).tobytes()
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None
             and scope.find_var(v.name).is_initialized()}
    plan = exe.plan_cache.find(program.data_parallel_program, list(feeds[0]), [loss.name], 0)
    report = plan.schedule_report()
    exe.close()
    return losses, state, report


MODELS = {
    "mlp": (mlp, dense_feeds),
    "two_tower": (two_tower, dense_feeds),
    "dropout": (lambda: two_tower(dropout=True), dense_feeds),
    "cnn_batch_norm": (cnn, dense_feeds),
    "lstm_lod": (lstm, lod_feeds),
    "while": (with_while, dense_feeds),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_threads_train_bitwise_as_one_thread(name):
    model, feeds = MODELS[name]
    data = feeds()
    losses, state, report = train(model, data, 1)
    assert report.threads == 1 and report.max_in_flight == 1
    for threads in (2, 4):
        got_losses, got_state, got_report = train(model, data, threads)
        assert got_report.threads == threads
        assert got_losses == losses, (name, threads)
        assert got_state.keys() == state.keys()
        differ = [k for k in state if got_state[k] != state[k]]
        assert not differ, (name, threads, differ)


@pytest.mark.parametrize("places", [1, 2])
def test_two_places_with_threads_equal_one_thread(places):
    """num_threads is shared by the places of the process, as fluid's one pool: 2 threads
    per place here."""
    data = dense_feeds(rows=24)
    want = train(lambda: two_tower(dropout=True), data, 1, places)
    got = train(lambda: two_tower(dropout=True), data, 2 * places, places)
    assert got[2].threads == 2
    assert got[0] == want[0] and got[1] == want[1]
    _, _, shared = train(lambda: two_tower(dropout=True), data[:1], 3, places)
    assert shared.threads == 3 // places


@pytest.mark.parametrize("places", [1, 2])
def test_sequential_execution_runs_in_program_order_whatever_num_threads(places):
    """BuildStrategy.enable_sequential_execution (fluid's sequential_execution_pass): one op
    at a time on each place, in program order, though num_threads asks for 4 a place; the
    same numbers."""
    data = dense_feeds(rows=24)
    want = train(lambda: two_tower(dropout=True), data, 1, places)
    got = train(lambda: two_tower(dropout=True), data, 4 * places, places, sequential=True)
    assert got[2].threads == 1 and got[2].max_in_flight == 1
    assert got[0] == want[0] and got[1] == want[1]


def test_independent_ops_run_at_once():
    """The two towers' ops overlap: the graph is wider than one op and more than one op was
    seen in flight. Ops are milliseconds long here, so a second thread finds work."""
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((256, 16)).astype("float32"),
              "y": rng.integers(0, 4, (256, 1)).astype("int64")} for _ in range(3)]

    def wide():
        x, y = fluid.data("x", [None, 16], "float32"), fluid.data("y", [None, 1], "int64")
        towers = [L.fc(L.fc(L.fc(x, 256, act="relu"), 256, act="relu"), 8) for _ in range(4)]
        loss = L.mean(L.softmax_with_cross_entropy(L.fc(L.concat(towers, 1), 4), y))
        fluid.optimizer.SGD(0.01).minimize(loss)
        return loss

    one = train(wide, feeds, 1)
    for _ in range(5):  # a loaded machine may serialize a run; one that overlaps suffices
        got = train(wide, feeds, 4)
        if got[2].max_in_flight > 1:
            break
    report = got[2]
    assert report.widest >= 4 and report.levels < report.ops
    assert report.max_in_flight > 1, report
    assert one[2].levels == report.levels and one[2].max_in_flight == 1
    assert got[0] == one[0] and got[1] == one[1]


def test_random_and_collective_ops_stay_in_program_order():
    _, _, report = train(lambda: two_tower(dropout=True), dense_feeds(), 4, places=2)
    # 2 dropout + 2 dropout_grad, the gradients' all-reduce and the loss share
    assert report.chained >= 5


def _failing_branch():
    x, y = fluid.data("x", [None, 16], "float32"), fluid.data("y", [None, 1], "int64")
    good = L.fc(L.fc(x, 64, act="relu"), 8)
    bad = L.fc(L.reshape(L.fc(x, 10), [-1, 4]), 8)  # 10 * rows values: rows must be even
    return L.mean(L.softmax_with_cross_entropy(L.fc(L.concat([good, L.reduce_mean(
        bad, dim=0, keep_dim=True) + good * 0], 1), 4), y))


def test_a_failing_branch_raises_naming_the_op_and_the_threads_go_on():
    main, startup, loss = _program(_failing_branch)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = compiled(main, loss, 4)
    rng = np.random.default_rng(1)

    def feed(rows):
        return {"x": rng.standard_normal((rows, 16)).astype("float32"),
                "y": rng.integers(0, 4, (rows, 1)).astype("int64")}

    alive = set(threading.enumerate())
    exe.run(program, feed=feed(8), fetch_list=[loss], scope=scope)
    for _ in range(3):
        with pytest.raises(ExecutionError, match=r"op #\d+ 'reshape2' failed"):
            exe.run(program, feed=feed(7), fetch_list=[loss], scope=scope)
        (value,) = exe.run(program, feed=feed(8), fetch_list=[loss], scope=scope)
        assert np.isfinite(value).all()
    mine = {t for t in threading.enumerate() if t.name.startswith("spmd-ssa")} - alive
    assert len(mine) == 3  # started once, still serving after the failures
    exe.close()  # and ended with the executor
    assert not any(t.is_alive() for t in mine)


def test_a_failing_backward_op_leaves_the_scope_as_program_order_does():
    """Tower b's updates could run long before tower a's backward reaches its py_func, which
    fails: in-place updates wait for every op before the first of them, so the failed run
    changes no parameter (as the flat loop, which runs the updates last)."""
    fail = {"now": False}

    def backward(x, out, dy):
        if fail["now"]:
            raise RuntimeError("backward refused")
        return dy

    def model():
        x, y = fluid.data("x", [None, 16], "float32"), fluid.data("y", [None, 1], "int64")
        x.stop_gradient = False
        a = fluid.default_main_program().current_block().create_var(
            name="a", shape=[-1, 16], dtype="float32")
        L.py_func(lambda v: v, L.fc(x, 16), a, backward_func=backward)
        for _ in range(4):
            a = L.fc(a, 32, act="tanh")
        b = L.fc(x, 8, act="relu")
        loss = L.mean(L.softmax_with_cross_entropy(L.fc(L.concat([a, b], 1), 4), y))
        fluid.optimizer.SGD(0.1).minimize(loss)
        return loss

    main, startup, loss = _program(model)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = compiled(main, loss, 4)
    feed = dense_feeds(rows=64)[0]
    exe.run(program, feed=feed, fetch_list=[loss], scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    fail["now"] = True
    for _ in range(3):
        with pytest.raises(ExecutionError, match="'py_func_grad' failed.*backward refused"):
            exe.run(program, feed=feed, fetch_list=[loss], scope=scope)
        for name, value in params.items():
            np.testing.assert_array_equal(np.array(scope.find_var(name).get_tensor()), value,
                                          err_msg=name)
    exe.close()


def test_an_executor_closed_stops_its_threads():
    main, startup, loss = _program(mlp)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    alive = {t for t in threading.enumerate() if t.name.startswith("spmd-ssa")}
    exe.run(compiled(main, loss, 3), feed=dense_feeds()[0], fetch_list=[loss], scope=scope)
    mine = {t for t in threading.enumerate() if t.name.startswith("spmd-ssa")} - alive
    assert len(mine) == 2  # the calling thread is the third
    exe.close()
    assert not any(t.is_alive() for t in mine)


def test_profiling_times_every_op_on_the_thread_that_ran_it(tmp_path):
    import json

    import spmd.fluid.profiler as profiler

    main, startup, loss = _program(two_tower)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    program = compiled(main, loss, 2)
    feeds = dense_feeds(rows=64)
    path = tmp_path / "profile"
    with profiler.profiler("CPU", "total", str(path)):
        for f in feeds:
            exe.run(program, feed=f, fetch_list=[loss], scope=scope)
    ops = [e for e in json.loads(path.read_text())["traceEvents"]
           if e.get("ph") == "X" and e["name"] not in ("feed", "fetch", "ParallelExecutor::Run")]
    count = program.data_parallel_program.global_block().ops
    assert len(ops) == len(count) * len(feeds)  # once each, whichever thread ran it
    exe.close()


@pytest.mark.parametrize("threads", [0, 1])
def test_zero_and_one_thread_run_in_program_order_without_warning(threads):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, _, report = train(mlp, dense_feeds()[:1], threads)
    assert report.threads == 1 and report.max_in_flight == 1
