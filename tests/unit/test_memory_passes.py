"""Memory: in-place updates (BuildStrategy.enable_inplace, executor/inplace.py) and the
memory_optimize pass (updates scheduled right after their gradients) give bitwise the numbers
of the plain run, on an MLP, a CNN with batch_norm, an LSTM over LoD sequences, a program
with a While loop and sparse (SelectedRows) embeddings, on one place and two; a buffer a user
holds (an array taken from the scope, a view of it, a fetch kept as a LoDTensor) is never
written over; the plan's memory report says what was lent."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.kernels.registry import run_kernel
from spmd.passes.memory_optimize import hoist_updates
from spmd.passes.strategy import field_decisions

L = fluid.layers
PLACE = fluid.CPUPlace()
R = np.random.default_rng(5)
STEPS = 4


def _mlp():
    x = fluid.data("x", [None, 6], "float32")
    y = fluid.data("y", [None, 1], "int64")
    h = L.fc(L.fc(x, 16, act="relu"), 8, act="tanh")
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 3), y))
    fluid.optimizer.Adam(0.01).minimize(loss)
    return loss, lambda: {"x": R.standard_normal((8, 6)).astype("float32"),
                          "y": R.integers(0, 3, (8, 1)).astype("int64")}


def _cnn():
    x = fluid.data("x", [None, 1, 8, 8], "float32")
    y = fluid.data("y", [None, 1], "int64")
    h = L.conv2d(x, 4, 3, padding=1)
    h = L.batch_norm(h, act="relu")
    h = L.pool2d(h, 2, pool_stride=2)
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 5), y))
    fluid.optimizer.Momentum(0.05, 0.9, use_nesterov=True).minimize(loss)
    return loss, lambda: {"x": R.standard_normal((4, 1, 8, 8)).astype("float32"),
                          "y": R.integers(0, 5, (4, 1)).astype("int64")}


def _lstm():
    words = fluid.data("words", [None, 1], "int64", lod_level=1)
    label = fluid.data("label", [None, 1], "int64")
    emb = L.embedding(words, size=[30, 8])
    h, _ = L.dynamic_lstm(L.fc(emb, 4 * 6), size=4 * 6)
    pooled = L.sequence_pool(h, "max")
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(pooled, 2), label))
    fluid.optimizer.Adam(0.02).minimize(loss)

    def feed():
        lengths = [3, 1, 4, 2]
        ids = R.integers(0, 30, (sum(lengths), 1)).astype("int64")
        return {"words": fluid.create_lod_tensor(ids, [lengths], PLACE),
                "label": R.integers(0, 2, (len(lengths), 1)).astype("int64")}
    return loss, feed


def _while():
    x = fluid.data("x", [None, 5], "float32")
    h = L.fc(x, 5, act="tanh")
    i = L.fill_constant([1], "int64", 0)
    limit = L.fill_constant([1], "int64", 3)
    cond = L.less_than(i, limit)
    acc = L.fill_constant([4, 5], "float32", 0.0)
    acc.stop_gradient = False
    loop = L.While(cond)
    with loop.block():
        L.assign(acc + h * h, acc)
        L.increment(i, 1, in_place=True)
        L.less_than(i, limit, cond=cond)
    loss = L.mean(L.fc(acc, 2))
    fluid.optimizer.SGD(0.1).minimize(loss)
    return loss, lambda: {"x": R.standard_normal((4, 5)).astype("float32")}


def _sparse():
    """SelectedRows gradients: a sparse embedding, updated as a dense table by momentum."""
    ids = fluid.data("ids", [None, 1], "int64")
    y = fluid.data("y", [None, 1], "float32")
    emb = L.embedding(ids, size=[50, 6], is_sparse=True)
    loss = L.mean(L.square_error_cost(L.fc(emb, 1), y))
    fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)
    return loss, lambda: {"ids": R.integers(0, 50, (8, 1)).astype("int64"),
                          "y": R.standard_normal((8, 1)).astype("float32")}


def _sparse_lazy_adam():
    """SelectedRows gradients updated row by row (lazy Adam)."""
    ids = fluid.data("ids", [None, 1], "int64")
    y = fluid.data("y", [None, 1], "float32")
    emb = L.embedding(ids, size=[50, 6], is_sparse=True)
    loss = L.mean(L.square_error_cost(L.fc(emb, 1), y))
    fluid.optimizer.Adam(0.05, lazy_mode=True).minimize(loss)
    return loss, lambda: {"ids": R.integers(0, 50, (8, 1)).astype("int64"),
                          "y": R.standard_normal((8, 1)).astype("float32")}


MODELS = {"mlp": _mlp, "cnn_bn": _cnn, "lstm": _lstm, "while": _while,
          "sparse_momentum": _sparse, "sparse_lazy_adam": _sparse_lazy_adam}


def _build(model):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, feed = MODELS[model]()
    return main, startup, loss, feed


def _strategy(on: bool):
    bs = fluid.BuildStrategy()
    bs.enable_inplace = bs.memory_optimize = on
    return bs


def _train(model, mode: str, places: int = 1, seed: int = 0):
    """(losses, persistables as bytes) after STEPS steps. mode: 'plain' (Executor.run on the
    program: the defaults), 'on' / 'off' (a CompiledProgram with both memory knobs)."""
    global R
    R = np.random.default_rng(seed)
    main, startup, loss, feed = _build(model)
    scope = fluid.Scope()
    exe = fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    program = main
    if mode != "plain":
        program = fluid.CompiledProgram(main, build_strategy=_strategy(mode == "on"))
    if places > 1:
        program = program if mode != "plain" else fluid.CompiledProgram(main)
        program = program.with_data_parallel(loss_name=loss.name, places=[PLACE] * places)
    losses = []
    for _ in range(STEPS):
        feeds = [feed() for _ in range(places)]
        out = exe.run(program, feed=feeds if places > 1 else feeds[0], fetch_list=[loss],
                      scope=scope)
        losses.append(np.asarray(out[0]).tobytes())
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()).tobytes()
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None}
    return losses, state


@pytest.mark.parametrize("model", sorted(MODELS))
def test_memory_knobs_train_bitwise_alike(model):
    plain = _train(model, "plain")
    assert _train(model, "off") == plain
    assert _train(model, "on") == plain


@pytest.mark.parametrize("model", ["mlp", "cnn_bn"])
def test_memory_knobs_train_bitwise_alike_on_two_places(model):
    assert _train(model, "on", places=2) == _train(model, "off", places=2)


def _plain_run(model="mlp"):
    global R
    R = np.random.default_rng(0)
    main, startup, loss, feed = _build(model)
    scope = fluid.Scope()
    exe = fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    data = feed()
    run = lambda **kw: exe.run(main, feed=data, fetch_list=[loss], scope=scope, **kw)  # noqa
    plan = lambda: exe.plan_cache.find(main, list(data), [loss.name])  # noqa: E731
    return main, scope, run, plan


def test_updates_are_lent_their_inputs_when_nothing_else_holds_them():
    main, scope, run, plan = _plain_run()
    run()
    report = plan().memory_report()
    assert report.inplace_ops == 6  # adam on three weights and three biases
    run()  # the first run's values came from the startup program: held by nothing else now
    report = plan().memory_report()
    assert report.lent_last_run == 6 * 3  # Param, Moment1, Moment2 each
    assert report.lent_total >= report.lent_last_run


def test_in_place_never_writes_over_an_array_a_user_holds():
    main, scope, run, plan = _plain_run()
    run()
    name = main.global_block().all_parameters()[0].name
    held = np.asarray(scope.find_var(name).get_tensor())  # the scope's own array
    assert held is scope.get(name)
    before = held.copy()
    view = np.asarray(scope.find_var(main.global_block().all_parameters()[2].name)
                      .get_tensor())[:1]
    view_before = view.copy()
    run()
    # the two held parameters got new arrays; the scope's are the run's own again
    assert plan().memory_report().lent_last_run == 6 * 3 - 2
    run()
    assert plan().memory_report().lent_last_run == 6 * 3
    np.testing.assert_array_equal(held, before)  # unchanged under the user
    np.testing.assert_array_equal(view, view_before)
    assert not np.array_equal(np.array(scope.find_var(name).get_tensor()), before)


def test_a_fetch_kept_as_a_tensor_is_not_written_over():
    main, startup, loss, feed = _build("mlp")
    scope = fluid.Scope()
    exe = fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    data = feed()
    name = main.global_block().all_parameters()[0].name
    exe.run(main, feed=data, fetch_list=[loss, name], scope=scope)
    kept = exe.run(main, feed=data, fetch_list=[loss, name], scope=scope,
                   return_numpy=False)[1]  # a LoDTensor over the run's own array
    snapshot = np.array(kept)
    for _ in range(2):
        exe.run(main, feed=data, fetch_list=[loss, name], scope=scope, return_numpy=False)
    np.testing.assert_array_equal(np.array(kept), snapshot)
    assert not np.array_equal(np.array(scope.find_var(name).get_tensor()), snapshot)


def test_holding_arrays_changes_no_number():
    main, scope, run, _ = _plain_run()
    held = [np.asarray(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()]
    losses_held = [run()[0].tobytes() for _ in range(3)]
    del held
    main2, scope2, run2, _ = _plain_run()
    assert [run2()[0].tobytes() for _ in range(3)] == losses_held
    for p in main.global_block().all_parameters():
        assert (np.array(scope.find_var(p.name).get_tensor()).tobytes()
                == np.array(scope2.find_var(p.name).get_tensor()).tobytes())


def test_enable_inplace_false_lends_nothing():
    main, startup, loss, feed = _build("mlp")
    scope = fluid.Scope()
    exe = fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main, build_strategy=_strategy(False))
    data = feed()
    for _ in range(2):
        exe.run(compiled, feed=data, fetch_list=[loss], scope=scope)
    assert compiled.memory_options().inplace is False
    # the plain program's plan (the defaults) was never made: only the compiled one ran
    assert exe.plan_cache.find(main, list(data), [loss.name]) is None


def test_memory_optimize_schedules_each_update_after_its_gradient():
    main, startup, loss, _ = _build("mlp")
    compiled = fluid.CompiledProgram(main, build_strategy=_strategy(True))
    program = compiled.one_place_program()
    assert program is not main and [op.type for op in main.global_block().ops][-1] == "adam"
    ops = program.global_block().ops
    for i, op in enumerate(ops):
        if op.type == "adam":
            grad = op.input("Grad")[0]
            writer = max(j for j in range(i) if grad in ops[j].output_arg_names)
            assert all(o.type == "adam" for o in ops[writer + 1:i]), (writer, i)
    first_adam = next(i for i, op in enumerate(ops) if op.type == "adam")
    assert any(op.role.name == "BACKWARD" for op in ops[first_adam:])  # moved into backward
    assert compiled.one_place_program() is program  # made once
    again = main.clone()
    assert hoist_updates(again.global_block()) == 6 - 1  # the first layer's stays last


def test_the_strategy_fields_act():
    decisions = field_decisions(fluid.BuildStrategy())
    assert decisions["memory_optimize"] == "acts: passes ['memory_optimize']"
    assert decisions["enable_inplace"].startswith("acts: True (the default)")


def test_save_and_load_after_in_place_training(tmp_path):
    main, scope, run, _ = _plain_run()
    for _ in range(3):
        run()
    exe = fluid.Executor(PLACE)
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path), main_program=main)
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        fluid.io.load_persistables(exe, str(tmp_path), main_program=main)
    for v in main.list_vars():
        if v.persistable and scope.find_var(v.name) is not None:
            np.testing.assert_array_equal(np.array(fresh.find_var(v.name).get_tensor()),
                                          np.array(scope.find_var(v.name).get_tensor()))


@pytest.mark.parametrize("n", [1, 5, 40_000, 70_001])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_chunked_updates_are_bitwise_the_plain_expressions(n, dtype):
    rng = np.random.default_rng(n)
    p, g, m1, v = (rng.standard_normal(n).astype(dtype) for _ in range(4))
    m2 = rng.random(n).astype(dtype)
    t = np.dtype(dtype).type
    lr = np.array([0.01], dtype)
    b1p, b2p = np.array([0.9 ** 3], dtype), np.array([0.999 ** 3], dtype)
    one, b1, b2, eps = t(1), t(0.9), t(0.999), t(1e-8)
    lr_t = lr.reshape(()) * (np.sqrt(one - b2p.reshape(())) / (one - b1p.reshape(())))
    want_m1 = b1 * m1 + (one - b1) * g
    want_m2 = b2 * m2 + (one - b2) * g * g
    want_p = p - lr_t * (want_m1 / (np.sqrt(want_m2) + eps))
    got = run_kernel("adam", np, {"Param": p, "Grad": g, "Moment1": m1, "Moment2": m2,
                                  "LearningRate": lr, "Beta1Pow": b1p, "Beta2Pow": b2p},
                     {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": False},
                     {"ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"})
    for slot, want in (("ParamOut", want_p), ("Moment1Out", want_m1), ("Moment2Out", want_m2)):
        assert got[slot].tobytes() == want.tobytes(), slot
    mu = t(0.9)
    for nesterov in (False, True):
        want_v = v * mu + g
        step = (g + want_v * mu) * lr.reshape(()) if nesterov else lr.reshape(()) * want_v
        got = run_kernel("momentum", np, {"Param": p, "Grad": g, "Velocity": v,
                                          "LearningRate": lr},
                         {"mu": 0.9, "use_nesterov": nesterov}, {"ParamOut", "VelocityOut"})
        assert got["ParamOut"].tobytes() == (p - step).tobytes()
        assert got["VelocityOut"].tobytes() == want_v.tobytes()
    want = g * -lr.reshape(())
    want += p
    got = run_kernel("sgd", np, {"Param": p, "Grad": g, "LearningRate": lr}, {}, {"ParamOut"})
    assert got["ParamOut"].tobytes() == want.tobytes()
