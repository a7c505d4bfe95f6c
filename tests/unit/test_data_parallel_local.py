"""Data parallelism over several places of one process (no mpiexec): feed splitting, fetch
merging, equivalence with one place on the whole batch, share_vars_from, ParallelExecutor,
strategy checking, misuse errors and Reduce mode's optimizer state: on its owner only, a cut
parameter's cut from the state the startup program made."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.operator import OpRole
from spmd.errors import FeedError, InvalidArgumentError, PreconditionError, SpmdError
from spmd.executor.feed import merge_fetches, split_feed

BATCH = 12  # divisible by 1, 2, 3 and 4 places
STEPS = 3


def build(opt: str = "sgd", clip=True, decay: bool = True):
    """(main, startup, loss, pred): a float64 MLP regressing y from x, with L2 decay and (by
    default) global-norm clipping; `clip` may also be a clip object to use instead."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 6], "float64")
        y = fluid.data("y", [None, 1], "float64")
        h = fluid.layers.fc(x, 10, act="tanh")
        h = fluid.layers.fc(h, 5, act="tanh")
        pred = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        kwargs = {"regularization": fluid.regularizer.L2Decay(1e-3)} if decay else {}
        if clip is True:
            kwargs["grad_clip"] = fluid.clip.GradientClipByGlobalNorm(clip_norm=1.0)
        elif clip:
            kwargs["grad_clip"] = clip
        if opt == "sgd":
            optimizer = fluid.optimizer.SGD(0.1, **kwargs)
        else:
            optimizer = fluid.optimizer.Adam(0.01, **kwargs)
        optimizer.minimize(loss)
    return main, startup, loss, pred


def batches(steps: int = STEPS, n: int = BATCH):
    rng = np.random.default_rng(5)
    return [{"x": rng.standard_normal((n, 6)), "y": rng.standard_normal((n, 1))}
            for _ in range(steps)]


def started(startup) -> fluid.Scope:
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    return scope


def copy_scope(scope: fluid.Scope) -> fluid.Scope:
    out = fluid.Scope()
    for name in scope.local_var_names():
        out.var(name).get_tensor().set(np.array(scope.find_var(name).get_tensor()))
    return out


def params(scope, program) -> dict:
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in program.all_parameters()}


def places(k: int):
    return [fluid.CPUPlace()] * k


def strategy(mode: str = "AllReduce", fuse: bool = False) -> fluid.BuildStrategy:
    bs = fluid.BuildStrategy()
    bs.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    bs.fuse_all_reduce_ops = fuse
    bs.fuse_broadcast_ops = fuse
    return bs


def forward(values: dict, x):
    """The model's prediction computed with numpy from the parameter values."""
    h = np.tanh(x @ values["fc_0.w_0"] + values["fc_0.b_0"])
    h = np.tanh(h @ values["fc_1.w_0"] + values["fc_1.b_0"])
    return h @ values["fc_2.w_0"] + values["fc_2.b_0"]


# -- split_feed --------------------------------------------------------------------------------
def test_split_feed_gives_the_remainder_to_the_later_places():
    x = np.arange(7 * 2).reshape(7, 2)
    y = np.arange(7)
    shards = split_feed({"x": x, "y": y}, 3)
    assert [len(s["x"]) for s in shards] == [2, 2, 3]
    assert [len(s["y"]) for s in shards] == [2, 2, 3]
    np.testing.assert_array_equal(np.concatenate([s["x"] for s in shards]), x)
    np.testing.assert_array_equal(np.concatenate([s["y"] for s in shards]), y)
    assert [len(s["x"]) for s in split_feed({"x": np.zeros((10, 1))}, 4)] == [2, 2, 3, 3]
    assert [len(s["x"]) for s in split_feed({"x": np.zeros((8, 1))}, 4)] == [2, 2, 2, 2]


def test_split_feed_uses_a_list_of_per_place_dicts_as_it_is():
    feeds = [{"x": np.zeros((3, 2))}, {"x": np.ones((5, 2))}]
    shards = split_feed(feeds, 2)
    assert [s["x"].shape for s in shards] == [(3, 2), (5, 2)]
    assert shards[1]["x"] is feeds[1]["x"]


