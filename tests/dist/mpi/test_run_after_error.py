"""A failed run leaves a data-parallel program usable when it failed before any collective of
the step began: a feed error (checked before any op runs) or an op failing in the forward pass.
The parameters stay as they were and the next good run works, when every rank fails once or
only the last rank does (the others then wait in the step's first collective, which the last
rank's corrected run joins). Either way the parameters end equal to one process trained on the
whole batches, without the bad one. A run that fails after its collectives began cannot be
retried: the program says so on its next run."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import batches, build, params, shard

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.errors import FeedError, NumericError, PreconditionError

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 3


def _train_whole_batches(main, startup, loss, size: int):
    """One process on the rows the ranks' shards hold together."""
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for x, y in batches("float64", STEPS):
        rows = len(x) // size * size
        exe.run(main, feed={"x": x[:rows], "y": y[:rows]}, fetch_list=[loss], scope=scope)
    return params(scope, main)


def _assert_params(got: dict, want: dict):
    for name, value in got.items():
        np.testing.assert_allclose(value, want[name], rtol=1e-10, atol=1e-12, err_msg=name)


def _bad_feed(bad: str, feed: dict) -> dict:
    x, y = feed["x"], feed["y"]
    if bad == "nan":
        x = x.copy()
        x[0, 0] = np.nan
    return {"dtype": {"x": x.astype("float32"), "y": y},
            "shape": {"x": x[:, :3], "y": y},
            "empty": {"x": x[:0], "y": y[:0]},
            "missing": {"x": x},
            "nan": {"x": x, "y": y}}[bad]


@pytest.mark.parametrize("who", ["every-rank", "last-rank"])
@pytest.mark.parametrize("bad", ["dtype", "shape", "empty", "missing", "nan"])
def test_a_bad_feed_then_training_goes_on(who, bad, monkeypatch):
    if bad == "nan":
        monkeypatch.setenv("FLAGS_check_nan_inf", "1")  # read when the program compiles
    t = detect()
    main, startup, loss = build("mlp", "sgd", "float64")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    feeds_bad = who == "every-rank" or t.rank == t.size - 1
    for step, (x, y) in enumerate(batches("float64", STEPS)):
        feed = {"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)}
        if step == 1 and feeds_bad:
            before = params(scope, main)
            with pytest.raises(FeedError, match=f"(?s)\\[rank {t.rank}/{t.size}\\] .*feed"):
                exe.run(compiled, feed=_bad_feed(bad, feed), fetch_list=[loss], scope=scope)
            _assert_params(params(scope, main), before)
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    _assert_params(params(scope, main), _train_whole_batches(main, startup, loss, t.size))


def _build_with_hook(failing: dict):
    """dp_models' MLP with a host op in the forward pass that raises while failing['now']."""
    def maybe_fail(h):
        if failing["now"]:
            raise ValueError("a forward op failed on purpose")
        return np.array(h)

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 64], "float64")
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 16, act="tanh")
        out = main.current_block().create_var(name="h_copy", shape=h.shape, dtype=h.dtype)
        fluid.layers.py_func(maybe_fail, h, out)
        logits = fluid.layers.fc(fluid.layers.elementwise_add(h, out), 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


@pytest.mark.parametrize("places", [1, 2], ids=["1-place", "2-places"])
@pytest.mark.parametrize("who", ["every-rank", "last-rank"])
def test_an_op_failing_before_any_collective_then_training_goes_on(who, places):
    t = detect()
    failing = {"now": False}
    main, startup, loss = _build_with_hook(failing)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * places)
    for step, (x, y) in enumerate(batches("float64", STEPS)):
        feed = {"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)}
        if step == 1 and (who == "every-rank" or t.rank == t.size - 1):
            before = params(scope, main)
            failing["now"] = True
            with pytest.raises(Exception, match="a forward op failed on purpose"):
                exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
            failing["now"] = False
            _assert_params(params(scope, main), before)
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    _assert_params(params(scope, main), _train_whole_batches(main, startup, loss, t.size))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf * 0
def test_a_run_failing_after_its_collectives_began_is_not_retried(monkeypatch):
    """An infinite learning rate: the gradients are all-reduced, then FLAGS_check_nan_inf
    finds the update non-finite on every rank (no parameter is written back)."""
    monkeypatch.setenv("FLAGS_check_nan_inf", "1")
    t = detect()
    main, startup, loss = build("mlp", "sgd", "float64")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    x, y = batches("float64", 1)[0]
    feed = {"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)}
    lr_name = next(n for n in scope.local_var_names() if n.startswith("learning_rate"))
    lr = np.array(scope.find_var(lr_name).get_tensor())
    before = params(scope, main)
    scope.find_var(lr_name).get_tensor().set(np.full_like(lr, np.inf))
    with pytest.raises(NumericError, match=rf"\[rank {t.rank}/{t.size}\] FLAGS_check_nan_inf: "
                                           r"op #\d+ 'sgd' wrote"):
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    _assert_params(params(scope, main), before)
    scope.find_var(lr_name).get_tensor().set(lr)
    if t.size == 1:  # a world of one has no other rank to fall out of line with
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
        return
    with pytest.raises(PreconditionError, match=rf"\[rank {t.rank}/{t.size}\] this data-parallel "
                                                r"program cannot run any more: a step failed "
                                                r"here \(NumericError\) after its collectives "
                                                r"began"):
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
