"""sgd writes over a gradient that dies at it (executor/inplace.py's Spend, KernelContext.spent):
the same bits as with no loans at all, counted by Plan.memory_report(), and never a gradient
that is fetched or that another op reads after the update."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid

PLACE = fluid.CPUPlace()
STEPS = 3


def _build(extra_reader: bool = False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 20], "float32")
        y = fluid.data("y", [None, 1], "int64")
        h = fluid.layers.fc(x, 300, act="relu")
        h = fluid.layers.fc(h, 200, act="relu")  # 300x200 = 60000 elements: two chunks
        logits = fluid.layers.fc(h, 5)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(0.1).minimize(loss)
        after = None
        if extra_reader:  # reads a gradient after its update: that gradient must stay intact
            grad = main.global_block().var("fc_1.w_0@GRAD")
            after = fluid.layers.reduce_sum(grad)
    return main, startup, loss, after


def _feeds():
    rng = np.random.default_rng(0)
    return [{"x": rng.standard_normal((16, 20)).astype("float32"),
             "y": rng.integers(0, 5, size=(16, 1)).astype("int64")} for _ in range(STEPS)]


def _train(inplace: bool, fetch_grad: bool = False, extra_reader: bool = False, places=1):
    main, startup, loss, after = _build(extra_reader)
    scope = fluid.Scope()
    exe = fluid.Executor(PLACE)
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.enable_inplace = inplace
    program = fluid.CompiledProgram(main, build_strategy=strategy)
    if places > 1:
        program = program.with_data_parallel(loss_name=loss.name, places=[PLACE] * places)
    fetch = [loss] + (["fc_1.w_0@GRAD"] if fetch_grad else []) + ([after] if after else [])
    outs = []
    for feed in _feeds():
        feed = [{k: v[i::places] for k, v in feed.items()} for i in range(places)] \
            if places > 1 else feed
        outs.append([np.array(o).tobytes() for o in exe.run(program, feed=feed,
                                                            fetch_list=fetch, scope=scope)])
    state = {p.name: np.array(scope.find_var(p.name).get_tensor()).tobytes()
             for p in main.global_block().all_parameters()}
    return outs, state, exe, main, loss


def _report(exe, main, fetch_names):
    plan = exe.plan_cache.find(main, ["x", "y"], fetch_names)
    return None if plan is None else plan.memory_report()


def test_sgd_spends_dying_gradients_bitwise_as_without_loans():
    on, state_on, exe, main, loss = _train(True)
    off, state_off, *_ = _train(False)
    assert on == off and state_on == state_off
    report = _report(exe, main, [loss.name])
    assert report.spent_last_run == 6  # three weights, three biases
    assert report.spent_total == 6 * STEPS


def test_a_fetched_gradient_is_not_spent():
    on, state_on, exe, main, loss = _train(True, fetch_grad=True)
    off, state_off, *_ = _train(False, fetch_grad=True)
    assert on == off and state_on == state_off  # the fetched gradient is the gradient
    assert _report(exe, main, [loss.name, "fc_1.w_0@GRAD"]).spent_last_run == 5


def test_a_gradient_read_after_its_update_is_not_spent():
    on, state_on, *_ = _train(True, extra_reader=True)
    off, state_off, *_ = _train(False, extra_reader=True)
    assert on == off and state_on == state_off


@pytest.mark.parametrize("places", [2])
def test_data_parallel_places_spend_alike(places):
    on, state_on, *_ = _train(True, places=places)
    off, state_off, *_ = _train(False, places=places)
    assert on == off and state_on == state_off