def test_split_feed_errors_name_both_counts():
    with pytest.raises(FeedError, match=r"3 place\(s\), got 2 dict\(s\)"):
        split_feed([{"x": np.zeros((2, 1))}] * 2, 3)
    with pytest.raises(FeedError, match=r"'x' has a batch of 2 but there are 3 places"):
        split_feed({"x": np.zeros((2, 1))}, 3)


def test_executor_list_feed_of_the_wrong_length_is_a_feed_error():
    main, startup, loss, _ = build()
    scope = started(startup)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              places=places(3))
    feed = batches(1)[0]
    with pytest.raises(FeedError, match=r"3 place\(s\), got 2 dict\(s\)"):
        fluid.Executor(fluid.CPUPlace()).run(compiled, feed=[feed, feed], fetch_list=[loss],
                                             scope=scope)
    with pytest.raises(FeedError, match=r"batch of 2 but there are 3 places"):
        fluid.Executor(fluid.CPUPlace()).run(
            compiled, feed={k: v[:2] for k, v in feed.items()}, fetch_list=[loss], scope=scope)


def test_executor_list_of_one_dict_for_two_places_is_a_feed_error():
    main, startup, loss, _ = build()
    scope = started(startup)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              places=places(2))
    with pytest.raises(FeedError, match=r"2 place\(s\), got 1 dict\(s\)"):
        fluid.Executor(fluid.CPUPlace()).run(compiled, feed=[batches(1)[0]], fetch_list=[loss],
                                             scope=scope)


def test_variable_feed_keys_work_as_in_a_plain_run():
    main, startup, loss, _ = build()
    scope = started(startup)
    block = main.global_block()
    feed = batches(1)[0]
    by_var = {block.var(name): value for name, value in feed.items()}
    (plain,) = fluid.Executor(fluid.CPUPlace()).run(main.clone(for_test=True), feed=by_var,
                                                    fetch_list=[loss], scope=scope)
    compiled = fluid.CompiledProgram(main.clone(for_test=True)).with_data_parallel(
        places=places(2))
    (per_place,) = fluid.Executor(fluid.CPUPlace()).run(compiled, feed=by_var,
                                                        fetch_list=[loss], scope=scope)
    assert float(np.mean(per_place)) == pytest.approx(float(plain[0]), rel=1e-12)


# -- fetching ----------------------------------------------------------------------------------
def test_fetches_are_concatenated_over_places():
    main, startup, loss, pred = build()
    scope = started(startup)
    initial = params(scope, main)
    feed = batches(1, n=7)[0]
    exe = fluid.Executor(fluid.CPUPlace())
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              places=places(3))
    losses, preds = exe.run(compiled, feed=feed, fetch_list=[loss, pred], scope=scope)
    assert losses.shape == (3,)
    assert preds.shape == (7, 1)
    want = forward(initial, feed["x"])  # fetched before the update
    np.testing.assert_allclose(preds, want, rtol=1e-12)
    bounds = [(0, 2), (2, 4), (4, 7)]
    np.testing.assert_allclose(
        losses, [np.mean((want[a:b] - feed["y"][a:b]) ** 2) for a, b in bounds], rtol=1e-12)

    per_loss, per_pred = exe.run(compiled, feed=feed, fetch_list=[loss, pred], scope=scope,
                                 return_merged=False)
    assert [v.shape for v in per_loss] == [(1,)] * 3
    assert [v.shape for v in per_pred] == [(2, 1), (2, 1), (3, 1)]


