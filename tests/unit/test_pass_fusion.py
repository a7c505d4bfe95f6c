"""The fusion passes of BuildStrategy (issue 13 item 4): fuse_elewise_add_act_ops,
fuse_bn_act_ops and fuse_all_optimizer_ops. Each fused program trains bitwise as the unfused
one (losses, parameters, optimizer state, over several steps), on one place and on two places
in AllReduce and Reduce mode; the fused ops are in the compiled program
(CompiledProgram.data_parallel_program); checkpoints saved from a fused run load and go on
as an unfused run would; what the passes leave alone is left alone."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import NotFoundError
from spmd.passes.strategy import BuildStrategy, field_decisions, forget_warnings, warn_unacted

FIELDS = ("fuse_elewise_add_act_ops", "fuse_bn_act_ops", "fuse_all_optimizer_ops")
STEPS, BATCH = 4, 8


def optimizer(name: str):
    if name == "sgd":
        return fluid.optimizer.SGD(0.1)
    if name == "momentum":
        return fluid.optimizer.Momentum(0.05, momentum=0.9, use_nesterov=True,
                                        regularization=fluid.regularizer.L2Decay(1e-3))
    if name == "adam_clip":
        return fluid.optimizer.Adam(0.01, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.5))
    return fluid.optimizer.Adam(0.01)


def build(model: str = "mlp", opt: str = "adam", dtype: str = "float64"):
    """(main, startup, loss): an MLP of fc + act layers (relu, tanh, sigmoid, a scaled sum, a
    residual add of an activated branch), or batch_norm + relu layers (2-D and conv)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], dtype)
        y = fluid.data("y", [None, 1], "int64")
        if model == "mlp":
            h = fluid.layers.fc(x, 24, act="relu")
            h = fluid.layers.fc(h, 24, act="tanh")
            branch = fluid.layers.sigmoid(fluid.layers.fc(h, 24, bias_attr=False))
            h = fluid.layers.elementwise_add(h, branch)  # X + act(Y)
            h = fluid.layers.scale(fluid.layers.elementwise_add(h, fluid.layers.fc(h, 24)),
                                   scale=0.5)  # act(X + Y) with act = scale
        elif model == "bn":
            h = fluid.layers.fc(x, 24)
            h = fluid.layers.batch_norm(h, act="relu")
            h = fluid.layers.reshape(h, [-1, 6, 2, 2])
            h = fluid.layers.conv2d(h, num_filters=4, filter_size=1, bias_attr=False)
            h = fluid.layers.batch_norm(h, act="relu")
        elif model == "embedding":
            ids = fluid.layers.cast(fluid.layers.abs(x[:, :3]) * 5, "int64")
            emb = fluid.layers.embedding(fluid.layers.reshape(ids, [-1, 3, 1]), size=[20, 6],
                                         is_sparse=True, dtype=dtype)
            h = fluid.layers.fc(fluid.layers.reshape(emb, [-1, 18]), 12, act="relu")
        logits = fluid.layers.fc(h, 4)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        optimizer(opt).minimize(loss)
    return main, startup, loss


def batches(dtype="float64", steps=STEPS):
    rng = np.random.default_rng(3)
    return [{"x": rng.standard_normal((BATCH, 16)).astype(dtype),
             "y": rng.integers(0, 4, size=(BATCH, 1))} for _ in range(steps)]


def compiled(main, loss, fields=(), places=1, mode="AllReduce", share=None):
    strategy = BuildStrategy()
    for f in fields:
        setattr(strategy, f, True)
    strategy.reduce_strategy = getattr(BuildStrategy.ReduceStrategy, mode)
    return fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, share_vars_from=share,
        places=[fluid.CPUPlace()] * places)


def state(scope, main) -> dict:
    """Every persistable the optimizer and the model keep (parameters, moments, powers)."""
    return {v.name: np.array(scope.find_var(v.name).get_tensor())
            for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None
            and scope.find_var(v.name).is_initialized()}


