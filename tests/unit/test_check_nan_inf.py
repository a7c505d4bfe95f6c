"""FLAGS_check_nan_inf (fluid's flag): every op's float outputs and the feeds checked, the first
NaN/Inf named by op and variable, no parameter written back; off by default. And an empty batch
is a feed error naming the variable."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import FeedError, InvalidArgumentError, NumericError

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in log:RuntimeWarning")


def _program(log_of_input: bool):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        h = fluid.layers.log(x) if log_of_input else x
        loss = fluid.layers.mean(fluid.layers.fc(h, 2, name="fc"))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def _params(scope, program):
    return {p.name: np.array(scope.get(p.name)) for p in program.all_parameters()}


@pytest.fixture
def check_on(monkeypatch):
    monkeypatch.setenv("FLAGS_check_nan_inf", "1")


def test_an_op_writing_nan_is_named_and_no_parameter_changes(check_on):
    main, startup, loss = _program(log_of_input=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    before = _params(scope, main)
    bad = np.array([[1.0, -1.0, 2.0]], dtype="float32")  # log(-1) is NaN
    with pytest.raises(NumericError, match=r"op #0 'log' wrote NaN into '[^']+' \(output Out; "
                                           r"1 of 3 values, shape \[1, 3\]\)"):
        exe.run(main, feed={"x": bad}, fetch_list=[loss], scope=scope)
    after = _params(scope, main)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name])
    # the next good run works, and changes the parameters
    exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[loss], scope=scope)
    assert any(not np.array_equal(before[n], np.array(scope.get(n))) for n in before)


def test_inf_is_named_too(check_on):
    main, startup, loss = _program(log_of_input=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(NumericError, match=r"'log' wrote Inf"):
        exe.run(main, feed={"x": np.zeros((1, 3), "float32")}, fetch_list=[loss], scope=scope)


def test_a_feed_holding_nan_is_refused_before_any_op(check_on):
    main, startup, loss = _program(log_of_input=False)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    x = np.ones((2, 3), "float32")
    x[1, 2] = np.inf
    with pytest.raises(FeedError, match=r"feed 'x' holds Inf \(1 of 6 values, shape \[2, 3\]\)"):
        exe.run(main, feed={"x": x}, fetch_list=[loss], scope=scope)


def test_off_by_default_nan_flows_through(monkeypatch):
    monkeypatch.delenv("FLAGS_check_nan_inf", raising=False)
    main, startup, loss = _program(log_of_input=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    value, = exe.run(main, feed={"x": -np.ones((1, 3), "float32")}, fetch_list=[loss],
                     scope=scope)
    assert np.isnan(value).all()


def test_set_flags_turns_it_on_for_programs_compiled_after(monkeypatch):
    monkeypatch.delenv("FLAGS_check_nan_inf", raising=False)
    fluid.set_flags({"FLAGS_check_nan_inf": True})
    try:
        assert fluid.get_flags("FLAGS_check_nan_inf")["FLAGS_check_nan_inf"] is True
        main, startup, loss = _program(log_of_input=True)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        with pytest.raises(NumericError, match="FLAGS_check_nan_inf"):
            exe.run(main, feed={"x": -np.ones((1, 3), "float32")}, fetch_list=[loss],
                    scope=scope)
    finally:
        fluid.set_flags({"FLAGS_check_nan_inf": False})


@pytest.mark.parametrize("compiled", [False, True], ids=["Executor", "CompiledProgram"])
def test_an_empty_batch_is_a_feed_error_naming_the_variable(compiled):
    main, startup, loss = _program(log_of_input=False)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    program = (fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
               if compiled else main)
    with pytest.raises(FeedError, match=r"feed 'x': the batch is empty \(0 rows"):
        exe.run(program, feed={"x": np.zeros((0, 3), "float32")}, fetch_list=[loss],
                scope=scope)
    # and the program still runs afterwards
    exe.run(program, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[loss], scope=scope)


@pytest.mark.parametrize("compiled", [False, True], ids=["Executor", "CompiledProgram"])
def test_set_flags_acts_on_a_program_already_compiled(monkeypatch, compiled):
    monkeypatch.delenv("FLAGS_check_nan_inf", raising=False)
    main, startup, loss = _program(log_of_input=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    program = (fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * 2) if compiled else main)
    bad = -np.ones((2, 3), "float32")
    value, = exe.run(program, feed={"x": bad}, fetch_list=[loss], scope=scope)  # compiled, off
    assert np.isnan(value).all()
    fluid.set_flags({"FLAGS_check_nan_inf": True})
    try:
        before = _params(scope, main)
        with pytest.raises(NumericError, match=r"op #0 'log' wrote NaN"):
            exe.run(program, feed={"x": bad}, fetch_list=[loss], scope=scope)
        for name, value in _params(scope, main).items():
            np.testing.assert_array_equal(value, before[name])
    finally:
        fluid.set_flags({"FLAGS_check_nan_inf": False})
    value, = exe.run(program, feed={"x": bad}, fetch_list=[loss], scope=scope)  # off again
    assert np.isnan(value).all()


def test_set_flags_refuses_a_value_it_cannot_read_and_keeps_the_old_one(monkeypatch):
    monkeypatch.setenv("FLAGS_check_nan_inf", "1")
    with pytest.raises(InvalidArgumentError, match=r"FLAGS_check_nan_inf='maybe' is not a "
                                                   r"boolean"):
        fluid.set_flags({"FLAGS_check_nan_inf": "maybe"})
    assert fluid.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": True}


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf * 0
def test_a_non_finite_update_is_named_at_the_optimizer_op_and_not_written_back(check_on):
    """The NaN arises in the update itself (an infinite learning rate): still nothing is
    written back to the scope."""
    main, startup, loss = _program(log_of_input=False)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    lr_name = next(n for n in scope.local_var_names() if n.startswith("learning_rate"))
    scope.find_var(lr_name).get_tensor().set(np.full((1,), np.inf, "float32"))
    before = _params(scope, main)
    with pytest.raises(NumericError, match=r"'sgd' wrote"):
        exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[loss], scope=scope)
    for name, value in _params(scope, main).items():
        np.testing.assert_array_equal(value, before[name])


def test_the_check_changes_no_number(monkeypatch):
    results = []
    for on in ("0", "1"):
        monkeypatch.setenv("FLAGS_check_nan_inf", on)
        with fluid.unique_name.guard():
            main, startup, loss = _program(log_of_input=False)
        main.random_seed = startup.random_seed = 11
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        for k in range(3):
            exe.run(main, feed={"x": np.full((2, 3), k + 1.0, "float32")}, fetch_list=[loss],
                    scope=scope)
        results.append(_params(scope, main))
    for name in results[0]:
        np.testing.assert_array_equal(results[1][name], results[0][name])