def test_a_list_feed_is_fed_unsplit_one_dict_per_place():
    main, startup, loss, pred = build()
    scope = started(startup)
    initial = params(scope, main)
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((n, 6)), "y": rng.standard_normal((n, 1))}
             for n in (3, 5)]
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              places=places(2))
    per_loss, per_pred = fluid.Executor(fluid.CPUPlace()).run(
        compiled, feed=feeds, fetch_list=[loss, pred], scope=scope, return_merged=False)
    assert [v.shape for v in per_pred] == [(3, 1), (5, 1)]
    for feed, got_loss, got_pred in zip(feeds, per_loss, per_pred):
        want = forward(initial, feed["x"])
        np.testing.assert_allclose(got_pred, want, rtol=1e-12)
        np.testing.assert_allclose(got_loss, [np.mean((want - feed["y"]) ** 2)], rtol=1e-12)


def test_merge_fetches_stacks_scalars_and_concatenates_the_rest():
    per_place = [[np.float64(1.0), np.zeros((2, 3))], [np.float64(2.0), np.ones((1, 3))]]
    scalars, rows = merge_fetches(per_place, merged=True)
    np.testing.assert_array_equal(scalars, [1.0, 2.0])
    assert rows.shape == (3, 3) and rows[2].tolist() == [1, 1, 1]
    lists = merge_fetches(per_place, merged=False)
    assert [len(v) for v in lists] == [2, 2] and lists[1][1] is per_place[1][1]


# -- k places == 1 place on the whole batch ----------------------------------------------------
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("mode,fuse", [("AllReduce", False), ("AllReduce", True),
                                       ("Reduce", False), ("Reduce", True)])
def test_k_places_equal_one_place_on_the_whole_batch(mode, fuse, opt, k):
    data = batches()
    # clipping (and Adam) would hide a wrongly scaled gradient: SGD runs without it
    main, startup, loss, _ = build(opt, clip=opt == "adam")
    ref_scope = started(startup)
    dp_scope = copy_scope(ref_scope)
    initial = params(ref_scope, main)
    exe = fluid.Executor(fluid.CPUPlace())
    ref_losses = []
    for feed in data:
        (value,) = exe.run(main, feed=feed, fetch_list=[loss], scope=ref_scope)
        ref_losses.append(float(value[0]))

    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy(mode, fuse), places=places(k))
    for feed, ref_loss in zip(data, ref_losses):
        (losses,) = exe.run(compiled, feed=feed, fetch_list=[loss], scope=dp_scope)
        assert losses.shape == (k,)
        # equal shards: the mean of the per-place losses is the whole batch's loss
        assert float(np.mean(losses)) == pytest.approx(ref_loss, rel=1e-10)
    want, got = params(ref_scope, main), params(dp_scope, main)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-12, err_msg=name)
        assert not np.array_equal(got[name], initial[name]), f"{name} was not trained"
    assert len(compiled.place_scopes) == k and compiled.place_scopes[0] is dp_scope
    if mode == "Reduce":  # parameters cut into pieces: those are checked too
        shards = compiled.state_sharding.shards
        cut = {p for p, pieces in shards.items() if pieces[0].cut}
        if fuse:  # flat sections (passes/reduce_flat.py): pieces of flattened parameters
            assert cut and all(s.flat is not None for p in cut for s in shards[p])
        else:  # the large weights, by rows
            assert cut == {"fc_0.w_0", "fc_1.w_0"}
    else:
        assert compiled.state_sharding is None
    for scope in compiled.place_scopes[1:]:
        for name, value in params(scope, main).items():
            np.testing.assert_array_equal(value, got[name], err_msg=name)


@pytest.mark.parametrize("fuse", [False, True])
def test_every_place_fetches_the_whole_batch_gradient(fuse):
    data = batches(2)
    main, startup, loss, _ = build("sgd", clip=False)
    ref_scope = started(startup)
    dp_scope = copy_scope(ref_scope)
    exe = fluid.Executor(fluid.CPUPlace())
    grads = [main.grad_var_map[p.name] for p in main.all_parameters()]
    want = [exe.run(main, feed=feed, fetch_list=grads, scope=ref_scope) for feed in data]
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy("AllReduce", fuse), places=places(2))
    got = [exe.run(compiled, feed=feed, fetch_list=grads, scope=dp_scope, return_merged=False)
           for feed in data]
    # checked after both steps: a fetched gradient is a copy, not a view of a reused bucket
    for step_got, step_want in zip(got, want):
        for name, per_place, value in zip(grads, step_got, step_want):
            assert len(per_place) == 2
            for v in per_place:
                np.testing.assert_allclose(v, value, rtol=1e-10, atol=1e-14, err_msg=name)