def train(fields=(), model="mlp", opt="adam", places=1, mode="AllReduce", dtype="float64",
          steps=STEPS):
    main, startup, loss = build(model, opt, dtype)
    prog = compiled(main, loss, fields, places, mode)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    losses = [exe.run(prog, feed=f, fetch_list=[loss], scope=scope)[0]
              for f in batches(dtype, steps)]
    return losses, state(scope, main), prog


def op_types(prog) -> list[str]:
    return [op.type for op in prog.data_parallel_program.global_block().ops]


def assert_bitwise(got, want):
    (got_losses, got_state, _), (want_losses, want_state, _) = got, want
    for g, w in zip(got_losses, want_losses, strict=True):
        np.testing.assert_array_equal(g, w)
    assert set(got_state) == set(want_state)
    for name, value in want_state.items():
        np.testing.assert_array_equal(got_state[name], value, err_msg=name)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no field of these warns any more
        yield


# -- each pass: the same numbers, the fused ops present ------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fuse_elewise_add_act_trains_bitwise_as_unfused(dtype):
    fused = train(["fuse_elewise_add_act_ops"], dtype=dtype)
    assert_bitwise(fused, train(dtype=dtype))
    types = op_types(fused[2])
    # relu(fc), tanh(fc), h + sigmoid(fc), scale(h + fc): four pairs, each with its gradient
    assert types.count("fused_elemwise_activation") == 4
    assert types.count("fused_elemwise_activation_grad") == 4
    assert not {"relu", "tanh", "sigmoid", "relu_grad", "tanh_grad", "sigmoid_grad"} & set(types)
    functors = sorted(tuple(op.attrs["functor_list"]) for op in
                      fused[2].data_parallel_program.global_block().ops
                      if op.type == "fused_elemwise_activation")
    assert functors == [("elementwise_add", "sigmoid"), ("relu", "elementwise_add"),
                        ("scale", "elementwise_add"), ("tanh", "elementwise_add")]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fuse_bn_act_trains_bitwise_as_unfused(dtype):
    fused = train(["fuse_bn_act_ops"], model="bn", dtype=dtype)
    assert_bitwise(fused, train(model="bn", dtype=dtype))
    types = op_types(fused[2])
    assert types.count("fused_batch_norm_act") == 2
    assert types.count("fused_batch_norm_act_grad") == 2
    assert "batch_norm" not in types and "relu" not in types


@pytest.mark.parametrize("opt, fused_type", [("sgd", "fused_sgd"),
                                             ("momentum", "fused_momentum"),
                                             ("adam", "fused_adam"),
                                             ("adam_clip", "fused_adam")])
def test_fuse_all_optimizer_ops_trains_bitwise_as_unfused(opt, fused_type):
    fused = train(["fuse_all_optimizer_ops"], opt=opt)
    assert_bitwise(fused, train(opt=opt))
    types = op_types(fused[2])
    plain = fused_type.removeprefix("fused_")
    assert types.count(fused_type) == 1 and plain not in types


def test_all_three_passes_together_train_bitwise_as_unfused():
    for model in ("mlp", "bn"):
        assert_bitwise(train(FIELDS, model=model), train(model=model))


def test_fields_act_and_never_warn():
    decisions = field_decisions(BuildStrategy)
    for name in FIELDS:
        assert decisions[name].startswith("acts: passes"), decisions[name]
    strategy = BuildStrategy()
    for name in FIELDS:
        setattr(strategy, name, True)
    forget_warnings()
    assert warn_unacted(strategy) == []


# -- data parallel: two places, AllReduce and Reduce ---------------------------------------

@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
@pytest.mark.parametrize("model, opt", [("mlp", "adam"), ("bn", "momentum"), ("mlp", "sgd"),
                                        ("mlp", "adam_clip")])
