"""Regression tests for data-parallel misuse that used to give wrong numbers or raw errors:
each is now a clear error, or right."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, PreconditionError

RNG = np.random.default_rng(3)
FEED = {"x": RNG.standard_normal((8, 6)), "y": RNG.integers(0, 3, (8, 1))}


def build(minimize_twice=False, after_optimizer=False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 2
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 6], "float64")
        y = fluid.data("y", [None, 1], "int64")
        logits = fluid.layers.fc(fluid.layers.fc(x, 16, act="relu"), 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Adam(0.01).minimize(loss)
        if minimize_twice:
            loss2 = fluid.layers.mean(fluid.layers.fc(x, 1))
            fluid.optimizer.SGD(0.1).minimize(loss2)
        if after_optimizer:  # e.g. a metric of the weights, appended after minimize
            w_sum = fluid.layers.reduce_sum(main.global_block().var("fc_0.w_0"))
            main.w_sum_name = w_sum.name
    return main, startup, loss


def reduce_mode():
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    return strategy


def started(startup):
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    return scope


def compiled(main, loss=None, strategy=None, places=2):
    return fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name if loss is not None else None, build_strategy=strategy,
        places=[fluid.CPUPlace()] * places)


def test_training_without_loss_name_is_an_error():
    main, startup, _ = build()
    with pytest.raises(InvalidArgumentError, match="no loss_name was given"):
        fluid.Executor().run(compiled(main), feed=FEED, scope=started(startup))


def test_two_minimize_calls_are_an_error():
    main, startup, loss = build(minimize_twice=True)
    with pytest.raises(InvalidArgumentError, match="2 backward passes.*minimize the sum once"):
        fluid.Executor().run(compiled(main, loss), feed=FEED, scope=started(startup))


def optimizer_in_a_branch():
    """fluid 1.8's test_optimizer_in_control_flow: each branch of a case minimizes the loss."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 6], "float64")
        loss = fluid.layers.mean(fluid.layers.fc(x, 3))
        cond = fluid.layers.fill_constant([1], "bool", True)

        def minimize_with(optimizer):
            optimizer.minimize(loss)  # returns nothing, as the branches of fluid's test

        fluid.layers.case([(cond, lambda: minimize_with(fluid.optimizer.Adam(0.01)))],
                          lambda: minimize_with(fluid.optimizer.SGD(0.1)))
    return main, startup, loss


def test_an_optimizer_in_control_flow_on_several_places_is_refused_as_fluid_does():
    main, startup, loss = optimizer_in_a_branch()
    scope = started(startup)
    with pytest.raises(NotImplementedError, match="block 1 updates a parameter inside control"):
        fluid.Executor().run(compiled(main, loss), feed={"x": FEED["x"]}, scope=scope)
    # on one place it trains: the true branch's Adam moves the weights
    before = np.array(scope.find_var("fc_0.w_0").get_tensor())
    fluid.Executor().run(main, feed={"x": FEED["x"]}, scope=scope)
    assert not np.array_equal(before, np.array(scope.find_var("fc_0.w_0").get_tensor()))


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_ops_after_the_optimizer_see_the_updated_parameters(mode):
    main, startup, loss = build(after_optimizer=True)
    ref_scope = started(startup)
    want = fluid.Executor().run(main, feed=FEED, fetch_list=[main.w_sum_name],
                                scope=ref_scope)[0]
    strategy = reduce_mode() if mode == "Reduce" else None
    got = fluid.Executor().run(compiled(main, loss, strategy), feed=FEED,
                               fetch_list=[main.w_sum_name], scope=started(startup),
                               return_merged=False)[0]
    for value in got:  # every place, owner or not, chunked or not
        np.testing.assert_allclose(value, want, rtol=1e-10)


def test_a_compiled_program_keeps_the_scope_of_its_first_run():
    main, startup, loss = build()
    program, exe = compiled(main, loss), fluid.Executor()
    exe.run(program, feed=FEED, scope=started(startup))
    with pytest.raises(InvalidArgumentError, match="runs on the scope of its first run"):
        exe.run(program, feed=FEED, scope=started(startup))


def test_fetching_a_value_only_its_owner_computes_is_an_error():
    main, startup, loss = build()
    block = main.global_block()
    owner_only = next(op.output("Moment1Out")[0] for op in block.ops if op.type == "adam")
    with pytest.raises(InvalidArgumentError, match="only the owning rank computes"):
        fluid.Executor().run(compiled(main, loss, reduce_mode()), feed=FEED,
                             fetch_list=[owner_only], scope=started(startup))


def test_a_second_reduce_mode_program_on_a_placed_scope_says_why():
    main, startup, loss = build()
    scope, exe = started(startup), fluid.Executor()
    exe.run(compiled(main, loss, reduce_mode()), feed=FEED, scope=scope)
    with pytest.raises(PreconditionError, match="in this scope was already split across the ranks"):
        exe.run(compiled(main, loss, reduce_mode()), feed=FEED, scope=scope)


def test_the_fingerprint_leaves_the_random_seed_out():
    a, _, _ = build()
    b, _, _ = build()
    b.random_seed = 99  # ranks may seed their dropout differently
    assert a.fingerprint() == b.fingerprint()