def test_customized_scale_trains_with_a_fed_loss_gradient():
    data = batches()
    main, startup, loss, _ = build("sgd", clip=False)
    ref_scope = started(startup)
    dp_scope = copy_scope(ref_scope)
    exe = fluid.Executor(fluid.CPUPlace())
    for feed in data:
        exe.run(main, feed=feed, fetch_list=[loss], scope=ref_scope)
    bs = strategy()
    bs.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.Customized
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=bs, places=places(2))
    grad = main.grad_var_map[loss.name]
    for feed in data:
        shards = split_feed(feed, 2)
        for shard in shards:
            shard[grad] = np.full(1, 0.5)  # what CoeffNumDevice would seed on 2 places
        exe.run(compiled, feed=shards, fetch_list=[loss], scope=dp_scope)
    for name, value in params(ref_scope, main).items():
        np.testing.assert_allclose(params(dp_scope, main)[name], value, rtol=1e-10,
                                   atol=1e-12, err_msg=name)


# -- share_vars_from ---------------------------------------------------------------------------
def test_share_vars_from_needs_the_training_program_to_run_first():
    main, startup, loss, _ = build()
    test_program = main.clone(for_test=True)
    scope = started(startup)
    exe = fluid.Executor(fluid.CPUPlace())
    train = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                           places=places(2))
    test = fluid.CompiledProgram(test_program).with_data_parallel(share_vars_from=train,
                                                                  places=places(2))
    feed = batches(1)[0]
    with pytest.raises(PreconditionError, match="run the training program"):
        exe.run(test, feed=feed, fetch_list=[loss.name], scope=scope)

    for step in batches(2):
        exe.run(train, feed=step, fetch_list=[loss], scope=scope)
    current = params(scope, main)
    (got,) = exe.run(test, feed=feed, fetch_list=[loss.name], scope=scope)
    assert all(a is b for a, b in zip(test.place_scopes, train.place_scopes))  # shared
    pred = forward(current, feed["x"])
    half = BATCH // 2
    want = [np.mean((pred[:half] - feed["y"][:half]) ** 2),
            np.mean((pred[half:] - feed["y"][half:]) ** 2)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the test program does not train
    assert all(np.array_equal(v, current[n]) for n, v in params(scope, main).items())


def test_share_vars_from_with_a_different_number_of_places_is_a_clear_error():
    main, startup, loss, _ = build()
    scope = started(startup)
    exe = fluid.Executor(fluid.CPUPlace())
    train = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                           places=places(2))
    test = fluid.CompiledProgram(main.clone(for_test=True)).with_data_parallel(
        share_vars_from=train, places=places(3))
    feed = batches(1)[0]
    exe.run(train, feed=feed, fetch_list=[loss], scope=scope)
    with pytest.raises(SpmdError, match=r"share_vars_from.*\b3\b.*\b2\b|"
                                        r"share_vars_from.*\b2\b.*\b3\b"):
        exe.run(test, feed=feed, fetch_list=[loss], scope=scope)


def test_share_vars_from_a_program_that_is_not_data_parallel_says_so():
    main, startup, loss, _ = build()
    scope = started(startup)
    exe = fluid.Executor(fluid.CPUPlace())
    train = fluid.CompiledProgram(main)
    exe.run(train, feed=batches(1)[0], fetch_list=[loss], scope=scope)
    with pytest.raises(InvalidArgumentError, match="with_data_parallel|data.parallel"):
        test = fluid.CompiledProgram(main.clone(for_test=True)).with_data_parallel(
            share_vars_from=train, places=places(2))
        exe.run(test, feed=batches(1)[0], fetch_list=[loss], scope=scope)