def test_fusion_composes_with_data_parallel(mode, model, opt):
    fused = train(FIELDS, model=model, opt=opt, places=2, mode=mode)
    assert_bitwise(fused, train(model=model, opt=opt, places=2, mode=mode))
    types = op_types(fused[2])
    plain = {"adam": "adam", "adam_clip": "adam", "sgd": "sgd", "momentum": "momentum"}[opt]
    assert f"fused_{plain}" in types
    if mode == "AllReduce":
        assert plain not in types
    else:  # each owner's updates fused apart (an owner of one piece keeps its plain update)
        ops = fused[2].data_parallel_program.global_block().ops
        owners = [op.owner for op in ops if op.type in (plain, f"fused_{plain}")]
        assert sorted(owners) == [0, 1]


# -- checkpoints ---------------------------------------------------------------------------

@pytest.mark.parametrize("places, mode", [(1, "AllReduce"), (2, "Reduce")])
def test_a_fused_run_saves_and_loads_as_an_unfused_run(tmp_path, places, mode):
    """Two fused steps, saved; a fresh scope loads them and trains two more steps, fused and
    unfused: both end bitwise where four unfused steps end."""
    feeds = batches()
    main, startup, loss = build("mlp", "adam")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    first = compiled(main, loss, FIELDS, places, mode)
    for f in feeds[:2]:
        exe.run(first, feed=f, scope=scope)
    with fluid.scope_guard(scope):  # Reduce mode: the CompiledProgram gathers the moments
        fluid.io.save_persistables(exe, str(tmp_path),
                                   main_program=first if mode == "Reduce" else main)
    want = train(places=places, mode=mode)[1]
    for fields in (FIELDS, ()):
        again = fluid.Scope()
        exe.run(startup, scope=again)
        with fluid.scope_guard(again):
            fluid.io.load_persistables(exe, str(tmp_path), main_program=main)
        prog = compiled(main, loss, fields, places, mode)
        for f in feeds[2:]:
            exe.run(prog, feed=f, scope=again)
        got = state(again, main)
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{fields} {name}")


def test_parameters_stay_variables_of_their_own_names():
    """After fused updates each parameter and moment is fetched, read from the scope, set and
    read again by its name; a value set in the scope is the one the next step updates."""
    main, startup, loss = build("mlp", "adam")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = compiled(main, loss, ["fuse_all_optimizer_ops"])
    feeds = batches()
    exe.run(prog, feed=feeds[0], scope=scope)
    names = [p.name for p in main.all_parameters()]
    fetched = exe.run(prog, feed=feeds[1], fetch_list=names, scope=scope)
    for name, value in zip(names, fetched):
        held = scope.find_var(name).get_tensor()
        np.testing.assert_array_equal(np.array(held), value)
    w = names[0]
    scope.find_var(w).get_tensor().set(np.zeros_like(fetched[0]))
    exe.run(prog, feed=feeds[2], scope=scope)
    plain_main, plain_startup, plain_loss = build("mlp", "adam")
    plain_scope = fluid.Scope()
    exe.run(plain_startup, scope=plain_scope)
    plain = compiled(plain_main, plain_loss)
    for f in feeds[:2]:
        exe.run(plain, feed=f, scope=plain_scope)
    plain_scope.find_var(w).get_tensor().set(np.zeros_like(fetched[0]))
    exe.run(plain, feed=feeds[2], scope=plain_scope)
    for name, value in state(plain_scope, plain_main).items():
        np.testing.assert_array_equal(np.array(scope.find_var(name).get_tensor()), value,
                                      err_msg=name)


# -- what the passes leave alone -----------------------------------------------------------

def test_a_sparse_gradient_keeps_its_own_update():
    fused = train(["fuse_all_optimizer_ops"], model="embedding", opt="adam")
    assert_bitwise(fused, train(model="embedding", opt="adam"))
    types = op_types(fused[2])
    assert types.count("adam") == 1 and types.count("fused_adam") == 1  # the table's: its own


