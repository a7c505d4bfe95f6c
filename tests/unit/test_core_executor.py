"""fluid.core.Executor, driven as Paddle's test_eager_deletion_delete_vars.py drives it: the
inputs set in the scope, `run(program.desc, scope, 0, create_local_scope, create_vars,
skip_ref_cnt_vars)`; it trains as fluid.Executor does, and leaves the scope as fluid's
garbage-collecting executor does (every variable made, only persistables and the skipped
ones holding values)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid

XV = np.linspace(-1, 1, 12, dtype="float32").reshape(4, 3)
LV = np.array([[0], [1], [1], [0]], "int64")


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        label = fluid.data("label", [None, 1], "int64")
        hidden = fluid.layers.fc(x, 4, act="tanh", param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.Constant(0.3)))
        prob = fluid.layers.fc(hidden, 2, act="softmax", param_attr=fluid.ParamAttr(
            name="w2", initializer=fluid.initializer.Constant(-0.2)))
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
        fluid.optimizer.SGD(0.5).minimize(loss)
    return main, startup, x, label, loss


def _feed_into(scope, x, label):
    scope.var(x.name).get_tensor().set(XV, fluid.CPUPlace())
    scope.var(label.name).get_tensor().set(LV, fluid.CPUPlace())


def test_core_executor_trains_as_fluid_executor_and_collects_the_rest():
    main, startup, x, label, loss = _net()
    ref_scope, scope = fluid.Scope(), fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    for s in (ref_scope, scope):
        exe.run(startup, scope=s)
    place = fluid.core.Place()
    place.set_place(fluid.CPUPlace())
    core_exe = fluid.core.Executor(place)
    for _ in range(3):
        want, = exe.run(main, feed={"x": XV, "label": LV}, fetch_list=[loss], scope=ref_scope)
        _feed_into(scope, x, label)
        core_exe.run(main.desc, scope, 0, False, True, [loss.name])
        np.testing.assert_allclose(np.array(scope.find_var(loss.name).get_tensor()), want,
                                   rtol=1e-6)
    for name in ("w", "w2"):
        np.testing.assert_allclose(np.array(scope.find_var(name).get_tensor()),
                                   np.array(ref_scope.find_var(name).get_tensor()), rtol=1e-6)
    block = main.global_block()
    for name, var in block.vars.items():
        found = scope.find_var(name)
        assert found is not None, name  # create_vars: every variable made
        held = found.get_tensor()._is_initialized()
        assert held == (var.persistable or name == loss.name), name  # inputs collected too


def test_a_local_scope_takes_the_temporaries_and_goes():
    main, startup, x, label, loss = _net()
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    _feed_into(scope, x, label)
    fluid.core.Executor(fluid.CPUPlace()).run(main.desc, scope, 0, True, True, [])
    assert scope.find_var(loss.name) is None  # made in the kid scope, dropped with it
    assert scope.find_var("w").get_tensor()._is_initialized()


def test_force_disable_gc_keeps_what_the_ops_computed():
    main, startup, x, label, loss = _net()
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    _feed_into(scope, x, label)
    fluid.core.Executor(fluid.CPUPlace()).run(main.desc, scope, 0, False, True, [], True)
    hidden = main.global_block().ops[1].output_arg_names[0]  # the first fc's sum
    assert scope.find_var(hidden).get_tensor()._is_initialized()


def test_core_executor_refuses_what_it_cannot_run():
    main, *_ = _net()
    core_exe = fluid.core.Executor(fluid.CPUPlace())
    with pytest.raises(TypeError, match="program's desc"):
        core_exe.run("main", fluid.Scope(), 0)
    with pytest.raises(ValueError, match="block 0"):
        core_exe.run(main.desc, fluid.Scope(), 1)
    with pytest.raises(TypeError, match="expects a place"):
        fluid.core.Executor("cpu")