# -- ParallelExecutor --------------------------------------------------------------------------
def test_parallel_executor_runs_on_cpu_num_places(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    data = batches(2)
    main, startup, loss, _ = build("sgd", clip=False)
    ref_scope = started(startup)
    scope = copy_scope(ref_scope)
    exe = fluid.Executor(fluid.CPUPlace())
    for feed in data:
        exe.run(main, feed=feed, fetch_list=[loss], scope=ref_scope)

    pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main,
                                scope=scope)
    assert pe.device_count == 2
    (first,) = pe.run([loss.name], feed=data[0])
    (second,) = pe.run(fetch_list=[loss.name], feed_dict=data[1])
    assert first.shape == second.shape == (2,)
    for name, value in params(ref_scope, main).items():
        np.testing.assert_allclose(params(scope, main)[name], value, rtol=1e-10, atol=1e-12,
                                   err_msg=name)


# -- strategies and misuse ---------------------------------------------------------------------
def test_build_strategy_rejects_unknown_fields_naming_close_matches():
    bs = fluid.BuildStrategy()
    with pytest.raises(InvalidArgumentError,
                       match=r"BuildStrategy has no field 'reduce_stratgy'.*'reduce_strategy'"):
        bs.reduce_stratgy = 1
    assert bs.reduce_strategy == fluid.BuildStrategy.ReduceStrategy.AllReduce
    es = fluid.ExecutionStrategy()
    with pytest.raises(InvalidArgumentError, match=r"'num_thread'.*'num_threads'"):
        es.num_thread = 2
    bs.fuse_all_reduce_ops = False  # a real field is accepted (True is its default)
    assert bs.fuse_all_reduce_ops is False


def test_with_data_parallel_twice_is_an_error():
    main, _, loss, _ = build()
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    with pytest.raises(PreconditionError, match="with_data_parallel was already called"):
        compiled.with_data_parallel(loss_name=loss.name)


def test_share_vars_from_must_be_a_compiled_program():
    main, _, loss, _ = build()
    with pytest.raises(InvalidArgumentError,
                       match="share_vars_from must be a CompiledProgram, got Program"):
        fluid.CompiledProgram(main.clone(for_test=True)).with_data_parallel(
            share_vars_from=main)


def test_num_trainers_must_match_the_processes():
    main, startup, loss, _ = build()
    scope = started(startup)
    bs = fluid.BuildStrategy()
    bs.num_trainers = 2
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=bs, places=places(2))
    with pytest.raises(InvalidArgumentError,
                       match=r"num_trainers=2 but 1 process\(es\).*mpirun -n 2"):
        fluid.Executor(fluid.CPUPlace()).run(compiled, feed=batches(1)[0], fetch_list=[loss],
                                             scope=scope)