def test_sync_batch_norm_is_not_fused():
    """sync_batch_norm's statistics cross places: fusing it into a plain batch norm would
    change them, so the bn+act pass, running after it, leaves it."""
    main, startup, loss = build("bn", "sgd")
    strategy = BuildStrategy()
    strategy.sync_batch_norm = strategy.fuse_bn_act_ops = True
    prog = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * 2)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    exe.run(prog, feed=batches()[0], scope=scope)
    types = op_types(prog)
    assert types.count("sync_batch_norm") == 2 and "fused_batch_norm_act" not in types


def test_a_fused_pairs_intermediate_is_gone_unless_read():
    """relu(fc)'s pre-activation is read by nothing else: it is no longer in the compiled
    program, and fetching it says so by name. A pre-activation another op reads is kept."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 16], "float64")
        pre = fluid.layers.fc(x, 8)
        h = fluid.layers.relu(pre)
        kept = fluid.layers.fc(x, 8)
        h2 = fluid.layers.tanh(kept) + kept  # kept is read twice
        loss = fluid.layers.mean(h + h2)
        fluid.optimizer.SGD(0.1).minimize(loss)
    prog = compiled(main, loss, ["fuse_elewise_add_act_ops"])
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    exe.run(prog, feed={"x": batches()[0]["x"]}, scope=scope)
    ops = prog.data_parallel_program.global_block().ops
    fused = [op for op in ops if op.type == "fused_elemwise_activation"]
    assert [op.attrs["save_intermediate_out"] for op in fused] == [False, True]
    assert fused[1].output("IntermediateOut") == [kept.name]
    with pytest.raises(NotFoundError, match=pre.name):
        exe.run(prog, feed={"x": batches()[0]["x"]}, fetch_list=[pre.name], scope=scope)
    got = exe.run(prog, feed={"x": batches()[0]["x"]}, fetch_list=[kept.name], scope=scope)
    assert got[0].shape == (BATCH, 8)


@pytest.mark.parametrize("model", ["mlp", "bn"])
def test_a_test_clone_shares_the_trained_variables(model):
    main, startup, loss = build(model, "adam")
    test = main.clone(for_test=True)
    train_prog = compiled(main, loss, FIELDS)
    test_prog = compiled(test, loss, FIELDS, share=train_prog)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    exe.run(train_prog, feed=batches()[0], scope=scope)
    (fused_loss,) = exe.run(test_prog, feed=batches()[1], fetch_list=[loss], scope=scope)
    (plain_loss,) = exe.run(test, feed=batches()[1], fetch_list=[loss], scope=scope)
    np.testing.assert_array_equal(fused_loss, plain_loss)
    types = op_types(test_prog)
    assert "fused_batch_norm_act" not in types  # test-mode batch norm
    assert types.count("fused_elemwise_activation") == (4 if model == "mlp" else 0)
    assert not any(t.endswith("_grad") for t in types)


def _run_plain(program, feed, fetch):
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    for name, value in feed.items():
        scope.var(name).get_tensor().set(value)
    return exe.run(program, feed={}, fetch_list=fetch, scope=scope), scope


def test_an_update_read_before_the_last_one_keeps_its_place():
    """An op between two updates reads the first's new parameter: that update cannot move
    to the fused op's place (the op would read the old value), so only the others fuse."""
    from spmd.core.operator import OpRole
    from spmd.passes.fuse_optimizer import fuse_optimizer_ops

    program = fluid.Program()
    block = program.global_block()
    rng = np.random.default_rng(1)
    values = {}
    for name in ("p1", "p2", "p3", "g1", "g2", "g3"):
        block.create_var(name=name, shape=(3, 2), dtype="float64", persistable=True)
        values[name] = rng.standard_normal((3, 2))
    block.create_var(name="lr", shape=(1,), dtype="float64", persistable=True)
    values["lr"] = np.array([0.1])
    block.create_var(name="seen", shape=(3, 2), dtype="float64", persistable=True)

    def sgd(k):
        block.append_op("sgd", {"Param": f"p{k}", "Grad": f"g{k}", "LearningRate": "lr"},
                        {"ParamOut": f"p{k}"}, role=OpRole.OPTIMIZE)

    sgd(1)
    block.append_op("scale", {"X": "p1"}, {"Out": "seen"}, {"scale": 2.0}, role=OpRole.OPTIMIZE)
    sgd(2)
    sgd(3)
    fetch = ["p1", "p2", "p3", "seen"]
    want, _ = _run_plain(program, values, fetch)
    fused = program.clone()
    assert fuse_optimizer_ops(fused) == 1
    ops = fused.global_block().ops
    assert [op.type for op in ops] == ["sgd", "scale", "fused_sgd"]
    assert ops[2].input("Param") == ["p2", "p3"]
    got, _ = _run_plain(fused, values, fetch)
    for g, w, name in zip(got, want, fetch):
        np.testing.assert_array_equal(g, w, err_msg=name)


def test_a_pair_whose_intermediate_is_read_in_between_is_not_fused():
    from spmd.passes.fuse_elewise_add_act import fuse_elewise_add_act

    program = fluid.Program()
    block = program.global_block()
    for name in ("x", "y"):
        block.create_var(name=name, shape=(2, 3), dtype="float64", persistable=True)
    block.append_op("elementwise_add", {"X": "x", "Y": "y"}, {"Out": "t"})
    block.append_op("exp", {"X": "t"}, {"Out": "u"})  # reads t before relu does
    block.append_op("relu", {"X": "t"}, {"Out": "o"})
    block.append_op("elementwise_add", {"X": "x", "Y": "y"}, {"Out": "t2"})
    block.append_op("tanh", {"X": "t2"}, {"Out": "o2"})
    values = {"x": np.linspace(-1, 1, 6).reshape(2, 3), "y": np.full((2, 3), 0.1)}
    want, _ = _run_plain(program, values, ["u", "o", "o2"])
    fused = program.clone()
    assert fuse_elewise_add_act(fused) == 1  # tanh(x + y) only
    assert [op.type for op in fused.global_block().ops] == [
        "elementwise_add", "exp", "relu", "fused_elemwise_activation"]
    got, _ = _run_plain(fused, values, ["u", "o", "o2"])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# -- one place: CompiledProgram(program, build_strategy) without with_data_parallel ---------

@pytest.mark.parametrize("model, opt", [("mlp", "adam"), ("bn", "momentum")])
def test_a_one_place_compiled_program_runs_the_fusions(model, opt):
    """As fluid, whose one-place compile runs the build strategy's passes too: the fused ops
    in the program it runs, and the same numbers as the plain program."""

    def run(strategy):
        main, startup, loss = build(model, opt)
        prog = main if strategy is None else fluid.CompiledProgram(main, strategy)
        scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
        exe.run(startup, scope=scope)
        losses = [exe.run(prog, feed=f, fetch_list=[loss], scope=scope)[0] for f in batches()]
        return losses, state(scope, main), prog

    strategy = BuildStrategy()
    for name in FIELDS:
        setattr(strategy, name, True)
    fused, plain = run(strategy), run(None)
    assert_bitwise(fused, plain)
    types = [op.type for op in fused[2].one_place_program().global_block().ops]
    assert any(t.startswith("fused_") for t in types), types
    assert types.count(opt) <= 1  # one update over the fused buffer (or none left unfused)
    assert fluid.CompiledProgram(plain[2]).one_place_program() is plain[2]  # nothing asked


def test_one_place_fields_are_the_one_place_passes_fields():
    from spmd.executor.compiled import ONE_PLACE_FIELDS
    from spmd.passes.registry import PASSES

    served = {f for p in PASSES.passes() if p.one_place for f in p.fields}
    assert served == set(ONE_PLACE_FIELDS)