def _sum_of_two_gradients():
    """An MLP whose optimize region adds two weight gradients of equal shape in a `sum`."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float64")
        y = fluid.data("y", [None, 1], "float64")
        h = fluid.layers.fc(x, 4, act="tanh", bias_attr=False)
        h = fluid.layers.fc(h, 4, act="tanh", bias_attr=False)
        pred = fluid.layers.fc(h, 1, bias_attr=False)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    block = main.global_block()
    grads = [main.grad_var_map["fc_0.w_0"], main.grad_var_map["fc_1.w_0"]]
    first = next(i for i, op in enumerate(block.ops) if op.role is OpRole.OPTIMIZE)
    with main.role_guard(OpRole.OPTIMIZE):
        block.create_var(name="both", shape=(4, 4), dtype="float64")
        block._insert_op(first, "sum", {"X": grads}, {"Out": ["both"]})
    return main, startup, loss


def test_reduce_mode_rejects_a_sum_of_two_parameters_gradients():
    """Each gradient is complete only on its owner, so the sum exists nowhere: refused when
    the program is compiled (its first run), naming the op, rather than computed wrong."""
    main, startup, loss = _sum_of_two_gradients()
    feed = batches(1, n=8)[0]
    feed["x"] = feed["x"][:, :4]
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy("Reduce"), places=places(2))
    with pytest.raises(InvalidArgumentError, match=r"Reduce mode cannot split op #\d+ 'sum' "
                                                   r"across owners: it mixes the gradients"):
        fluid.Executor(fluid.CPUPlace()).run(compiled, feed=feed, fetch_list=["both"],
                                             scope=started(startup))


def test_allreduce_mode_sum_of_gradients_matches_one_place():
    main, startup, loss = _sum_of_two_gradients()
    feed = batches(1, n=8)[0]
    feed["x"] = feed["x"][:, :4]
    scope = started(startup)
    dp_scope = copy_scope(scope)
    exe = fluid.Executor(fluid.CPUPlace())
    (want,) = exe.run(main, feed=feed, fetch_list=["both"], scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              places=places(2))
    (got,) = exe.run(compiled, feed=feed, fetch_list=["both"], scope=dp_scope,
                     return_merged=False)
    for value in got:
        np.testing.assert_allclose(value, want, rtol=1e-10)


# -- Reduce mode: optimizer state on owners only -----------------------------------------------
@pytest.mark.parametrize("k", [2, 3])
def test_reduce_mode_keeps_each_places_optimizer_state_on_its_owner(k):
    main, startup, loss, _ = build("adam")
    scope = started(startup)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy("Reduce"), places=places(k))
    exe = fluid.Executor(fluid.CPUPlace())
    for feed in batches(2):
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    layout = compiled.state_sharding  # where each piece of optimizer state lives
    block = compiled.data_parallel_program.global_block()
    assert compiled.place_ranks == list(range(k))
    assert set(layout.state_owner.values()) == set(range(k))
    assert {p for p, shards in layout.shards.items() if shards[0].rows is not None}
    all_state = set(layout.state_owner)
    dp_state = compiled.data_parallel_program.optimizer_state
    assert all_state == {s for names in dp_state.values() for s in names}
    whole_state = {s for names in main.optimizer_state.values() for s in names}
    held = []
    for rank, place_scope in zip(compiled.place_ranks, compiled.place_scopes):
        mine = {s for s, owner in layout.state_owner.items() if owner == rank}
        # exactly its own state: no other rank's, and no whole state of a cut parameter
        held.append(set(place_scope.local_var_names()) & (all_state | whole_state))
        assert held[-1] == mine
        size = 0
        for s in mine:
            value = np.array(place_scope.find_var(s).get_tensor())
            assert value.shape == tuple(block.vars[s].shape), s
            size += value.nbytes
            # the owner really updated it: two steps from the startup program's 0.9 / 0.999
            if "beta1_pow" in s:
                assert float(value[0]) == pytest.approx(0.9 ** 3, rel=1e-12)
            if "beta2_pow" in s:
                assert float(value[0]) == pytest.approx(0.999 ** 3, rel=1e-12)
        assert size == sum(int(np.prod(block.vars[s].shape)) * 8 for s in mine)
    for i in range(k):
        for j in range(i + 1, k):
            assert held[i].isdisjoint(held[j])
    assert set().union(*held) == all_state
    first = params(compiled.place_scopes[0], main)
    for place_scope in compiled.place_scopes[1:]:
        for name, value in params(place_scope, main).items():
            np.testing.assert_array_equal(value, first[name], err_msg=name)


@pytest.mark.parametrize("fuse", [False, True], ids=["rows", "flat"])
@pytest.mark.parametrize("k", [2, 3])
def test_reduce_mode_cuts_chunk_state_from_the_startup_state(k, fuse):
    """State that is not the startup program's default (as after loading a checkpoint) trains
    on k places in Reduce mode exactly as on one: each owner starts from its rows of it (its
    flat elements, fused)."""
    main, startup, loss, _ = build("adam")
    ref_scope = started(startup)
    rng = np.random.default_rng(4)
    for names in main.optimizer_state.values():
        for s in names:
            value = np.array(ref_scope.find_var(s).get_tensor())
            if "moment1" in s:
                value = 0.1 * rng.standard_normal(value.shape)
            elif "moment2" in s:
                value = rng.uniform(0.01, 0.1, value.shape)
            else:  # beta powers: as if some steps were taken already
                value = value * rng.uniform(0.3, 0.9)
            ref_scope.var(s).get_tensor().set(value)
    dp_scope = copy_scope(ref_scope)
    exe = fluid.Executor(fluid.CPUPlace())
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy("Reduce", fuse), places=places(k))
    for feed in batches():
        exe.run(main, feed=feed, fetch_list=[loss], scope=ref_scope)
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=dp_scope)
    for name, value in params(ref_scope, main).items():
        np.testing.assert_allclose(params(dp_scope, main)[name], value, rtol=1e-10,
                                   atol=1e-12, err_msg=name)
    # and every piece of state is the one place's state, or its rows of it
    layout = compiled.state_sharding  # where each piece of optimizer state lives
    assert any(rows is not None for _, rows in layout.state_source.values())
    scope_of = dict(zip(compiled.place_ranks, compiled.place_scopes))
    for var, owner in layout.state_owner.items():
        whole, rows = layout.state_source.get(var, (var, None))
        want = np.array(ref_scope.find_var(whole).get_tensor())
        if var in layout.state_flat:
            want = want.reshape(-1)[rows[0]:rows[1]]
        elif rows is not None:
            want = want[rows[0]:rows[1]]
        got = np.array(scope_of[owner].find_var(var).get_tensor())
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14, err_msg=var)


def _clipped_by_norm(clip_norm: float):
    """build("sgd") with each gradient clipped to norm `clip_norm` (clip_by_norm, per
    parameter) instead of by the global norm, and no decay."""
    main, startup, loss, _ = build("sgd", clip=fluid.clip.GradientClipByNorm(clip_norm),
                                   decay=False)
    return main, startup, loss


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_clip_by_norm_matches_one_place_or_is_rejected(mode):
    clip_norm = 0.01
    main, startup, loss = _clipped_by_norm(clip_norm)
    data = batches()
    ref_scope = started(startup)
    dp_scope = copy_scope(ref_scope)
    exe = fluid.Executor(fluid.CPUPlace())
    grads = [main.grad_var_map[name] for name in ("fc_0.w_0", "fc_1.w_0")]
    for step, feed in enumerate(data):
        values = exe.run(main, feed=feed, fetch_list=grads, scope=ref_scope)
        if step == 0:  # the clipping really bites on the weights that Reduce mode cuts
            assert all(np.linalg.norm(v) > 10 * clip_norm for v in values)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy(mode), places=places(2))
    try:
        for feed in data:
            exe.run(compiled, feed=feed, fetch_list=[loss], scope=dp_scope)
    except InvalidArgumentError as e:  # rejected, naming the op: acceptable
        assert mode == "Reduce" and "clip_by_norm" in str(e)
        return
    for name, value in params(ref_scope, main).items():
        np.testing.assert_allclose(params(dp_scope, main)[name], value, rtol=1e-10,
                                   atol=1e-12, err_msg=name)


@pytest.mark.parametrize("fuse", [False, True], ids=["rows", "flat"])
def test_parameters_taken_from_the_scope_do_not_change_under_later_steps(fuse):
    """Reduce mode hands the scope new parameter arrays each step (views of that step's
    all-gather, fused): an array a caller took from the scope (numpy.asarray: no copy) keeps
    the value it had, whatever later steps do."""
    main, startup, loss, _ = build("adam")
    scope = started(startup)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy("Reduce", fuse), places=places(2))
    exe = fluid.Executor(fluid.CPUPlace())
    steps = batches(4)
    exe.run(compiled, feed=steps[0], fetch_list=[loss], scope=scope)
    held = {p.name: np.asarray(scope.find_var(p.name).get_tensor())
            for p in main.all_parameters()}
    kept = {name: value.copy() for name, value in held.items()}
    for feed in steps[1:]:
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    for name, value in held.items():
        np.testing.assert_array_equal(value, kept[name], err_msg=name)
        assert not np.array_equal(params(scope, main)[name], kept[name]), f"{name} not trained"
